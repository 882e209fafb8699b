package service

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// configDoc is the page whose table is generated from configVars, and
// the markers around the generated part.
const (
	configDoc        = "../../../docs/configuration.md"
	configTableBegin = "<!-- generated from cmd/sluice/service/config_vars.go: begin -->"
	configTableEnd   = "<!-- generated from cmd/sluice/service/config_vars.go: end -->"
)

// recordingLookup answers from env and records every name asked for.
func recordingLookup(env map[string]string, asked map[string]bool) func(string) (string, bool) {
	return func(name string) (string, bool) {
		asked[name] = true
		v, ok := env[name]
		return v, ok
	}
}

// TestEveryVariableReadIsDeclaredAndEveryDeclaredOneIsRead fails when
// LoadConfig reads a variable the table does not declare, or the table
// declares one that nothing reads.
func TestEveryVariableReadIsDeclaredAndEveryDeclaredOneIsRead(t *testing.T) {
	t.Parallel()
	asked := map[string]bool{}
	if _, err := LoadConfig(recordingLookup(nil, asked), false); err != nil {
		t.Fatal(err)
	}
	for name := range asked {
		if !declaredVars[name] {
			t.Errorf("LoadConfig reads %s, which configVars does not declare", name)
		}
	}
	for _, v := range configVars {
		if !v.External && !asked[v.Name] {
			t.Errorf("configVars declares %s, which LoadConfig never reads", v.Name)
		}
		if v.External && asked[v.Name] {
			t.Errorf("%s is marked External but LoadConfig reads it", v.Name)
		}
	}
	for _, name := range retiredVars {
		if !asked[name] {
			t.Errorf("retired %s is not checked at start-up", name)
		}
	}
	t.Logf("%d variables read, %d declared (%d read by libraries), %d retired", len(asked), len(configVars), countExternal(), len(retiredVars))
}

func countExternal() int {
	n := 0
	for _, v := range configVars {
		if v.External {
			n++
		}
	}
	return n
}

// TestAnUndeclaredVariableIsABadConfiguration shows the guard: a read of
// a name the table does not hold is an error naming it and the table.
func TestAnUndeclaredVariableIsABadConfiguration(t *testing.T) {
	t.Parallel()
	e := &env{lookup: func(string) (string, bool) { return "", false }}
	e.str("SLUICE_NOT_DECLARED_ANYWHERE", "x")
	if len(e.errs) != 1 || !strings.Contains(e.errs[0].Error(), "SLUICE_NOT_DECLARED_ANYWHERE") || !strings.Contains(e.errs[0].Error(), "configVars") {
		t.Fatalf("errors = %v, want one naming the variable and configVars", e.errs)
	}
	e = &env{lookup: func(string) (string, bool) { return "", false }}
	e.str(configVars[0].Name, "")
	if len(e.errs) != 0 {
		t.Fatalf("a declared variable's read gave errors %v", e.errs)
	}
}

// TestADocumentedDefaultIsTheDefault sets each variable to its declared
// Default and fails when the configuration differs from the one read
// with nothing set: the table, and so the docs, would state a default
// that is not the one in force.
func TestADocumentedDefaultIsTheDefault(t *testing.T) {
	t.Parallel()
	base, err := LoadConfig(recordingLookup(nil, map[string]bool{}), false)
	if err != nil {
		t.Fatal(err)
	}
	// The comparison sees a change: a value other than the default differs.
	changed, err := LoadConfig(recordingLookup(map[string]string{"SLUICE_DISPATCH_BATCH_SIZE": "11"}, map[string]bool{}), false)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(withoutFuncs(base), withoutFuncs(changed)) {
		t.Fatal("a configuration with SLUICE_DISPATCH_BATCH_SIZE=11 equals the default one: the check below could not fail")
	}
	checked := 0
	for _, v := range configVars {
		if v.External || v.Default == "" {
			continue
		}
		cfg, err := LoadConfig(recordingLookup(map[string]string{v.Name: v.Default}, map[string]bool{}), false)
		if err != nil {
			t.Errorf("%s=%q (its declared default) is refused: %v", v.Name, v.Default, err)
			continue
		}
		if !reflect.DeepEqual(withoutFuncs(base), withoutFuncs(cfg)) {
			t.Errorf("%s: the declared default %q is not the default LoadConfig uses", v.Name, v.Default)
			continue
		}
		checked++
	}
	t.Logf("%d literal defaults hold", checked)
}

// withoutFuncs drops the configuration's functions, which are never
// equal to one another, so that two configurations compare by value.
func withoutFuncs(c Config) Config {
	c.Retention.Now = nil
	c.Feed.Now = nil
	return c
}

// renderConfigTable is the docs' table of configVars.
func renderConfigTable() string {
	var b strings.Builder
	b.WriteString("| role | variable | default | meaning |\n|---|---|---|---|\n")
	for _, v := range configVars {
		def := v.Note
		if v.Default != "" {
			def = "`" + v.Default + "`"
			if v.Note != "" {
				def += " (" + v.Note + ")"
			}
		}
		b.WriteString("| " + v.Roles + " | `" + v.Name + "` | " + def + " | " + v.Meaning + " |\n")
	}
	b.WriteString("\nRetired, refused at start-up with where the setting went: ")
	retired := slices.Clone(retiredVars)
	slices.Sort(retired)
	for i, name := range retired {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("`" + name + "`")
	}
	b.WriteString(".\n")
	return b.String()
}

// TestConfigurationDocIsTheTable fails when docs/configuration.md's
// table is not what configVars renders: a variable without its row, or a
// row whose default or meaning differs. SLUICE_WRITE_DOCS=1 writes it.
func TestConfigurationDocIsTheTable(t *testing.T) {
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	before, rest, ok := strings.Cut(doc, configTableBegin+"\n")
	_, after, ok2 := strings.Cut(rest, configTableEnd)
	if !ok || !ok2 {
		t.Fatalf("%s lacks the markers %q and %q around its table", configDoc, configTableBegin, configTableEnd)
	}
	want := renderConfigTable()
	current, _, _ := strings.Cut(rest, configTableEnd)
	if current == want {
		return
	}
	if os.Getenv("SLUICE_WRITE_DOCS") == "1" {
		if err := os.WriteFile(configDoc, []byte(before+configTableBegin+"\n"+want+configTableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", configDoc)
		return
	}
	gotLines, wantLines := strings.Split(current, "\n"), strings.Split(want, "\n")
	for i := range max(len(gotLines), len(wantLines)) {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("%s is not the table configVars renders; first difference at row %d:\n doc:   %s\n table: %s\nregenerate with SLUICE_WRITE_DOCS=1 go test -run TestConfigurationDocIsTheTable ./cmd/sluice/service/", configDoc, i+1, g, w)
		}
	}
}
