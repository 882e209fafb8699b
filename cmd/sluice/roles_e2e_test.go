package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/ports/porttest"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildSluice builds the sluice binary once per test run.
func buildSluice(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("building sluice: %v", buildErr)
	}
	return builtBin
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// role is a sluice process started by a test.
type role struct {
	admin string // base URL of its admin server
	http  string // base URL of its API, for the api role
	log   *strings.Builder
}

var listening = regexp.MustCompile(`"msg":"(admin|http) listening","addr":"([^"]+)"`)

// startRole runs `sluice <name>` with env and waits until its servers
// listen, reading their addresses from its log.
func startRole(t testing.TB, name string, env []string) *role {
	t.Helper()
	cmd := exec.Command(buildSluice(t), name)
	cmd.Env = append(os.Environ(), append([]string{"SLUICE_ADMIN_ADDR=127.0.0.1:0", "SLUICE_HTTP_ADDR=127.0.0.1:0", "SLUICE_LOG_LEVEL=info"}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	r := &role{log: &strings.Builder{}}
	found := make(chan struct{})
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		closed := false
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			r.log.WriteString(line + "\n")
			if m := listening.FindStringSubmatch(line); m != nil {
				if m[1] == "admin" {
					r.admin = "http://" + m[2]
				} else {
					r.http = "http://" + m[2]
				}
			}
			if !closed && r.admin != "" && (name != "api" || r.http != "") {
				close(found)
				closed = true
			}
			mu.Unlock()
		}
	}()
	select {
	case <-found:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("sluice %s did not listen within 60s; its log:\n%s", name, r.log)
	}
	mu.Lock()
	defer mu.Unlock()
	return r
}

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
	temporalAddr = temporalAddress(t)
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
		"SLUICE_ADMIN_TOKEN=" + testAdminToken,
		"SLUICE_DISPATCH_POLL_INTERVAL=200ms",
	}
	api := startRole(t, "api", env)
	dispatcher := startRole(t, "dispatcher", env)
	worker := startRole(t, "worker", env)

	for name, r := range map[string]*role{"api": api, "dispatcher": dispatcher, "worker": worker} {
		if code, body := get(t, r.admin+"/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
			t.Errorf("%s /healthz: %d %s", name, code, body)
		}
	}
	wantChecks := map[string][]string{
		"api":        {"postgres"},
		"dispatcher": {"postgres", "temporal", "lease", "temporal_breaker"},
		"worker":     {"postgres", "temporal"},
	}
	for name, r := range map[string]*role{"api": api, "dispatcher": dispatcher, "worker": worker} {
		var ready struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}
		porttest.Eventually(t, 30*time.Second, porttest.Holds(name+" to be ready", func() bool {
			code, body := get(t, r.admin+"/readyz")
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

	base := api.http
	graph := map[string]any{"nodes": []any{node("t", "TRANSFORM", map[string]any{"output": map[string]any{"x": "{{ input.x }}"}})}}
	ops := newE2EWithPlan(t, base, "FREE")
	ops.waitFor(ops.startIn(graph, map[string]any{"x": 1}), "COMPLETED")

	wantMetrics := map[*role][]string{
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
			_, body = get(t, r.admin+"/metrics")
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
	dispatcher := startRole(t, "dispatcher", []string{"DATABASE_URL=" + dbURL, "TEMPORAL_ADDRESS=" + deadAddr})
	var code int
	var body string
	var p struct {
		Type, Detail string
	}
	// Until its first lease attempt the lease is failing too.
	porttest.Eventually(t, 20*time.Second, porttest.Holds("readyz to name temporal alone", func() bool {
		code, body = get(t, dispatcher.admin+"/readyz")
		return code == 503 && json.Unmarshal([]byte(body), &p) == nil && p.Detail == "not ready: temporal failing (details in the log)"
	}))
	if p.Type != "https://sluice.dev/problems/not-ready" {
		t.Errorf("/readyz problem = %+v", p)
	}
	if _, port, _ := net.SplitHostPort(deadAddr); strings.Contains(body, port) {
		t.Errorf("/readyz leaks the error text: %s", body)
	}
}
