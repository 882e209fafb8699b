package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

func TestDiamondRunsItsBranchesInParallel(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	// B and C each hold their request until the other has arrived too,
	// so the run only completes if they overlap in time.
	var arrived atomic.Int32
	both := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(20 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"branch":"` + r.URL.Query().Get("b") + `"}`))
	}))
	defer srv.Close()
	graph := map[string]any{
		"nodes": []any{
			harness.Node("a", "TRANSFORM", map[string]any{"output": map[string]any{"n": "{{ input.n }}"}}),
			harness.Node("b", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/?b=b", "timeout": "30s"}),
			harness.Node("c", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/?b=c", "timeout": "30s"}),
			harness.Node("d", "TRANSFORM", map[string]any{"output": map[string]any{
				"b": "{{ steps.b.output.body.branch }}", "c": "{{ steps.c.output.body.branch }}", "n": "{{ steps.a.output.n }}"}}),
		},
		"edges": []any{harness.Edge("a", "b"), harness.Edge("a", "c"), harness.Edge("b", "d"), harness.Edge("c", "d")},
	}
	ex := e.WaitFor(e.Start(graph, map[string]any{"n": 3}), "COMPLETED", "FAILED")
	if ex.Status != "COMPLETED" {
		t.Fatalf("diamond ended %s (%v)", ex.Status, ex.Error)
	}
	b, c := ex.Node("b"), ex.Node("c")
	if b.StartedAt == nil || c.StartedAt == nil || b.CompletedAt == nil || c.CompletedAt == nil {
		t.Fatalf("node records lack times: b=%+v c=%+v", b, c)
	}
	if !b.StartedAt.Before(*c.CompletedAt) || !c.StartedAt.Before(*b.CompletedAt) {
		t.Fatalf("b [%s, %s] and c [%s, %s] do not overlap", b.StartedAt, b.CompletedAt, c.StartedAt, c.CompletedAt)
	}
	var d map[string]any
	_ = json.Unmarshal(ex.Node("d").Output, &d)
	if d["b"] != "b" || d["c"] != "c" || d["n"] != float64(3) {
		t.Fatalf("d's output = %v: the HTTP nodes' JSON output must feed the TRANSFORM", d)
	}
}

// TestARunKeepsEveryDigitOfItsNumbers: integers past 2^53 in the input, in
// a config and in an HTTP answer reach the templates, the request sent and
// the node records with every digit. Decoded as float64 on the way they
// came out as 98765432109876543000.
func TestARunKeepsEveryDigitOfItsNumbers(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	sent := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sent <- string(body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	const fromInput, literal = "98765432109876543210", "12345678901234567890"
	graph := map[string]any{
		"nodes": []any{
			harness.Node("t", "TRANSFORM", map[string]any{"output": map[string]any{"literal": json.Number(literal), "id": "{{ input.id }}"}}),
			harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL, "method": "POST",
				"body": map[string]any{"id": "{{ steps.t.output.id }}", "literal": "{{ steps.t.output.literal }}"}}),
		},
		"edges": []any{harness.Edge("t", "call")},
	}
	ex := e.WaitFor(e.Start(graph, map[string]any{"id": json.Number(fromInput)}), "COMPLETED", "FAILED")
	if ex.Status != "COMPLETED" {
		t.Fatalf("run ended %s (%v)", ex.Status, ex.Error)
	}
	want := []string{`"id":` + fromInput, `"literal":` + literal}
	for what, raw := range map[string][]byte{
		"t's output": ex.Node("t").Output, "call's input": ex.Node("call").Input,
		"call's output": ex.Node("call").Output, "the request body": []byte(<-sent),
	} {
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatalf("%s is not JSON: %v: %s", what, err, raw)
		}
		for _, w := range want {
			if !strings.Contains(compact.String(), w) {
				t.Errorf("%s lost digits, want %s in %s", what, w, compact.String())
			}
		}
	}
}

func TestHTTPNodeRetriesA500AndFailsAt404(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{"SLUICE_NODE_RETRY_INITIAL_INTERVAL": "100ms"})
	e := harness.NewE2E(t, base)
	var flaky, missing atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			if flaky.Add(1) == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
		default:
			missing.Add(1)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()

	ok := e.WaitFor(e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/flaky"})}}, nil),
		"COMPLETED", "FAILED")
	if ok.Status != "COMPLETED" || ok.Node("call").Attempt != 2 || flaky.Load() != 2 {
		t.Fatalf("500 then 200: %s, attempt %d, %d requests; want COMPLETED on attempt 2", ok.Status, ok.Node("call").Attempt, flaky.Load())
	}
	bad := e.WaitFor(e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/nope"})}}, nil),
		"COMPLETED", "FAILED")
	if bad.Status != "FAILED" || missing.Load() != 1 || bad.Node("call").Status != "FAILED" {
		t.Fatalf("404: %s, %d requests, node %+v; want FAILED at once, one request", bad.Status, missing.Load(), bad.Node("call"))
	}
}

func TestCancellingARunningExecutionFreesItsSlot(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	graph := map[string]any{
		"nodes": []any{harness.Node("wait", "DELAY", map[string]any{"duration": "1h"}), harness.Node("after", "TRANSFORM", map[string]any{"output": 1})},
		"edges": []any{harness.Edge("wait", "after")},
	}
	id := e.Start(graph, nil)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the delay to start", func() bool {
		var ex harness.Execution
		harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+id, harness.TestAdminToken, nil, &ex)
		return ex.Node("wait").Status == "RUNNING"
	}))
	var res struct{ Status string }
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+id+"/cancel", harness.TestAdminToken, nil, &res); code != 202 || res.Status != "CANCELLING" {
		t.Fatalf("cancel: %d %+v", code, res)
	}
	ex := e.WaitFor(id, "CANCELLED")
	if w, a := ex.Node("wait").Status, ex.Node("after").Status; w != "CANCELLED" || (a != "SKIPPED" && a != "CANCELLED") {
		t.Fatalf("records after cancel: wait %s, after %s", w, a)
	}
	var ws struct{ Active int }
	harness.Call(t, "GET", base+"/api/v1/workspaces/"+e.Ws, harness.TestAdminToken, nil, &ws)
	if ws.Active != 0 {
		t.Fatalf("workspace still has %d active after the cancel", ws.Active)
	}
}

func TestDelaySurvivesAWorkerRestart(t *testing.T) {
	prefix := "restart" + uuid.NewString()[:8] + "."
	env := map[string]string{"TEMPORAL_TASK_QUEUE_PREFIX": prefix}
	base := harness.StartSluice(t, env)
	e := harness.NewE2E(t, base)
	id := e.Start(map[string]any{"nodes": []any{harness.Node("wait", "DELAY", map[string]any{"duration": "3s"})}}, nil)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the delay to start", func() bool {
		var ex harness.Execution
		harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+id, harness.TestAdminToken, nil, &ex)
		return ex.Node("wait").Status == "RUNNING"
	}))
	// Stop the only worker mid-delay, then bring a new one up on the same
	// database and task queues.
	stop := harness.AppsByBase[base]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := stop.App.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	env["DATABASE_URL"] = stop.DBURL
	base2 := harness.StartSluice(t, env)
	e.Base = base2
	ex := e.WaitFor(id, "COMPLETED", "FAILED")
	if ex.Status != "COMPLETED" || ex.Node("wait").Status != "COMPLETED" {
		t.Fatalf("after the restart: %s, wait %s", ex.Status, ex.Node("wait").Status)
	}
}
