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

// TestAdminServesProfilesOnlyWhenAsked: /debug/pprof/ is there with
// SLUICE_ADMIN_PPROF on and absent by default, while /healthz answers
// either way.
func TestAdminServesProfilesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, profiles := range []bool{false, true} {
		srv := httptest.NewServer(NewAdminHandler(prometheus.NewRegistry(), nil, profiles, slog.New(slog.DiscardHandler)))
		get := func(path string) (int, string) {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		code, body := get("/debug/pprof/")
		switch {
		case profiles && (code != http.StatusOK || !strings.Contains(body, "goroutine")):
			t.Errorf("profiles on: /debug/pprof/ answered %d, want 200 listing the profiles", code)
		case !profiles && code != http.StatusNotFound:
			t.Errorf("profiles off: /debug/pprof/ answered %d, want 404", code)
		}
		if code, _ := get("/healthz"); code != http.StatusOK {
			t.Errorf("profiles %v: /healthz answered %d", profiles, code)
		}
		srv.Close()
	}
}
