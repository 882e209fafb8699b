package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
)

// withChild stores graph as a definition of the harness's workspace and
// returns its id.
func (h *harness) withChild(graph string) domain.ID {
	h.t.Helper()
	g, err := domain.DecodeGraph([]byte(graph))
	if err != nil {
		h.t.Fatal(err)
	}
	id := domain.ID(uuid.New())
	ws, err := domain.ParseID(h.in.WorkspaceID)
	if err != nil {
		h.t.Fatal(err)
	}
	h.store.addDefinition(id, ws, g)
	return id
}

func TestSubWorkflowRunsTheChildAndRecordsItsNodesOnTheParentsRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{}`)
	child := h.withChild(`{"nodes": [
		{"key": "greet", "type": "TRANSFORM", "config": {"output": "hello {{ input.who }}"}},
		{"key": "count", "type": "TRANSFORM", "config": {"output": 2}}
	]}`)
	h = newHarnessLike(t, h, fmt.Sprintf(`{"nodes": [
		{"key": "sub", "type": "SUB_WORKFLOW", "config": {"definition": "%s", "input": {"who": "{{ input.name }}"}}},
		{"key": "after", "type": "TRANSFORM", "config": {"output": "{{ steps.sub.output.greet }} x{{ steps.sub.output.count }}"}}
	], "edges": [{"from": "sub", "to": "after"}]}`, child)).withInput(`{"name": "ada"}`)
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if got := h.record("after").Output; got != "hello ada x2" {
		t.Errorf("after output = %v, want the child's outputs read", got)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"sub": domain.NodeCompleted, "sub/greet": domain.NodeCompleted,
		"sub/count": domain.NodeCompleted, "after": domain.NodeCompleted})
	h.wantCompletion(domain.ExecutionCompleted, "")
}

func TestSubWorkflowFailsWhenTheChildFailsOrIsNotTheWorkspaces(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{}`)
	child := h.withChild(`{"nodes": [{"key": "bad", "type": "TRANSFORM", "config": {"output": "{{ input.missing.deep }}"}}]}`)
	h = newHarnessLike(t, h, fmt.Sprintf(`{"nodes": [{"key": "sub", "type": "SUB_WORKFLOW", "config": {"definition": "%s"}}]}`, child))
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, "sub-workflow "+child.String()+" version 1 failed") {
		t.Fatalf("result = %s (%s), want FAILED naming the child", res.Status, res.Error)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"sub": domain.NodeFailed, "sub/bad": domain.NodeFailed})

	other := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "sub", "type": "SUB_WORKFLOW", "config": {"definition": "%s"}}]}`, child))
	res = other.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, "not found in the workspace") {
		t.Fatalf("another workspace's run: %s (%s), want FAILED, not found", res.Status, res.Error)
	}
}

// newHarnessLike is a harness running graph in prev's workspace, with
// prev's definitions.
func newHarnessLike(t *testing.T, prev *harness, graph string) *harness {
	t.Helper()
	h := newHarness(t, graph)
	h.in.WorkspaceID = prev.in.WorkspaceID
	for id, d := range prev.store.definitions {
		h.store.addDefinition(id, d.WorkspaceID, d.Graph)
	}
	return h
}

func TestSubWorkflowPastTheExecutionsQuotaFailsNamingIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{}`)
	child := h.withChild(`{"nodes": [
		{"key": "a", "type": "TRANSFORM", "config": {"output": 1}},
		{"key": "b", "type": "TRANSFORM", "config": {"output": 2}}
	]}`)
	h = newHarnessLike(t, h, fmt.Sprintf(`{"nodes": [
		{"key": "s1", "type": "SUB_WORKFLOW", "config": {"definition": "%[1]s"}},
		{"key": "s2", "type": "SUB_WORKFLOW", "config": {"definition": "%[1]s"}},
		{"key": "s3", "type": "SUB_WORKFLOW", "config": {"definition": "%[1]s"}}
	]}`, child))
	// Two children of two nodes fit in 5, the third does not.
	h.store.subWorkflowQuota = 5
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, "subWorkflowNodes") {
		t.Fatalf("result = %s (%s), want FAILED naming subWorkflowNodes", res.Status, res.Error)
	}
	failed := 0
	for _, key := range []string{"s1", "s2", "s3"} {
		switch r := h.record(key); r.Status {
		case domain.NodeCompleted:
		case domain.NodeFailed:
			failed++
			if !strings.Contains(r.Error, "at most 5 nodes in the child runs of one execution (subWorkflowNodes)") {
				t.Errorf("%s error = %q, want it to name the quota", key, r.Error)
			}
		default:
			t.Errorf("%s is %s, want COMPLETED or FAILED", key, r.Status)
		}
	}
	if failed != 1 {
		t.Errorf("%d SUB_WORKFLOWs failed, want the one past the quota", failed)
	}
	if held := h.store.subWorkflowNodes[h.execID]; held != 4 {
		t.Errorf("the execution's count is %d, want the 4 nodes of the two children that ran", held)
	}
}

func TestSubWorkflowHoldsANodeInFlightItsChildRunsInside(t *testing.T) {
	t.Parallel()
	// The root has 2 requests of its own and 3 SUB_WORKFLOWs whose child
	// has 3 parallel requests each: 11 requests that could all run at
	// once if a child had nodes in flight of its own.
	const limit = 3
	var (
		mu             sync.Mutex
		inFlight, peak int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the request's work, so requests overlap
		mu.Lock()
		inFlight--
		mu.Unlock()
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, `{}`)
	child := h.withChild(fmt.Sprintf(`{"nodes": [
		{"key": "c0", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/c0"}},
		{"key": "c1", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/c1"}},
		{"key": "c2", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/c2"}}
	]}`, srv.URL))
	h = newHarnessLike(t, h, fmt.Sprintf(`{"nodes": [
		{"key": "r0", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/r0"}},
		{"key": "r1", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/r1"}},
		{"key": "s0", "type": "SUB_WORKFLOW", "config": {"definition": "%[2]s"}},
		{"key": "s1", "type": "SUB_WORKFLOW", "config": {"definition": "%[2]s"}},
		{"key": "s2", "type": "SUB_WORKFLOW", "config": {"definition": "%[2]s"}}
	]}`, srv.URL, child))
	h.wf.Limits = RunLimits{NodesInFlight: map[domain.Plan]int{domain.PlanFree: limit}}
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > limit || peak < 2 {
		t.Errorf("at most %d requests ran at once across the tree, want between 2 and the plan's %d", peak, limit)
	}
	if n := len(h.ranKeys()); n != 11 {
		t.Errorf("%d nodes ran, want all 11", n)
	}
}

func TestSubWorkflowWhoseGraphIsOverThePayloadLimitFailsNamingIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{}`)
	child := h.withChild(fmt.Sprintf(`{"nodes": [{"key": "big", "type": "TRANSFORM", "config": {"output": %q}}]}`, strings.Repeat("x", 4<<10)))
	h = newHarnessLike(t, h, fmt.Sprintf(`{"nodes": [{"key": "sub", "type": "SUB_WORKFLOW", "config": {"definition": "%s"}}]}`, child))
	h.wf.Limits = RunLimits{PayloadLimit: 2 << 10}
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, "over the payload limit of 2048 (SLUICE_ENGINE_PAYLOAD_LIMIT)") {
		t.Fatalf("result = %s (%s), want FAILED naming the payload limit", res.Status, res.Error)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"sub": domain.NodeFailed})
}
