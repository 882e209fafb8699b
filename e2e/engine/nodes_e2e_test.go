package engine

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
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

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
	harness.FaultTest(t)
	dbURL := pgtest.URL(t)
	temporalAddr := harness.RequireEnv(t, "TEMPORAL_ADDRESS")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	_ = ln.Close()
	env := harness.FaultEnv(dbURL, temporalAddr, "wait"+uuid.NewString()[:8]+".",
		"SLUICE_HTTP_ADDR="+httpAddr, "SLUICE_ADMIN_TOKEN="+harness.TestAdminToken)
	start := func() []*harness.FaultRole {
		return []*harness.FaultRole{harness.StartFaultRole(t, "api", env), harness.StartFaultRole(t, "dispatcher", env), harness.StartFaultRole(t, "worker", env)}
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
	wsID, execID := harness.StartGraph(t, base, "FREE", graph, map[string]any{})
	harness.WaitRun(t, base, execID, time.Minute, "approve to be RUNNING", harness.NodeIs("approve", "RUNNING"))
	waitingRuns := func() []string {
		var page struct{ Items []struct{ ID string } }
		harness.Call(t, "GET", base+"/api/v1/workflow/executions?waitingForEvent=true&workspaceId="+wsID, harness.TestAdminToken, nil, &page)
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
		_ = r.Cmd.Process.Signal(syscall.SIGKILL)
		<-r.Done
	}
	start()
	listening()
	var sent struct{ NodeKey string }
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+execID+"/events", harness.TestAdminToken,
		map[string]any{"name": "approval", "payload": map[string]any{"by": "ada"}}, &sent); code != 202 || sent.NodeKey != "approve" {
		t.Fatalf("sending the event after the restart: %d %+v, want 202 to approve", code, sent)
	}
	run := harness.WaitRun(t, base, execID, time.Minute, "the execution to complete", harness.StatusIs("COMPLETED"))
	if _, out := run.Node(t, "yes"); out != "approved by ada" {
		t.Errorf("yes output = %v, want the event's payload read", out)
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+execID+"/events", harness.TestAdminToken,
		map[string]any{"name": "approval"}, nil); code != 409 {
		t.Errorf("a second event after the run ended: %d, want 409", code)
	}
	if got := waitingRuns(); len(got) != 0 {
		t.Errorf("runs waiting for an event after the run = %v, want none", got)
	}
}

func TestWaitForEventTimeoutTakesTheFalseBranch(t *testing.T) {
	t.Parallel()
	base := harness.StartSluice(t, nil)
	_, execID := harness.StartGraph(t, base, "FREE", approvalGraph, map[string]any{})
	run := harness.WaitRun(t, base, execID, time.Minute, "the execution to complete", harness.StatusIs("COMPLETED"))
	if status, _ := run.Node(t, "no"); status != "COMPLETED" {
		t.Errorf("no = %s, want COMPLETED (the timeout's branch)", status)
	}
	if status, _ := run.Node(t, "yes"); status != "SKIPPED" {
		t.Errorf("yes = %s, want SKIPPED", status)
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+execID+"/events", harness.TestAdminToken,
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
	base := harness.StartSluice(t, nil)
	list := make([]int, elements)
	for i := range list {
		list[i] = i * 10
	}
	graph := map[string]any{"nodes": []any{map[string]any{"key": "each", "type": "FOR_EACH", "config": map[string]any{
		"items": "{{ input.list }}",
		"node":  map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{"url": srv.URL + "/?n={{ item }}"}},
	}}}, "edges": []any{}}
	_, execID := harness.StartGraph(t, base, "FREE", graph, map[string]any{"list": list})
	run := harness.WaitRun(t, base, execID, 2*time.Minute, "the execution to complete", harness.StatusIs("COMPLETED"))
	_, out := run.Node(t, "each")
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

func TestSubWorkflowCompletesInAFreeWorkspaceAtItsLimit(t *testing.T) {
	t.Parallel()
	base := harness.StartSluice(t, nil)
	var ws struct{ ID string }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "free", "plan": "FREE"}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	child := harness.DefineIn(t, base, ws.ID, "child", map[string]any{"nodes": []any{
		map[string]any{"key": "greet", "type": "TRANSFORM", "config": map[string]any{"output": "hello {{ input.who }}"}},
	}, "edges": []any{}})
	parent := map[string]any{"nodes": []any{
		map[string]any{"key": "sub", "type": "SUB_WORKFLOW", "config": map[string]any{"definition": child, "input": map[string]any{"who": "{{ input.name }}"}}},
		map[string]any{"key": "after", "type": "TRANSFORM", "config": map[string]any{"output": "{{ steps.sub.output.greet }}!"}},
	}, "edges": []any{map[string]any{"from": "sub", "to": "after"}}}
	def := harness.DefineIn(t, base, ws.ID, "parent", parent)
	var started struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": ws.ID, "workflowDefinitionId": def, "input": map[string]any{"name": "ada"}}, &started); code != 202 {
		t.Fatalf("start: %d", code)
	}
	execID := harness.ExecutionOf(t, base, ws.ID, started.QueueID)
	run := harness.WaitRun(t, base, execID, time.Minute, "the execution to complete", harness.StatusIs("COMPLETED"))
	if _, out := run.Node(t, "after"); out != "hello ada!" {
		t.Errorf("after output = %v, want the child's output read", out)
	}
	if status, out := run.Node(t, "sub/greet"); status != "COMPLETED" || out != "hello ada" {
		t.Errorf("the child's node on the parent's run: %s %v, want COMPLETED hello ada", status, out)
	}
	var w struct{ Active int }
	harness.Call(t, "GET", base+"/api/v1/workspaces/"+ws.ID, harness.TestAdminToken, nil, &w)
	if w.Active != 0 {
		t.Errorf("the workspace holds %d slots after the run, want 0", w.Active)
	}
}
