package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestAQuotaEditedThroughTheAPIAppliesToTheNextRequest: with nothing
// restarted, the admin lowers the FREE plan's pending-items quota under
// what a workspace has queued; the next enqueue is a 429 naming the quota
// and writes nothing, and nothing queued is cancelled or deleted. Raised
// again, the next enqueue is admitted. A workspace's own quota then beats
// its plan's, both ways, while another FREE workspace keeps the plan's,
// and null returns to the plan's. The definitions quota and the caps read
// at definition save follow edits the same way.
func TestAQuotaEditedThroughTheAPIAppliesToTheNextRequest(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	ctx := context.Background()
	admin := s.client(t, adminToken)
	ws, c := quotaWorkspace(t, s, client.FREE)
	other, oc := quotaWorkspace(t, s, client.FREE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "d", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)
	otherDef, err := oc.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: other, Name: "d", Graph: oneNodeGraph})
	status(t, "createDefinition in the other workspace", otherDef, err, http.StatusCreated)

	enqueue := func(c *client.ClientWithResponses, ws, def uuid.UUID) *client.EnqueueExecutionResponse {
		t.Helper()
		r, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: def})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	admitted := func(what string, r *client.EnqueueExecutionResponse) {
		t.Helper()
		if r.StatusCode() != http.StatusAccepted {
			t.Fatalf("%s: %d %s, want 202", what, r.StatusCode(), r.Body)
		}
	}
	refused := func(what string, r *client.EnqueueExecutionResponse, limit int) {
		t.Helper()
		if r.StatusCode() != http.StatusTooManyRequests || !strings.Contains(string(r.Body), fmt.Sprintf("at most %d pending queue items", limit)) {
			t.Fatalf("%s: %d %s, want 429 naming at most %d pending queue items", what, r.StatusCode(), r.Body, limit)
		}
	}
	pending := func(ws uuid.UUID) int {
		t.Helper()
		var n int
		if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1 AND status = 'PENDING'", ws).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	patchFree := func(body client.UpdatePlanRequest) {
		t.Helper()
		r, err := admin.UpdatePlanWithResponse(ctx, client.FREE, body)
		status(t, "updatePlan", r, err, http.StatusOK)
	}
	putOwn := func(body client.SetWorkspaceLimitsRequest) {
		t.Helper()
		r, err := admin.SetWorkspaceLimitsWithResponse(ctx, ws, body)
		status(t, "setWorkspaceLimits", r, err, http.StatusOK)
	}

	for i := range 3 {
		admitted(fmt.Sprintf("enqueue %d under the seeded 1,000", i+1), enqueue(c, ws, def.JSON201.ID))
	}
	patchFree(client.UpdatePlanRequest{PendingItems: ptr(2)})
	refused("the first enqueue after lowering the quota to 2", enqueue(c, ws, def.JSON201.ID), 2)
	if n := pending(ws); n != 3 {
		t.Fatalf("%d PENDING after lowering the quota under them, want the 3 queued: lowering cancels nothing", n)
	}
	patchFree(client.UpdatePlanRequest{PendingItems: ptr(4)})
	admitted("the first enqueue after raising it to 4", enqueue(c, ws, def.JSON201.ID))
	refused("the fifth", enqueue(c, ws, def.JSON201.ID), 4)

	// The workspace's own quota beats its plan's, above and below it.
	putOwn(client.SetWorkspaceLimitsRequest{PendingItems: ptr(6)})
	admitted("the fifth under its own 6", enqueue(c, ws, def.JSON201.ID))
	for i := range 4 {
		admitted(fmt.Sprintf("the other workspace's enqueue %d under the plan's 4", i+1), enqueue(oc, other, otherDef.JSON201.ID))
	}
	refused("the other workspace's fifth, its plan's 4 untouched by A's own", enqueue(oc, other, otherDef.JSON201.ID), 4)
	putOwn(client.SetWorkspaceLimitsRequest{PendingItems: ptr(1)})
	refused("an enqueue under its own 1, below the plan's 4", enqueue(c, ws, def.JSON201.ID), 1)
	gl, err := admin.GetWorkspaceLimitsWithResponse(ctx, ws)
	status(t, "getWorkspaceLimits", gl, err, http.StatusOK)
	if gl.JSON200.PendingItems == nil || *gl.JSON200.PendingItems != 1 || gl.JSON200.NodesInFlight != nil {
		t.Errorf("getWorkspaceLimits: %s, want pendingItems 1 and the rest null", gl.Body)
	}
	putOwn(client.SetWorkspaceLimitsRequest{})
	patchFree(client.UpdatePlanRequest{PendingItems: ptr(6)})
	admitted("an enqueue back on the plan's, raised to 6", enqueue(c, ws, def.JSON201.ID))
	if n := pending(ws); n != 6 {
		t.Errorf("%d PENDING, want the 6 admitted", n)
	}

	// The definitions quota, counted in the create's transaction.
	patchFree(client.UpdatePlanRequest{Definitions: ptr(1)})
	second, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "second", Graph: oneNodeGraph})
	status(t, "createDefinition past a definitions quota lowered to 1", second, err, http.StatusTooManyRequests)
	patchFree(client.UpdatePlanRequest{Definitions: ptr(2)})
	second, err = c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "second", Graph: oneNodeGraph})
	status(t, "createDefinition once it is raised to 2", second, err, http.StatusCreated)

	// A cap, read at definition save.
	retried := client.Graph(`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":3}}],"edges":[]}`)
	patchFree(client.UpdatePlanRequest{NodeAttempts: ptr(2), Definitions: ptr(10)})
	capped, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "retried", Graph: retried})
	status(t, "createDefinition past a nodeAttempts cap lowered to 2", capped, err, http.StatusUnprocessableEntity)
	if !strings.Contains(string(capped.Body), "/graph/nodes/0/retry/maxAttempts") {
		t.Errorf("the cap's 422 does not name /graph/nodes/0/retry/maxAttempts: %s", capped.Body)
	}
	putOwn(client.SetWorkspaceLimitsRequest{NodeAttempts: ptr(3)})
	capped, err = c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "retried", Graph: retried})
	status(t, "createDefinition under its own nodeAttempts of 3", capped, err, http.StatusCreated)
}

// peakServer answers HTTP nodes once want of them are held at once (or
// after a minute), and keeps the most it ever held: a run whose nodes in
// flight are want shows exactly want, one allowed more shows more.
type peakServer struct {
	mu         sync.Mutex
	cond       *sync.Cond
	want, held int
	peak       int
}

func newPeakServer(t *testing.T) (*peakServer, string) {
	p := &peakServer{}
	p.cond = sync.NewCond(&p.mu)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		p.held++
		p.peak = max(p.peak, p.held)
		p.cond.Broadcast()
		timeout := time.AfterFunc(time.Minute, func() { p.mu.Lock(); p.want = 0; p.cond.Broadcast(); p.mu.Unlock() })
		for p.held < p.want {
			p.cond.Wait()
		}
		timeout.Stop()
		p.held--
		p.mu.Unlock()
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// expect starts a new run's measure: release at want held, peak reset.
func (p *peakServer) expect(want int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.want, p.peak = want, 0
}

func (p *peakServer) peakHeld() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// TestANodesInFlightChangeAppliesToTheNextRun: a FREE workspace's run of
// eight parallel HTTP nodes holds the plan's seeded 4 at once. The admin
// sets the workspace's own nodesInFlight to 2 through the API; the
// running worker's snapshot shows it within a second, with no restart,
// and the next run holds 2 at once, never more. The plan's is untouched
// for the other FREE workspaces.
func TestANodesInFlightChangeAppliesToTheNextRun(t *testing.T) {
	t.Parallel()
	var quotas *app.QuotaSnapshot
	base := startSluiceWith(t, nil, fx.Populate(&quotas))
	peak, url := newPeakServer(t)
	nodes := make([]any, 8)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("n%d", i), "HTTP_REQUEST", map[string]any{"url": fmt.Sprintf("%s/%d", url, i)})
	}
	e := newE2EWithPlan(t, base, "FREE")
	run := func(want int) int {
		t.Helper()
		peak.expect(want)
		e.waitFor(e.startIn(map[string]any{"nodes": nodes}, nil), "COMPLETED")
		return peak.peakHeld()
	}
	if got := run(4); got != 4 {
		t.Fatalf("the first run held %d HTTP nodes at once, want the FREE plan's 4", got)
	}

	if code := call(t, "PUT", base+"/api/v1/workspaces/"+e.ws+"/limits", testAdminToken, map[string]any{"maxRunning": nil, "nodesInFlight": 2}, nil); code != http.StatusOK {
		t.Fatalf("setWorkspaceLimits: %d", code)
	}
	id := domain.ID(uuid.MustParse(e.ws))
	took := porttest.Eventually(t, time.Second, porttest.Holds("the worker's snapshot to show the workspace's 2", func() bool {
		q, ok := quotas.Current(id, domain.PlanFree)
		return ok && q.NodesInFlight == 2
	}))
	t.Logf("the worker read the edit %v after the API answered", took)
	if got := run(2); got != 2 {
		t.Fatalf("the run after the edit held %d HTTP nodes at once, want the workspace's own 2", got)
	}
	if q, _ := quotas.Current(domain.ID(uuid.New()), domain.PlanFree); q.NodesInFlight != 4 {
		t.Errorf("another FREE workspace's nodes in flight = %d, want the plan's 4", q.NodesInFlight)
	}
}

// setPlanQuotasE2E edits a plan's figures through the API of the sluice
// at base and waits until its worker's snapshot shows them (check).
func setPlanQuotasE2E(t *testing.T, base string, quotas *app.QuotaSnapshot, plan domain.Plan, body map[string]any, check func(domain.PlanQuotas) bool) {
	t.Helper()
	if code := call(t, "PATCH", base+"/api/v1/plans/"+string(plan), testAdminToken, body, nil); code != http.StatusOK {
		t.Fatalf("PATCH /plans/%s %v: %d", plan, body, code)
	}
	porttest.Eventually(t, time.Second, porttest.Holds("the worker's snapshot to show the edit", func() bool {
		q, ok := quotas.Current(domain.ID(uuid.New()), plan)
		return ok && check(q)
	}))
}
