package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluicehq/sluice/app/usecases"
)

// ReadinessCheck is one thing a role needs before it can do its work:
// Postgres, Temporal, the dispatcher's lease. Check returns nil when ready.
type ReadinessCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// ObserveReadiness returns checks that also record each result in the
// gauge readiness_check_ok{check} (1 passing, 0 failing), registered with
// reg, so a role that stays not ready can be alerted on from its metrics.
// The gauge moves when /readyz is asked, as the orchestrator's probe does.
func ObserveReadiness(reg prometheus.Registerer, checks []ReadinessCheck) []ReadinessCheck {
	ok := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "readiness_check_ok", Help: "1 if the named readiness check passed when /readyz last ran it, 0 if it failed.",
	}, []string{"check"})
	reg.MustRegister(ok)
	out := make([]ReadinessCheck, len(checks))
	for i, c := range checks {
		out[i] = ReadinessCheck{Name: c.Name, Check: func(ctx context.Context) error {
			err := c.Check(ctx)
			v := 1.0
			if err != nil {
				v = 0
			}
			ok.WithLabelValues(c.Name).Set(v)
			return err
		}}
	}
	return out
}

// InstrumentAPI counts the API's answers in api_requests_total{code,
// method}, registered with reg, so an error rate can be alerted on. Both
// labels are bounded: HTTP status codes and methods.
func InstrumentAPI(reg prometheus.Registerer, h http.Handler) http.Handler {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "api_requests_total", Help: "Requests the API answered, by status code and method.",
	}, []string{"code", "method"})
	reg.MustRegister(requests)
	return promhttp.InstrumentHandlerCounter(requests, h)
}

// readinessTimeout bounds one /readyz answer, so a hung dependency reads as
// failing rather than as a probe timeout.
const readinessTimeout = 3 * time.Second

// readinessFresh is how long a readiness answer is served again: /readyz
// is unauthenticated, so however often it is called the checks (a
// database ping, a Temporal health call) run at most once per period.
const readinessFresh = time.Second

// readiness is a process's readiness checks, run by both /readyz answers:
// the admin server's and the API port's. Checks with the same name, which
// several roles in one process provide, run once.
type readiness struct {
	checks map[string]ReadinessCheck

	// mu is held while the checks run, so concurrent calls wait for that
	// one run and share its answer.
	mu   sync.Mutex
	at   time.Time
	last map[string]error
}

func newReadiness(checks []ReadinessCheck) *readiness {
	r := &readiness{checks: map[string]ReadinessCheck{}}
	for _, c := range checks {
		r.checks[c.Name] = c
	}
	return r
}

// run returns each check's error by name, from the last run if it is
// younger than readinessFresh, else from a new one bounded by
// readinessTimeout. A caller that gives up does not cut the run short for
// the others.
func (r *readiness) run(ctx context.Context) map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && time.Since(r.at) < readinessFresh {
		return r.last
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readinessTimeout)
	defer cancel()
	results := make(map[string]error, len(r.checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, c := range r.checks {
		wg.Go(func() {
			err := c.Check(ctx)
			mu.Lock()
			results[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	r.at, r.last = time.Now(), results
	return results
}

// NewAdminHandler is the operator's surface of every role, served on
// SLUICE_ADMIN_ADDR: /metrics for Prometheus, /healthz for liveness (the
// process serves) and /readyz for readiness (every check passes); with
// profilesToken set, also /debug/pprof/ (SLUICE_ADMIN_PPROF), for that
// bearer token only: a profile names the code and costs the process while
// it is taken, so whoever reaches the admin port must not take one at will.
func NewAdminHandler(gatherer prometheus.Gatherer, checks []ReadinessCheck, profilesToken string, log *slog.Logger) http.Handler {
	ready := newReadiness(checks)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		checks, failing := readinessReport(ready.run(r.Context()), log)
		if len(failing) > 0 {
			writeProblem(w, http.StatusServiceUnavailable, "not-ready", "Not ready", notReadyDetail(failing), nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "checks": checks})
	})
	if profilesToken != "" {
		mux.Handle("GET /debug/pprof/", bearerOnly(profilesToken, http.HandlerFunc(pprof.Index)))
		mux.Handle("GET /debug/pprof/profile", bearerOnly(profilesToken, http.HandlerFunc(pprof.Profile)))
		mux.Handle("GET /debug/pprof/trace", bearerOnly(profilesToken, http.HandlerFunc(pprof.Trace)))
	}
	return mux
}

// bearerOnly serves next only to a request bearing the admin token, as
// the API tells it (usecases.IsAdminToken); anything else gets a 401.
func bearerOnly(adminToken string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !usecases.IsAdminToken(bearerToken(r), adminToken) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeProblem(w, http.StatusUnauthorized, "unauthenticated", "Unauthenticated", "the admin bearer token is required for profiles", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readinessReport turns check results into what /readyz may say: each
// check's name with "ok" or "failing", and the failing names in order. The
// errors go to the log only: their text names hosts, users and databases,
// which an unauthenticated probe must not learn.
func readinessReport(results map[string]error, log *slog.Logger) (map[string]string, []string) {
	checks := make(map[string]string, len(results))
	var failing []string
	for name, err := range results {
		if err != nil {
			checks[name] = "failing"
			failing = append(failing, name)
			log.Warn("not ready", "check", name, "error", err)
			continue
		}
		checks[name] = "ok"
	}
	sort.Strings(failing)
	return checks, failing
}

func notReadyDetail(failing []string) string {
	return "not ready: " + strings.Join(failing, ", ") + " failing (details in the log)"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
