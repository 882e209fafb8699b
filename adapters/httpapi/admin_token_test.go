package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/app/usecases"
)

// TestProfilesAreServedToExactlyTheHeadersTheAPITakesForTheAdmin: the API
// gate and the admin server's profiles read the Authorization header one
// way (bearerToken) and compare it with the admin token by one function
// (usecases.IsAdminToken), so a header is the admin's to both or to neither.
func TestProfilesAreServedToExactlyTheHeadersTheAPITakesForTheAdmin(t *testing.T) {
	t.Parallel()
	const admin = "profiles-admin-token-0123"
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	auth := usecases.NewAuthenticator(workspaceKeys{}, usecases.AuthConfig{AdminToken: admin})
	api := newGate(DefaultTenancy()).admit(auth, errorResponder{log: slog.New(slog.DiscardHandler)}, ok)
	profiles := NewAdminHandler(prometheus.NewRegistry(), nil, admin, slog.New(slog.DiscardHandler))
	headers := []string{
		"Bearer " + admin,
		"Bearer " + admin + " ",
		"Bearer   " + admin,
		"Bearer " + admin + "x",
		"Bearer " + strings.ToUpper(admin),
		"Bearer " + admin[:len(admin)-1],
		"bearer " + admin,
		admin,
		"Bearer ",
		"",
	}
	admitted := 0
	for _, h := range headers {
		apiAnswer, profilesAnswer := httptest.NewRecorder(), httptest.NewRecorder()
		for _, s := range []struct {
			handler http.Handler
			rec     *httptest.ResponseRecorder
		}{{api, apiAnswer}, {profiles, profilesAnswer}} {
			req := httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)
			if h != "" {
				req.Header.Set("Authorization", h)
			}
			s.handler.ServeHTTP(s.rec, req)
		}
		apiAdmin, profilesAdmin := apiAnswer.Code == http.StatusOK, profilesAnswer.Code == http.StatusOK
		if apiAdmin != profilesAdmin {
			t.Errorf("Authorization %q: the API answered %d, the profiles %d; want the admin to both or to neither", h, apiAnswer.Code, profilesAnswer.Code)
		}
		if apiAdmin {
			admitted++
		}
	}
	if admitted != 3 {
		t.Errorf("%d headers taken for the admin's, want the 3 bearing its token (with spaces around it or not)", admitted)
	}
}
