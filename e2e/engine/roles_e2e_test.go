package engine

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func integrationEnv(t *testing.T) (dbURL, temporalAddr string) {
	t.Helper()
	temporalAddr = harness.TemporalAddress(t)
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	return pgtest.URL(t), temporalAddr
}

// TestStandaloneRolesServeMetricsAndReadiness runs the api, the dispatcher
// and the worker as three processes on one Postgres and one Temporal, as in
// production, runs an execution through them, and reads each role's admin
// server: /healthz, /readyz with the checks that role needs, and /metrics
// with the series that role's work produced.
func TestStandaloneRolesServeMetricsAndReadiness(t *testing.T) {
	dbURL, temporalAddr := integrationEnv(t)
	env := []string{
		"DATABASE_URL=" + dbURL,
		"TEMPORAL_ADDRESS=" + temporalAddr,
		"TEMPORAL_TASK_QUEUE_PREFIX=roles" + uuid.NewString()[:8] + ".",
		"SLUICE_ADMIN_TOKEN=" + harness.TestAdminToken,
		"SLUICE_DISPATCH_POLL_INTERVAL=200ms",
	}
	api := harness.StartRole(t, "api", env)
	dispatcher := harness.StartRole(t, "dispatcher", env)
	worker := harness.StartRole(t, "worker", env)

	for name, r := range map[string]*harness.Role{"api": api, "dispatcher": dispatcher, "worker": worker} {
		if code, body := get(t, r.Admin+"/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
			t.Errorf("%s /healthz: %d %s", name, code, body)
		}
	}
	wantChecks := map[string][]string{
		"api":        {"postgres"},
		"dispatcher": {"postgres", "temporal", "lease", "temporal_breaker"},
		"worker":     {"postgres", "temporal"},
	}
	for name, r := range map[string]*harness.Role{"api": api, "dispatcher": dispatcher, "worker": worker} {
		var ready struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}
		porttest.Eventually(t, 30*time.Second, porttest.Holds(name+" to be ready", func() bool {
			code, body := get(t, r.Admin+"/readyz")
			return code == 200 && json.Unmarshal([]byte(body), &ready) == nil
		}))
		if len(ready.Checks) != len(wantChecks[name]) {
			t.Errorf("%s /readyz checks = %v, want %v", name, ready.Checks, wantChecks[name])
		}
		for _, c := range wantChecks[name] {
			if ready.Checks[c] != "ok" {
				t.Errorf("%s /readyz checks = %v, want %s ok", name, ready.Checks, c)
			}
		}
	}

	base := api.HTTP
	graph := map[string]any{"nodes": []any{harness.Node("t", "TRANSFORM", map[string]any{"output": map[string]any{"x": "{{ input.x }}"}})}}
	ops := harness.NewE2EWithPlan(t, base, "FREE")
	ops.WaitFor(ops.StartIn(graph, map[string]any{"x": 1}), "COMPLETED")

	wantMetrics := map[*harness.Role][]string{
		dispatcher: {
			"queue_items_dispatched_total 1",
			`dispatcher_lease_held{lease="processExecutionQueue"} 1`,
			"queue_item_dispatch_failures_count 1",
			`queue_depth{plan="FREE"} 0`,
			`executions_running{plan="FREE"} 0`,
		},
		worker: {`node_duration_seconds_count{outcome="completed",type="TRANSFORM"} 1`},
		// The api holds the idempotency-key purge's lease.
		api: {"go_goroutines", "shedlock_acquisition_failures"},
	}
	for r, want := range wantMetrics {
		var body string
		porttest.Eventually(t, 10*time.Second, porttest.Holds("the metrics", func() bool {
			_, body = get(t, r.Admin+"/metrics")
			for _, w := range want {
				if !strings.Contains(body, w) {
					return false
				}
			}
			return true
		}))
	}
}

// TestReadyzNamesTheFailingPartWithoutItsError starts a dispatcher whose
// Temporal is not there: /readyz answers 503 naming temporal, and nothing
// of the error, which goes to the log instead.
func TestReadyzNamesTheFailingPartWithoutItsError(t *testing.T) {
	dbURL, _ := integrationEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	_ = ln.Close()
	dispatcher := harness.StartRole(t, "dispatcher", []string{"DATABASE_URL=" + dbURL, "TEMPORAL_ADDRESS=" + deadAddr})
	var code int
	var body string
	var p struct {
		Type, Detail string
	}
	// Until its first lease attempt the lease is failing too.
	porttest.Eventually(t, 20*time.Second, porttest.Holds("readyz to name temporal alone", func() bool {
		code, body = get(t, dispatcher.Admin+"/readyz")
		return code == 503 && json.Unmarshal([]byte(body), &p) == nil && p.Detail == "not ready: temporal failing (details in the log)"
	}))
	if p.Type != "https://sluice.dev/problems/not-ready" {
		t.Errorf("/readyz problem = %+v", p)
	}
	if _, port, _ := net.SplitHostPort(deadAddr); strings.Contains(body, port) {
		t.Errorf("/readyz leaks the error text: %s", body)
	}
}
