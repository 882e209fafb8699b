// Package console serves the web console under /ui: a small hand-written
// single-page app, embedded in the binary, that signs in with a bearer
// token (a workspace API key or the admin token) and reads and writes
// through the JSON API under /api/v1 like any other client. The console
// therefore has no access rule of its own: what a token may see and do is
// decided once, by the API.
//
// The token lives in the tab's sessionStorage and travels only in the
// Authorization header, never in a cookie, so another site cannot make the
// browser send it (no CSRF), and it is gone when the tab closes. The price
// is that script injected into the page could read it; the Content Security
// Policy below allows only the console's own script, and the app writes
// tenant data as text nodes, never as HTML.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// contentSecurityPolicy allows the console's own files and calls to its own
// origin, and nothing else: no inline script, no remote fetch.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console's files under Prefix.
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fileServer := http.StripPrefix(Prefix, http.FileServer(http.FS(files)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary; revalidate so an upgrade shows.
		h.Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}

// Mount adds the console to mux under Prefix, with /ui and / leading to it,
// in front of next, which keeps every other path.
func Mount(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Prefix, Handler())
	toConsole := http.RedirectHandler(Prefix, http.StatusFound)
	mux.Handle("GET /ui", toConsole)
	mux.Handle("GET /{$}", toConsole)
	mux.Handle("/", next)
	return mux
}
