package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// httpNodeAllow lets HTTP_REQUEST nodes reach the tests' local servers
// past the outbound guard, which refuses loopback by default.
const httpNodeAllow = "127.0.0.0/8,::1/128"

// TestAWorkspaceWithHundredsOfSlowHTTPNodesLeavesOthersTheirShare runs, on
// the real stack, a FREE execution of 200 parallel HTTP nodes against a
// server that holds each request 30 s, and meanwhile another workspace's
// one-node HTTP run: the plan's nodes-in-flight cap (FREE 4) leaves the
// other 16 of the external queue's 20 slots free, so the second run
// completes within 5 s instead of waiting behind 200 slow requests.
func TestAWorkspaceWithHundredsOfSlowHTTPNodesLeavesOthersTheirShare(t *testing.T) {
	t.Setenv("SLUICE_HTTP_NODE_ALLOW", httpNodeAllow)
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

	base := startSluice(t, map[string]string{"SLUICE_HTTP_NODE_ALLOW": httpNodeAllow})
	hog := newE2EWithPlan(t, base, "FREE")
	nodes := make([]any, 200)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("n%03d", i), "HTTP_REQUEST", map[string]any{"url": fmt.Sprintf("%s/%d", slow.URL, i), "timeout": "60s"})
	}
	hogID := hog.startIn(map[string]any{"nodes": nodes}, nil)
	eventually(t, 30*time.Second, "the FREE execution to hold its requests", func() bool { return held.Load() >= 4 })

	other := newE2EWithPlan(t, base, "FREE")
	began := time.Now()
	id := other.startIn(map[string]any{"nodes": []any{node("get", "HTTP_REQUEST", map[string]any{"url": fast.URL})}}, nil)
	ex := other.waitFor(id, "COMPLETED", "FAILED")
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
	if code := call(t, "POST", base+"/api/v1/workflow/executions/"+hogID+"/cancel", testAdminToken, nil, &res); code != 202 {
		t.Errorf("cancelling the FREE execution: %d", code)
	}
	hog.waitFor(hogID, "CANCELLED")
}

// newE2EWithPlan is newE2E with a workspace on plan.
func newE2EWithPlan(t testing.TB, base, plan string) *e2e {
	var ws struct{ ID string }
	if code := call(t, "POST", base+"/api/v1/workspaces", testAdminToken, map[string]any{"name": "e2e-" + plan, "plan": plan}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	return &e2e{t: t, base: base, ws: ws.ID}
}
