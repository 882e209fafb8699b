package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/ports/porttest"
)

// nodeRun is an execution as the API shows it, with its node records.
type nodeRun struct {
	Status string `json:"status"`
	Error  *string
	Nodes  []struct {
		Key    string `json:"key"`
		Type   string `json:"type"`
		Status string `json:"status"`
		Output any    `json:"output"`
	} `json:"nodes"`
}

// node returns the record of key, or fails the test.
func (r nodeRun) node(t *testing.T, key string) (status string, output any) {
	t.Helper()
	for _, n := range r.Nodes {
		if n.Key == key {
			return n.Status, n.Output
		}
	}
	t.Fatalf("no record of node %s in %+v", key, r.Nodes)
	return "", nil
}

// startGraph creates a workspace of plan, a definition of graph and one
// execution of it with input, through the API at base, and returns the
// workspace and execution ids.
func startGraph(t *testing.T, base, plan string, graph map[string]any, input any) (string, string) {
	t.Helper()
	var ws struct{ ID string }
	if code := call(t, "POST", base+"/api/v1/workspaces", testAdminToken, map[string]any{"name": "nodes", "plan": plan}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	var def struct{ ID string }
	if code := call(t, "POST", base+"/api/v1/workflow/definitions", testAdminToken,
		map[string]any{"workspaceId": ws.ID, "name": "nodes", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	var started struct {
		QueueID string `json:"queueId"`
	}
	if code := call(t, "POST", base+"/api/v1/workflow/executions/start", testAdminToken,
		map[string]any{"workspaceId": ws.ID, "workflowDefinitionId": def.ID, "input": input}, &started); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return ws.ID, executionOf(t, base, ws.ID, started.QueueID)
}

// waitRun polls the execution until done holds, and returns it.
func waitRun(t *testing.T, base, execID string, within time.Duration, what string, done func(nodeRun) bool) nodeRun {
	t.Helper()
	var run nodeRun
	porttest.Eventually(t, within, porttest.Holds(what, func() bool {
		run = nodeRun{}
		call(t, "GET", base+"/api/v1/workflow/executions/"+execID, testAdminToken, nil, &run)
		return done(run)
	}))
	return run
}

// nodeIs reports whether the run has a record of key in status.
func nodeIs(key, status string) func(nodeRun) bool {
	return func(r nodeRun) bool {
		for _, n := range r.Nodes {
			if n.Key == key && n.Status == status {
				return true
			}
		}
		return false
	}
}

func statusIs(status string) func(nodeRun) bool {
	return func(r nodeRun) bool { return r.Status == status }
}

var approvalGraph = map[string]any{
	"nodes": []any{
		map[string]any{"key": "approve", "type": "WAIT_FOR_EVENT", "config": map[string]any{"event": "approval", "timeout": "1s"}},
		map[string]any{"key": "yes", "type": "TRANSFORM", "config": map[string]any{"output": "approved by {{ steps.approve.output.by }}"}},
		map[string]any{"key": "no", "type": "TRANSFORM", "config": map[string]any{"output": "timed out"}},
	},
	"edges": []any{
		map[string]any{"from": "approve", "to": "yes", "when": true},
		map[string]any{"from": "approve", "to": "no", "when": false},
	},
}

func TestWaitForEventSurvivesARestartOfEveryRoleAndCompletesOnTheEvent(t *testing.T) {
	faultTest(t)
	dbURL := pgtest.URL(t)
	temporalAddr := requireEnv(t, "TEMPORAL_ADDRESS")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	_ = ln.Close()
	env := faultEnv(dbURL, temporalAddr, "wait"+uuid.NewString()[:8]+".",
		"SLUICE_HTTP_ADDR="+httpAddr, "SLUICE_ADMIN_TOKEN="+testAdminToken)
	start := func() []*faultRole {
		return []*faultRole{startFaultRole(t, "api", env), startFaultRole(t, "dispatcher", env), startFaultRole(t, "worker", env)}
	}
	base := "http://" + httpAddr
	listening := func() {
		porttest.Eventually(t, time.Minute, porttest.Holds("the api to listen", func() bool {
			resp, err := http.Get(base + "/api/v1/workspaces")
			if err == nil {
				_ = resp.Body.Close()
			}
			return err == nil
		}))
	}
	roles := start()
	listening()

	graph := map[string]any{
		"nodes": []any{
			map[string]any{"key": "approve", "type": "WAIT_FOR_EVENT", "config": map[string]any{"event": "approval"}},
			map[string]any{"key": "yes", "type": "TRANSFORM", "config": map[string]any{"output": "approved by {{ steps.approve.output.by }}"}},
		},
		"edges": []any{map[string]any{"from": "approve", "to": "yes"}},
	}
	wsID, execID := startGraph(t, base, "FREE", graph, map[string]any{})
	waitRun(t, base, execID, time.Minute, "approve to be RUNNING", nodeIs("approve", "RUNNING"))
	waitingRuns := func() []string {
		var page struct{ Items []struct{ ID string } }
		call(t, "GET", base+"/api/v1/workflow/executions?waitingForEvent=true&workspaceId="+wsID, testAdminToken, nil, &page)
		ids := make([]string, len(page.Items))
		for i, e := range page.Items {
			ids[i] = e.ID
		}
		return ids
	}
	if got := waitingRuns(); len(got) != 1 || got[0] != execID {
		t.Errorf("runs waiting for an event = %v, want [%s]", got, execID)
	}

	for _, r := range roles {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	}
	start()
	listening()
	var sent struct{ NodeKey string }
	if code := call(t, "POST", base+"/api/v1/workflow/executions/"+execID+"/events", testAdminToken,
		map[string]any{"name": "approval", "payload": map[string]any{"by": "ada"}}, &sent); code != 202 || sent.NodeKey != "approve" {
		t.Fatalf("sending the event after the restart: %d %+v, want 202 to approve", code, sent)
	}
	run := waitRun(t, base, execID, time.Minute, "the execution to complete", statusIs("COMPLETED"))
	if _, out := run.node(t, "yes"); out != "approved by ada" {
		t.Errorf("yes output = %v, want the event's payload read", out)
	}
	if code := call(t, "POST", base+"/api/v1/workflow/executions/"+execID+"/events", testAdminToken,
		map[string]any{"name": "approval"}, nil); code != 409 {
		t.Errorf("a second event after the run ended: %d, want 409", code)
	}
	if got := waitingRuns(); len(got) != 0 {
		t.Errorf("runs waiting for an event after the run = %v, want none", got)
	}
}

func TestWaitForEventTimeoutTakesTheFalseBranch(t *testing.T) {
	t.Parallel()
	base := startSluice(t, nil)
	_, execID := startGraph(t, base, "FREE", approvalGraph, map[string]any{})
	run := waitRun(t, base, execID, time.Minute, "the execution to complete", statusIs("COMPLETED"))
	if status, _ := run.node(t, "no"); status != "COMPLETED" {
		t.Errorf("no = %s, want COMPLETED (the timeout's branch)", status)
	}
	if status, _ := run.node(t, "yes"); status != "SKIPPED" {
		t.Errorf("yes = %s, want SKIPPED", status)
	}
	if code := call(t, "POST", base+"/api/v1/workflow/executions/"+execID+"/events", testAdminToken,
		map[string]any{"name": "approval"}, nil); code != 409 {
		t.Errorf("an event after the timeout: %d, want 409", code)
	}
}

func TestForEachOver50ElementsKeepsInputOrderWithinThePlansNodesInFlight(t *testing.T) {
	t.Parallel()
	const elements, freeInFlight = 50, 4
	var (
		mu             sync.Mutex
		inFlight, peak int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the endpoint's own latency, so requests overlap
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n": %s}`, r.URL.Query().Get("n"))
	}))
	t.Cleanup(srv.Close)
	base := startSluice(t, nil)
	list := make([]int, elements)
	for i := range list {
		list[i] = i * 10
	}
	graph := map[string]any{"nodes": []any{map[string]any{"key": "each", "type": "FOR_EACH", "config": map[string]any{
		"items": "{{ input.list }}",
		"node":  map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{"url": srv.URL + "/?n={{ item }}"}},
	}}}, "edges": []any{}}
	_, execID := startGraph(t, base, "FREE", graph, map[string]any{"list": list})
	run := waitRun(t, base, execID, 2*time.Minute, "the execution to complete", statusIs("COMPLETED"))
	_, out := run.node(t, "each")
	results, ok := out.([]any)
	if !ok || len(results) != elements {
		t.Fatalf("each output = %v, want %d results", out, elements)
	}
	for i, r := range results {
		body := r.(map[string]any)["body"].(map[string]any)
		if body["n"] != float64(i*10) {
			t.Fatalf("result %d = %v, want the answer for %d", i, body, i*10)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("FIGURE FOR_EACH over %d elements: at most %d requests in flight (FREE's nodes in flight: %d)", elements, peak, freeInFlight)
	if peak > freeInFlight || peak < 2 {
		t.Errorf("at most %d requests in flight, want between 2 and FREE's %d", peak, freeInFlight)
	}
}

// defineIn creates a definition of graph in workspace ws and returns its id.
func defineIn(t *testing.T, base, ws, name string, graph map[string]any) string {
	t.Helper()
	var def struct{ ID string }
	if code := call(t, "POST", base+"/api/v1/workflow/definitions", testAdminToken,
		map[string]any{"workspaceId": ws, "name": name, "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition %s: %d", name, code)
	}
	return def.ID
}

// subGraph is one SUB_WORKFLOW node running child with input.
func subGraph(child string, input any) map[string]any {
	return map[string]any{"nodes": []any{map[string]any{"key": "sub", "type": "SUB_WORKFLOW",
		"config": map[string]any{"definition": child, "input": input}}}, "edges": []any{}}
}

func TestSubWorkflowCompletesInAFreeWorkspaceAtItsLimit(t *testing.T) {
	t.Parallel()
	base := startSluice(t, nil)
	var ws struct{ ID string }
	if code := call(t, "POST", base+"/api/v1/workspaces", testAdminToken, map[string]any{"name": "free", "plan": "FREE"}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	child := defineIn(t, base, ws.ID, "child", map[string]any{"nodes": []any{
		map[string]any{"key": "greet", "type": "TRANSFORM", "config": map[string]any{"output": "hello {{ input.who }}"}},
	}, "edges": []any{}})
	parent := map[string]any{"nodes": []any{
		map[string]any{"key": "sub", "type": "SUB_WORKFLOW", "config": map[string]any{"definition": child, "input": map[string]any{"who": "{{ input.name }}"}}},
		map[string]any{"key": "after", "type": "TRANSFORM", "config": map[string]any{"output": "{{ steps.sub.output.greet }}!"}},
	}, "edges": []any{map[string]any{"from": "sub", "to": "after"}}}
	def := defineIn(t, base, ws.ID, "parent", parent)
	var started struct {
		QueueID string `json:"queueId"`
	}
	if code := call(t, "POST", base+"/api/v1/workflow/executions/start", testAdminToken,
		map[string]any{"workspaceId": ws.ID, "workflowDefinitionId": def, "input": map[string]any{"name": "ada"}}, &started); code != 202 {
		t.Fatalf("start: %d", code)
	}
	execID := executionOf(t, base, ws.ID, started.QueueID)
	run := waitRun(t, base, execID, time.Minute, "the execution to complete", statusIs("COMPLETED"))
	if _, out := run.node(t, "after"); out != "hello ada!" {
		t.Errorf("after output = %v, want the child's output read", out)
	}
	if status, out := run.node(t, "sub/greet"); status != "COMPLETED" || out != "hello ada" {
		t.Errorf("the child's node on the parent's run: %s %v, want COMPLETED hello ada", status, out)
	}
	var w struct{ Active int }
	call(t, "GET", base+"/api/v1/workspaces/"+ws.ID, testAdminToken, nil, &w)
	if w.Active != 0 {
		t.Errorf("the workspace holds %d slots after the run, want 0", w.Active)
	}
}
