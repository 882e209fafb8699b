package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAdminServesProfilesOnlyWhenAskedAndOnlyToTheAdmin: /debug/pprof/ is
// there with SLUICE_ADMIN_PPROF on, for the admin token only, and absent
// by default, while /healthz answers either way without a token.
func TestAdminServesProfilesOnlyWhenAskedAndOnlyToTheAdmin(t *testing.T) {
	t.Parallel()
	const token = "profiles-admin-token-0123"
	for _, profilesToken := range []string{"", token} {
		srv := httptest.NewServer(NewAdminHandler(prometheus.NewRegistry(), nil, profilesToken, slog.New(slog.DiscardHandler)))
		get := func(path, bearer string) (int, string) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		on := profilesToken != ""
		code, body := get("/debug/pprof/", token)
		switch {
		case on && (code != http.StatusOK || !strings.Contains(body, "goroutine")):
			t.Errorf("profiles on: /debug/pprof/ with the token answered %d, want 200 listing the profiles", code)
		case !on && code != http.StatusNotFound:
			t.Errorf("profiles off: /debug/pprof/ answered %d, want 404", code)
		}
		if on {
			for _, bearer := range []string{"", "wrong-token-0123456789", token + "x"} {
				for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
					if code, _ := get(path, bearer); code != http.StatusUnauthorized {
						t.Errorf("profiles on: %s with bearer %q answered %d, want 401", path, bearer, code)
					}
				}
			}
		}
		if code, _ := get("/healthz", ""); code != http.StatusOK {
			t.Errorf("profiles %v: /healthz answered %d", on, code)
		}
		srv.Close()
	}
}
