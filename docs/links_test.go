package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// linkPattern finds a Markdown link or image target: the part in
// parentheses after the closing bracket, up to a space (a title) or the
// closing parenthesis.
var linkPattern = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// htmlAnchor finds an explicit anchor, <a id="name"></a>.
var htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)

// inlineCode matches a code span, whose brackets are not links.
var inlineCode = regexp.MustCompile("`[^`]*`")

// page is one Markdown file: its links, and the anchors its headings make.
type page struct {
	links   []link
	anchors map[string]bool
}

type link struct {
	line   int
	target string
}

// readPage reads the links and anchors of a Markdown file, skipping fenced
// code blocks, whose text is neither.
func readPage(t *testing.T, path string) page {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if h, ok := heading(line); ok {
			s := slug(h)
			if n := seen[s]; n > 0 {
				p.anchors[s+"-"+strconv.Itoa(n)] = true
			} else {
				p.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range linkPattern.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, link{line: i + 1, target: m[1]})
		}
	}
	return p
}

// heading returns an ATX heading's text.
func heading(line string) (string, bool) {
	trimmed := strings.TrimLeft(line, "#")
	level := len(line) - len(trimmed)
	if level == 0 || level > 6 || !strings.HasPrefix(trimmed, " ") {
		return "", false
	}
	return strings.TrimSpace(trimmed), true
}

// slug is GitHub's anchor for a heading: lower case, every character
// but letters, digits, spaces, hyphens and underscores dropped, and each
// space a hyphen.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestEveryRelativeLinkAndAnchorResolves reads the README, the changelog
// and every page under docs/, and fails for each relative link whose file
// is missing or whose anchor no heading of that file makes.
func TestEveryRelativeLinkAndAnchorResolves(t *testing.T) {
	t.Parallel()
	files := []string{"../README.md", "../CHANGELOG.md"}
	pagesHere, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pagesHere) == 0 {
		t.Fatal("no pages under docs/")
	}
	files = append(files, pagesHere...)
	pages := map[string]page{}
	load := func(path string) page {
		path = filepath.Clean(path)
		if p, ok := pages[path]; ok {
			return p
		}
		p := readPage(t, path)
		pages[path] = p
		return p
	}
	checked := 0
	for _, file := range files {
		for _, l := range load(file).links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, fragment, _ := strings.Cut(target, "#")
			dest := filepath.Clean(file)
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: %s: no such file %s", file, l.line, target, dest)
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: %s: an anchor into a file that is not Markdown", file, l.line, target)
				continue
			}
			if !load(dest).anchors[fragment] {
				t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s", file, l.line, target, dest, fragment)
			}
		}
	}
	t.Logf("%d relative links in %d files resolve", checked, len(files))
}

// TestSlugIsGitHubs pins the anchor rule on headings the pages use.
func TestSlugIsGitHubs(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"Measured (`make bench`)":                                  "measured-make-bench",
		"Where a run's time goes":                                  "where-a-runs-time-goes",
		"Ways work comes in: delayed, bulk and scheduled enqueues": "ways-work-comes-in-delayed-bulk-and-scheduled-enqueues",
		"The image, the chart, the rules and the dashboard":        "the-image-the-chart-the-rules-and-the-dashboard",
		"Retry from the failed node, and requeue":                  "retry-from-the-failed-node-and-requeue",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// testName finds a test or benchmark the docs name, in code spans.
var testName = regexp.MustCompile("`((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)`")

// TestEveryTestTheDocsNameExists fails when a page names a test or a
// benchmark (as the inventory and the figures do) that no _test.go file
// of the repository declares, so a renamed or deleted test cannot leave
// a bound documented as held by nothing.
func TestEveryTestTheDocsNameExists(t *testing.T) {
	t.Parallel()
	declared := map[string]bool{}
	funcDecl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".devstack" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcDecl.FindAllSubmatch(b, -1) {
			declared[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pagesHere, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, file := range append([]string{"../README.md", "../CHANGELOG.md"}, pagesHere...) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testName.FindAllStringSubmatch(string(b), -1) {
			named++
			if !declared[m[1]] {
				t.Errorf("%s names %s, which no _test.go file declares", file, m[1])
			}
		}
	}
	t.Logf("%d names of tests and benchmarks in the docs, %d declared in the tree", named, len(declared))
}
