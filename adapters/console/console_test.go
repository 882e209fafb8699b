package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/adapters/console"
)

func TestMountServesTheConsoleAndPassesEverythingElseOn(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handled-By", "api")
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(console.Mount(api))
	t.Cleanup(srv.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	tests := []struct {
		name        string
		method      string
		path        string
		status      int
		contentType string
		body        string
		location    string
		api         bool
	}{
		{name: "the page", method: "GET", path: "/ui/", status: 200, contentType: "text/html", body: `<script type="module" src="app.js"></script>`},
		{name: "the entry module", method: "GET", path: "/ui/app.js", status: 200, contentType: "text/javascript", body: `from "./run.js"`},
		{name: "a module it imports", method: "GET", path: "/ui/dag.js", status: 200, contentType: "text/javascript", body: "function layout(graph)"},
		{name: "the styles", method: "GET", path: "/ui/app.css", status: 200, contentType: "text/css", body: ".dag-node"},
		{name: "a missing file", method: "GET", path: "/ui/nope.js", status: 404},
		{name: "a write", method: "POST", path: "/ui/", status: 405},
		{name: "the bare prefix", method: "GET", path: "/ui", status: 302, location: "/ui/"},
		{name: "the root", method: "GET", path: "/", status: 302, location: "/ui/"},
		{name: "the API", method: "GET", path: "/api/v1/workspaces", status: http.StatusTeapot, api: true},
		{name: "health", method: "GET", path: "/healthz", status: http.StatusTeapot, api: true},
		{name: "a write to the root", method: "POST", path: "/", status: http.StatusTeapot, api: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s: %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
			}
			if got := resp.Header.Get("X-Handled-By") == "api"; got != tt.api {
				t.Errorf("handled by the API: %v, want %v", got, tt.api)
			}
			if tt.contentType != "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.contentType) {
				t.Errorf("Content-Type %q, want %s", resp.Header.Get("Content-Type"), tt.contentType)
			}
			if !strings.Contains(string(body), tt.body) {
				t.Errorf("body lacks %q", tt.body)
			}
			if tt.location != "" && resp.Header.Get("Location") != tt.location {
				t.Errorf("Location %q, want %q", resp.Header.Get("Location"), tt.location)
			}
			if strings.HasPrefix(tt.path, "/ui/") && tt.status == 200 {
				csp := resp.Header.Get("Content-Security-Policy")
				if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "connect-src 'self'") {
					t.Errorf("Content-Security-Policy %q does not confine script and fetches to the console's origin", csp)
				}
				if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
					t.Error("no X-Content-Type-Options: nosniff")
				}
			}
		})
	}
}

// TestEveryModuleImportIsServed: the browser loads the console's modules by
// the paths they import each other by, so each must be a file that is
// served as JavaScript, which a module script requires.
func TestEveryModuleImportIsServed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(console.Handler())
	t.Cleanup(srv.Close)
	files, err := filepath.Glob(filepath.Join("static", "*.js"))
	if err != nil || len(files) < 2 {
		t.Fatalf("console modules: %v %v", files, err)
	}
	imports := regexp.MustCompile(`(?m)^import .* from "\./([a-z]+\.js)";$`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(src), "// @ts-check\n") {
			t.Errorf("%s does not start with // @ts-check", f)
		}
		for _, m := range imports.FindAllStringSubmatch(string(src), -1) {
			resp, err := http.Get(srv.URL + console.Prefix + m[1])
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
				t.Errorf("%s imports %s, served %d %s", f, m[1], resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
	}
}
