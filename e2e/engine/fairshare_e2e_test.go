package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestAWorkspaceWithHundredsOfSlowHTTPNodesLeavesOthersTheirShare runs, on
// the real stack, a FREE execution of 200 parallel HTTP nodes against a
// server that holds each request 30 s, and meanwhile another workspace's
// one-node HTTP run: the plan's nodes-in-flight cap (FREE 4) leaves the
// other 16 of the external queue's 20 slots free, so the second run
// completes within 5 s instead of waiting behind 200 slow requests.
func TestAWorkspaceWithHundredsOfSlowHTTPNodesLeavesOthersTheirShare(t *testing.T) {
	t.Setenv("SLUICE_HTTP_NODE_ALLOW", harness.HTTPNodeAllow)
	var held, peak atomic.Int32
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := held.Add(1)
		defer held.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-time.After(30 * time.Second):
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `{}`)
	}))
	defer slow.Close()
	defer close(release)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"ok": true}`) }))
	defer fast.Close()

	base := harness.StartSluice(t, map[string]string{"SLUICE_HTTP_NODE_ALLOW": harness.HTTPNodeAllow})
	hog := harness.NewE2EWithPlan(t, base, "FREE")
	nodes := make([]any, 200)
	for i := range nodes {
		nodes[i] = harness.Node(fmt.Sprintf("n%03d", i), "HTTP_REQUEST", map[string]any{"url": fmt.Sprintf("%s/%d", slow.URL, i), "timeout": "60s"})
	}
	hogID := hog.StartIn(map[string]any{"nodes": nodes}, nil)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the FREE execution to hold its requests", func() bool { return held.Load() >= 4 }))

	other := harness.NewE2EWithPlan(t, base, "FREE")
	began := time.Now()
	id := other.StartIn(map[string]any{"nodes": []any{harness.Node("get", "HTTP_REQUEST", map[string]any{"url": fast.URL})}}, nil)
	ex := other.WaitFor(id, "COMPLETED", "FAILED")
	took := time.Since(began)
	if ex.Status != "COMPLETED" {
		t.Fatalf("the other workspace's run ended %s (%v)", ex.Status, ex.Error)
	}
	if took > 5*time.Second {
		t.Errorf("the other workspace's one-node run took %s beside the FREE execution's 200 slow nodes, want within 5s", took)
	}
	t.Logf("other workspace's one-node HTTP run: enqueue to COMPLETED %s; slow requests held at once: at most %d", took.Round(time.Millisecond), peak.Load())
	if p := peak.Load(); p > 4 {
		t.Errorf("the FREE execution had %d HTTP nodes in flight, over its cap of 4", p)
	}
	var res struct{ Status string }
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+hogID+"/cancel", harness.TestAdminToken, nil, &res); code != 202 {
		t.Errorf("cancelling the FREE execution: %d", code)
	}
	hog.WaitFor(hogID, "CANCELLED")
}

// TestTheExternalQueueServesWorkspacesFairly checks task-queue fairness on
// the real server: with one external-API slot, an ENTERPRISE execution
// queues 25 HTTP nodes of 300 ms each; another workspace's one-node HTTP
// task, scheduled while they wait, is counted in hog requests served
// between its scheduling (from its history) and its own request.
func TestTheExternalQueueServesWorkspacesFairly(t *testing.T) {
	t.Setenv("SLUICE_HTTP_NODE_ALLOW", harness.HTTPNodeAllow)
	var mu sync.Mutex
	var hogTimes []time.Time
	var otherTime time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.URL.Path == "/other" {
			otherTime = time.Now()
		} else {
			hogTimes = append(hogTimes, time.Now())
		}
		mu.Unlock()
		if r.URL.Path != "/other" {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	base := harness.StartSluice(t, map[string]string{"SLUICE_HTTP_NODE_ALLOW": harness.HTTPNodeAllow, "SLUICE_WORKER_EXTERNAL_API_CONCURRENCY": "1"})

	hog := harness.NewE2EWithPlan(t, base, "ENTERPRISE")
	nodes := make([]any, 25)
	for i := range nodes {
		nodes[i] = harness.Node(fmt.Sprintf("n%02d", i), "HTTP_REQUEST", map[string]any{"url": fmt.Sprintf("%s/hog/%d", srv.URL, i)})
	}
	hogID := hog.StartIn(map[string]any{"nodes": nodes}, nil)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the hog's first request", func() bool { mu.Lock(); defer mu.Unlock(); return len(hogTimes) >= 1 }))

	other := harness.NewE2EWithPlan(t, base, "FREE")
	id := other.StartIn(map[string]any{"nodes": []any{harness.Node("get", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/other"})}}, nil)
	if ex := other.WaitFor(id, "COMPLETED", "FAILED"); ex.Status != "COMPLETED" {
		t.Fatalf("the other run ended %s (%v)", ex.Status, ex.Error)
	}
	scheduled := activityScheduledAt(t, id)
	mu.Lock()
	between := 0
	for _, at := range hogTimes {
		if at.After(scheduled) && at.Before(otherTime) {
			between++
		}
	}
	mu.Unlock()
	t.Logf("hog requests served between the other task's scheduling and its request: %d", between)
	if between > 3 {
		t.Errorf("%d of the hog's queued requests went before the other workspace's task, want at most 3 (fairness)", between)
	}
	hog.WaitFor(hogID, "COMPLETED", "FAILED")
}

// activityScheduledAt reads when the execution's first activity was
// scheduled, from its workflow history.
func activityScheduledAt(t *testing.T, executionID string) time.Time {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: os.Getenv("TEMPORAL_ADDRESS"), Logger: harness.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	it := c.GetWorkflowHistory(context.Background(), "execution-"+executionID, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			return ev.GetEventTime().AsTime()
		}
	}
	t.Fatal("no activity scheduled in the history")
	return time.Time{}
}

// TestAWorkspacesExecutionsTogetherHoldOnlyItsShareOfTheExternalWorker
// runs, on the real stack, a PRO workspace's 5 allowed executions at once,
// each a fan-out of 10 HTTP nodes against a server that holds each request
// 40 s: 50 nodes, each execution within its own cap of 10, against the
// external-API worker's 20 slots. The workspace's share (PRO 10) holds its
// nodes to 10 requests at once whatever its executions number, the rest
// waiting in their workflows, so another workspace's one-node HTTP run
// completes within 5 s.
func TestAWorkspacesExecutionsTogetherHoldOnlyItsShareOfTheExternalWorker(t *testing.T) {
	const executions, fanOut, share = 5, 10, 10
	var held, peak atomic.Int32
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := held.Add(1)
		defer held.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-time.After(40 * time.Second):
		case <-release:
		case <-r.Context().Done():
		}
		fmt.Fprint(w, `{}`)
	}))
	defer slow.Close()
	defer close(release)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"ok": true}`) }))
	defer fast.Close()

	var quotas *worker.QuotaSnapshot
	base := harness.StartSluiceWith(t, map[string]string{"SLUICE_HTTP_NODE_ALLOW": harness.HTTPNodeAllow}, fx.Populate(&quotas))
	harness.SetPlanQuotasE2E(t, base, quotas, domain.PlanPro, map[string]any{"workspaceNodesInFlight": share},
		func(q domain.PlanQuotas) bool { return q.WorkspaceNodesInFlight == share })
	hog := harness.NewE2EWithPlan(t, base, "PRO")
	nodes := make([]any, fanOut)
	for i := range nodes {
		nodes[i] = harness.Node(fmt.Sprintf("n%02d", i), "HTTP_REQUEST", map[string]any{"url": fmt.Sprintf("%s/%d", slow.URL, i), "timeout": "60s"})
	}
	hogIDs := make([]string, executions)
	for i := range hogIDs {
		hogIDs[i] = hog.StartIn(map[string]any{"nodes": nodes}, nil)
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the PRO workspace to hold its share of requests", func() bool { return held.Load() >= share }))

	other := harness.NewE2EWithPlan(t, base, "FREE")
	began := time.Now()
	id := other.StartIn(map[string]any{"nodes": []any{harness.Node("get", "HTTP_REQUEST", map[string]any{"url": fast.URL})}}, nil)
	ex := other.WaitFor(id, "COMPLETED", "FAILED")
	took := time.Since(began)
	if ex.Status != "COMPLETED" {
		t.Fatalf("the other workspace's run ended %s (%v)", ex.Status, ex.Error)
	}
	t.Logf("other workspace's one-node HTTP run: enqueue to COMPLETED %s, while the PRO workspace's %d executions of %d slow HTTP nodes held at most %d requests at once",
		took.Round(time.Millisecond), executions, fanOut, peak.Load())
	if took > 5*time.Second {
		t.Errorf("the other workspace's one-node run took %s, want within 5s", took)
	}
	if p := peak.Load(); p > share {
		t.Errorf("the PRO workspace held %d requests at once, over its share of %d", p, share)
	}
	for _, hogID := range hogIDs {
		var res struct{ Status string }
		if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+hogID+"/cancel", harness.TestAdminToken, nil, &res); code != 202 {
			t.Errorf("cancelling a PRO execution: %d", code)
		}
	}
	for _, hogID := range hogIDs {
		hog.WaitFor(hogID, "CANCELLED")
	}
}
