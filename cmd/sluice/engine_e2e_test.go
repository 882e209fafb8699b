package main

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
	"github.com/sluicehq/sluice/ports/porttest"
	"go.uber.org/fx"
)

// e2e drives one workspace on a running sluice.
type e2e struct {
	t    testing.TB
	base string
	ws   string
}

// newE2E drives a new ENTERPRISE workspace.
func newE2E(t testing.TB, base string) *e2e {
	return newE2EWithPlan(t, base, "ENTERPRISE")
}

type nodeRecord struct {
	Key         string          `json:"key"`
	Status      string          `json:"status"`
	Attempt     int             `json:"attempt"`
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
	Error       *string         `json:"error"`
	StartedAt   *time.Time      `json:"startedAt"`
	CompletedAt *time.Time      `json:"completedAt"`
}

type execution struct {
	ID     string       `json:"id"`
	Status string       `json:"status"`
	Error  *string      `json:"error"`
	Nodes  []nodeRecord `json:"nodes"`
}

func (e *execution) node(key string) nodeRecord {
	for _, n := range e.Nodes {
		if n.Key == key {
			return n
		}
	}
	return nodeRecord{}
}

// start creates a definition of graph and starts it, returning the
// execution id once dispatched.
//
// Each start gets a workspace of its own, so its execution is the only one
// there (see executionOf).
func (e *e2e) start(graph map[string]any, input map[string]any) string {
	e.t.Helper()
	e.ws = newE2E(e.t, e.base).ws
	return e.startIn(graph, input)
}

// startIn is start in e's own workspace.
func (e *e2e) startIn(graph map[string]any, input map[string]any) string {
	t := e.t
	t.Helper()
	var def struct{ ID string }
	if code := call(t, "POST", e.base+"/api/v1/workflow/definitions", testAdminToken,
		map[string]any{"workspaceId": e.ws, "name": "g", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	var q struct {
		QueueID string `json:"queueId"`
	}
	body := map[string]any{"workspaceId": e.ws, "workflowDefinitionId": def.ID}
	if input != nil {
		body["input"] = input
	}
	if code := call(t, "POST", e.base+"/api/v1/workflow/executions/start", testAdminToken, body, &q); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return executionOf(t, e.base, e.ws, q.QueueID)
}

func (e *e2e) waitFor(execID string, statuses ...string) execution {
	e.t.Helper()
	var ex execution
	porttest.Eventually(e.t, 60*time.Second, porttest.Holds("execution to reach "+statuses[0], func() bool {
		ex = execution{}
		call(e.t, "GET", e.base+"/api/v1/workflow/executions/"+execID, testAdminToken, nil, &ex)
		for _, s := range statuses {
			if ex.Status == s {
				return true
			}
		}
		return false
	}))
	return ex
}

func node(key, typ string, cfg map[string]any) map[string]any {
	return map[string]any{"key": key, "type": typ, "config": cfg}
}

func edge(from, to string) map[string]any { return map[string]any{"from": from, "to": to} }

func TestDiamondRunsItsBranchesInParallel(t *testing.T) {
	base := startSluice(t, nil)
	e := newE2E(t, base)
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
			node("a", "TRANSFORM", map[string]any{"output": map[string]any{"n": "{{ input.n }}"}}),
			node("b", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/?b=b", "timeout": "30s"}),
			node("c", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/?b=c", "timeout": "30s"}),
			node("d", "TRANSFORM", map[string]any{"output": map[string]any{
				"b": "{{ steps.b.output.body.branch }}", "c": "{{ steps.c.output.body.branch }}", "n": "{{ steps.a.output.n }}"}}),
		},
		"edges": []any{edge("a", "b"), edge("a", "c"), edge("b", "d"), edge("c", "d")},
	}
	ex := e.waitFor(e.start(graph, map[string]any{"n": 3}), "COMPLETED", "FAILED")
	if ex.Status != "COMPLETED" {
		t.Fatalf("diamond ended %s (%v)", ex.Status, ex.Error)
	}
	b, c := ex.node("b"), ex.node("c")
	if b.StartedAt == nil || c.StartedAt == nil || b.CompletedAt == nil || c.CompletedAt == nil {
		t.Fatalf("node records lack times: b=%+v c=%+v", b, c)
	}
	if !b.StartedAt.Before(*c.CompletedAt) || !c.StartedAt.Before(*b.CompletedAt) {
		t.Fatalf("b [%s, %s] and c [%s, %s] do not overlap", b.StartedAt, b.CompletedAt, c.StartedAt, c.CompletedAt)
	}
	var d map[string]any
	_ = json.Unmarshal(ex.node("d").Output, &d)
	if d["b"] != "b" || d["c"] != "c" || d["n"] != float64(3) {
		t.Fatalf("d's output = %v: the HTTP nodes' JSON output must feed the TRANSFORM", d)
	}
}

// TestARunKeepsEveryDigitOfItsNumbers: integers past 2^53 in the input, in
// a config and in an HTTP answer reach the templates, the request sent and
// the node records with every digit. Decoded as float64 on the way they
// came out as 98765432109876543000.
func TestARunKeepsEveryDigitOfItsNumbers(t *testing.T) {
	base := startSluice(t, nil)
	e := newE2E(t, base)
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
			node("t", "TRANSFORM", map[string]any{"output": map[string]any{"literal": json.Number(literal), "id": "{{ input.id }}"}}),
			node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL, "method": "POST",
				"body": map[string]any{"id": "{{ steps.t.output.id }}", "literal": "{{ steps.t.output.literal }}"}}),
		},
		"edges": []any{edge("t", "call")},
	}
	ex := e.waitFor(e.start(graph, map[string]any{"id": json.Number(fromInput)}), "COMPLETED", "FAILED")
	if ex.Status != "COMPLETED" {
		t.Fatalf("run ended %s (%v)", ex.Status, ex.Error)
	}
	want := []string{`"id":` + fromInput, `"literal":` + literal}
	for what, raw := range map[string][]byte{
		"t's output": ex.node("t").Output, "call's input": ex.node("call").Input,
		"call's output": ex.node("call").Output, "the request body": []byte(<-sent),
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
	base := startSluice(t, map[string]string{"SLUICE_NODE_RETRY_INITIAL_INTERVAL": "100ms"})
	e := newE2E(t, base)
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

	ok := e.waitFor(e.start(map[string]any{"nodes": []any{node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/flaky"})}}, nil),
		"COMPLETED", "FAILED")
	if ok.Status != "COMPLETED" || ok.node("call").Attempt != 2 || flaky.Load() != 2 {
		t.Fatalf("500 then 200: %s, attempt %d, %d requests; want COMPLETED on attempt 2", ok.Status, ok.node("call").Attempt, flaky.Load())
	}
	bad := e.waitFor(e.start(map[string]any{"nodes": []any{node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/nope"})}}, nil),
		"COMPLETED", "FAILED")
	if bad.Status != "FAILED" || missing.Load() != 1 || bad.node("call").Status != "FAILED" {
		t.Fatalf("404: %s, %d requests, node %+v; want FAILED at once, one request", bad.Status, missing.Load(), bad.node("call"))
	}
}

func TestCancellingARunningExecutionFreesItsSlot(t *testing.T) {
	base := startSluice(t, nil)
	e := newE2E(t, base)
	graph := map[string]any{
		"nodes": []any{node("wait", "DELAY", map[string]any{"duration": "1h"}), node("after", "TRANSFORM", map[string]any{"output": 1})},
		"edges": []any{edge("wait", "after")},
	}
	id := e.start(graph, nil)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the delay to start", func() bool {
		var ex execution
		call(t, "GET", base+"/api/v1/workflow/executions/"+id, testAdminToken, nil, &ex)
		return ex.node("wait").Status == "RUNNING"
	}))
	var res struct{ Status string }
	if code := call(t, "POST", base+"/api/v1/workflow/executions/"+id+"/cancel", testAdminToken, nil, &res); code != 202 || res.Status != "CANCELLING" {
		t.Fatalf("cancel: %d %+v", code, res)
	}
	ex := e.waitFor(id, "CANCELLED")
	if w, a := ex.node("wait").Status, ex.node("after").Status; w != "CANCELLED" || (a != "SKIPPED" && a != "CANCELLED") {
		t.Fatalf("records after cancel: wait %s, after %s", w, a)
	}
	var ws struct{ Active int }
	call(t, "GET", base+"/api/v1/workspaces/"+e.ws, testAdminToken, nil, &ws)
	if ws.Active != 0 {
		t.Fatalf("workspace still has %d active after the cancel", ws.Active)
	}
}

func TestDelaySurvivesAWorkerRestart(t *testing.T) {
	prefix := "restart" + uuid.NewString()[:8] + "."
	env := map[string]string{"TEMPORAL_TASK_QUEUE_PREFIX": prefix}
	base := startSluice(t, env)
	e := newE2E(t, base)
	id := e.start(map[string]any{"nodes": []any{node("wait", "DELAY", map[string]any{"duration": "3s"})}}, nil)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the delay to start", func() bool {
		var ex execution
		call(t, "GET", base+"/api/v1/workflow/executions/"+id, testAdminToken, nil, &ex)
		return ex.node("wait").Status == "RUNNING"
	}))
	// Stop the only worker mid-delay, then bring a new one up on the same
	// database and task queues.
	stop := appsByBase[base]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := stop.app.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	env["DATABASE_URL"] = stop.dbURL
	base2 := startSluice(t, env)
	e.base = base2
	ex := e.waitFor(id, "COMPLETED", "FAILED")
	if ex.Status != "COMPLETED" || ex.node("wait").Status != "COMPLETED" {
		t.Fatalf("after the restart: %s, wait %s", ex.Status, ex.node("wait").Status)
	}
}

// runningApp is a started sluice and its database.
type runningApp struct {
	app   *fx.App
	dbURL string
}

// appsByBase lets a test stop a started sluice to restart it.
var appsByBase = map[string]runningApp{}
