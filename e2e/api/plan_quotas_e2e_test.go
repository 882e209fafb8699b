package api

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
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestAQuotaEditedThroughTheAPIAppliesToTheNextRequest: with nothing
// restarted, the admin lowers the FREE plan's pending-items quota under
// what a workspace has queued; the next enqueue is a 429 naming the quota
// and writes nothing, and nothing queued is cancelled or deleted. Raised
// again, the next enqueue is admitted. A workspace's own quota then beats
// its plan's, both ways, while another FREE workspace keeps the plan's,
// and null returns to the plan's. The definitions and outbound-hosts
// quotas and the caps read at definition save follow edits the same way.
func TestAQuotaEditedThroughTheAPIAppliesToTheNextRequest(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
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
		if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1 AND status = 'PENDING'", ws).Scan(&n); err != nil {
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
	patchFree(client.UpdatePlanRequest{PendingItems: harness.Ptr(2)})
	refused("the first enqueue after lowering the quota to 2", enqueue(c, ws, def.JSON201.ID), 2)
	if n := pending(ws); n != 3 {
		t.Fatalf("%d PENDING after lowering the quota under them, want the 3 queued: lowering cancels nothing", n)
	}
	patchFree(client.UpdatePlanRequest{PendingItems: harness.Ptr(4)})
	admitted("the first enqueue after raising it to 4", enqueue(c, ws, def.JSON201.ID))
	refused("the fifth", enqueue(c, ws, def.JSON201.ID), 4)

	// The workspace's own quota beats its plan's, above and below it.
	putOwn(client.SetWorkspaceLimitsRequest{PendingItems: harness.Ptr(6)})
	admitted("the fifth under its own 6", enqueue(c, ws, def.JSON201.ID))
	for i := range 4 {
		admitted(fmt.Sprintf("the other workspace's enqueue %d under the plan's 4", i+1), enqueue(oc, other, otherDef.JSON201.ID))
	}
	refused("the other workspace's fifth, its plan's 4 untouched by A's own", enqueue(oc, other, otherDef.JSON201.ID), 4)
	putOwn(client.SetWorkspaceLimitsRequest{PendingItems: harness.Ptr(1)})
	refused("an enqueue under its own 1, below the plan's 4", enqueue(c, ws, def.JSON201.ID), 1)
	gl, err := admin.GetWorkspaceLimitsWithResponse(ctx, ws)
	status(t, "getWorkspaceLimits", gl, err, http.StatusOK)
	if gl.JSON200.PendingItems == nil || *gl.JSON200.PendingItems != 1 || gl.JSON200.NodesInFlight != nil {
		t.Errorf("getWorkspaceLimits: %s, want pendingItems 1 and the rest null", gl.Body)
	}
	putOwn(client.SetWorkspaceLimitsRequest{})
	patchFree(client.UpdatePlanRequest{PendingItems: harness.Ptr(6)})
	admitted("an enqueue back on the plan's, raised to 6", enqueue(c, ws, def.JSON201.ID))
	if n := pending(ws); n != 6 {
		t.Errorf("%d PENDING, want the 6 admitted", n)
	}

	// The definitions quota, counted in the create's transaction.
	patchFree(client.UpdatePlanRequest{Definitions: harness.Ptr(1)})
	second, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "second", Graph: oneNodeGraph})
	status(t, "createDefinition past a definitions quota lowered to 1", second, err, http.StatusTooManyRequests)
	patchFree(client.UpdatePlanRequest{Definitions: harness.Ptr(2)})
	second, err = c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "second", Graph: oneNodeGraph})
	status(t, "createDefinition once it is raised to 2", second, err, http.StatusCreated)

	// A cap, read at definition save.
	retried := client.Graph(`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":3}}],"edges":[]}`)
	patchFree(client.UpdatePlanRequest{NodeAttempts: harness.Ptr(2), Definitions: harness.Ptr(10)})
	capped, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "retried", Graph: retried})
	status(t, "createDefinition past a nodeAttempts cap lowered to 2", capped, err, http.StatusUnprocessableEntity)
	if !strings.Contains(string(capped.Body), "/graph/nodes/0/retry/maxAttempts") {
		t.Errorf("the cap's 422 does not name /graph/nodes/0/retry/maxAttempts: %s", capped.Body)
	}
	putOwn(client.SetWorkspaceLimitsRequest{NodeAttempts: harness.Ptr(3)})
	capped, err = c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "retried", Graph: retried})
	status(t, "createDefinition under its own nodeAttempts of 3", capped, err, http.StatusCreated)

	// Retention, a plan figure, shown as stored.
	rp, err := admin.UpdatePlanWithResponse(ctx, client.FREE, client.UpdatePlanRequest{RetentionDays: harness.Ptr(8)})
	status(t, "updatePlan retentionDays", rp, err, http.StatusOK)
	if rp.JSON200.RetentionDays != 8 || rp.JSON200.PendingItems != 6 || rp.JSON200.MaxRunning != 1 {
		t.Errorf("updatePlan retentionDays 8: %s, want it set and the other figures as they were", rp.Body)
	}

	// Outbound host limits, counted in the put's transaction: the
	// workspace's own quota of 1 refuses a second host, not a change of
	// the first; raised, the second is admitted.
	putOwn(client.SetWorkspaceLimitsRequest{OutboundHosts: harness.Ptr(1)})
	host := func(name string, want int) {
		t.Helper()
		r, err := c.SetOutboundLimitWithResponse(ctx, ws, name, client.SetOutboundLimitRequest{RequestsPerSecond: 5, Burst: 2})
		status(t, "setOutboundLimit "+name, r, err, want)
	}
	host("a.example", http.StatusOK)
	host("b.example", http.StatusTooManyRequests)
	host("a.example", http.StatusOK)
	putOwn(client.SetWorkspaceLimitsRequest{OutboundHosts: harness.Ptr(2)})
	host("b.example", http.StatusOK)
}

// gateServer holds the HTTP nodes of each run (the first path segment)
// until the test opens the run's gate, and keeps how many it held at once
// per run: no barrier on counts, so nothing a run leaves behind (a
// request its client gave up on) mixes into the next run's figures.
type gateServer struct {
	mu    sync.Mutex
	held  map[string]int
	peak  map[string]int
	gates map[string]chan struct{}
}

func newGateServer(t *testing.T) (*gateServer, string) {
	g := &gateServer{held: map[string]int{}, peak: map[string]int{}, gates: map[string]chan struct{}{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		run, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		g.mu.Lock()
		gate := g.gates[run]
		g.held[run]++
		g.peak[run] = max(g.peak[run], g.held[run])
		g.mu.Unlock()
		select {
		case <-gate:
		case <-r.Context().Done():
		case <-time.After(time.Minute): // a failed test leaves no handler behind
		}
		g.mu.Lock()
		g.held[run]--
		g.mu.Unlock()
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	return g, srv.URL
}

// open makes a run's gate, closed.
func (g *gateServer) open(run string) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	gate := make(chan struct{})
	g.gates[run] = gate
	return func() { close(gate) }
}

func (g *gateServer) counts(run string) (held, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[run], g.peak[run]
}

// TestANodesInFlightChangeAppliesToTheNextRun: a FREE workspace's run of
// eight parallel HTTP nodes runs the plan's seeded 4 at once (4 requests
// held, 4 activities scheduled), never more. The admin sets the
// workspace's own nodesInFlight to 2 through the API; the running
// worker's snapshot shows it within a second, with no restart, and the
// next run schedules 2 at once and never holds more than 2. The plan's
// stays 4 for the other FREE workspaces.
func TestANodesInFlightChangeAppliesToTheNextRun(t *testing.T) {
	t.Parallel()
	var quotas *worker.QuotaSnapshot
	base := harness.StartSluiceWith(t, nil, fx.Populate(&quotas))
	tc := harness.TemporalClient(t, harness.TemporalAddress(t))
	gates, url := newGateServer(t)
	e := harness.NewE2EWithPlan(t, base, "FREE")
	run := func(name string, want int) {
		t.Helper()
		release := gates.open(name)
		nodes := make([]any, 8)
		for i := range nodes {
			nodes[i] = harness.Node(fmt.Sprintf("n%d", i), "HTTP_REQUEST", map[string]any{"url": fmt.Sprintf("%s/%s/%d", url, name, i)})
		}
		id := e.StartIn(map[string]any{"nodes": nodes}, nil)
		porttest.Eventually(t, 30*time.Second, porttest.Holds(fmt.Sprintf("%s: %d HTTP nodes to be held", name, want), func() bool {
			held, _ := gates.counts(name)
			return held >= want
		}))
		d, err := tc.DescribeWorkflowExecution(context.Background(), "execution-"+id, "")
		if err != nil {
			t.Fatal(err)
		}
		// The workflow schedules every node its cap allows in one task, so
		// once want are held, a larger cap would show here as more.
		if n := len(d.GetPendingActivities()); n != want {
			t.Errorf("%s: %d node activities scheduled at once, want %d", name, n, want)
		}
		release()
		e.WaitFor(id, "COMPLETED")
		if _, peak := gates.counts(name); peak != want {
			t.Errorf("%s: at most %d HTTP nodes held at once, want %d", name, peak, want)
		}
	}
	run("before", 4)

	if code := harness.Call(t, "PUT", base+"/api/v1/workspaces/"+e.Ws+"/limits", harness.TestAdminToken, map[string]any{"maxRunning": nil, "nodesInFlight": 2}, nil); code != http.StatusOK {
		t.Fatalf("setWorkspaceLimits: %d", code)
	}
	id := domain.ID(uuid.MustParse(e.Ws))
	took := porttest.Eventually(t, time.Second, porttest.Holds("the worker's snapshot to show the workspace's 2", func() bool {
		q, ok := quotas.Current(id, domain.PlanFree)
		return ok && q.NodesInFlight == 2
	}))
	t.Logf("the worker read the edit %v after the API answered", took)
	run("after", 2)
	if q, _ := quotas.Current(domain.ID(uuid.New()), domain.PlanFree); q.NodesInFlight != 4 {
		t.Errorf("another FREE workspace's nodes in flight = %d, want the plan's 4", q.NodesInFlight)
	}
}

// TestAWorkspaceShareAboveTheWorkersSlotsIsSavedWithAWarning: with one
// external-API worker of 5 slots (SLUICE_WORKER_EXTERNAL_API_CONCURRENCY),
// an admin who sets a plan's workspaceNodesInFlight to 8, or a
// workspace's own to 6, has the figure saved (several workers may give
// it) and the answer's warnings name the field, the figure and the slots;
// each warned edit is counted in limits_worker_share_warnings_total. A
// share of 5, within the slots, is answered without warnings.
func TestAWorkspaceShareAboveTheWorkersSlotsIsSavedWithAWarning(t *testing.T) {
	t.Parallel()
	var reg *prometheus.Registry
	base := harness.StartSluiceWith(t, map[string]string{"SLUICE_WORKER_EXTERNAL_API_CONCURRENCY": "5"}, fx.Populate(&reg))
	ws, _, _ := workspaceWithKey(t, base)
	warned := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "limits_worker_share_warnings_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no limits_worker_share_warnings_total")
		return 0
	}
	type answer struct {
		WorkspaceNodesInFlight *int
		Warnings               []string
	}
	for _, c := range []struct {
		what, method, path string
		body               map[string]any
		share              int
		warn               bool
	}{
		{"a plan's share above the slots", "PATCH", "/api/v1/plans/PRO", map[string]any{"workspaceNodesInFlight": 8}, 8, true},
		{"a plan's share at the slots", "PATCH", "/api/v1/plans/PRO", map[string]any{"workspaceNodesInFlight": 5}, 5, false},
		{"a workspace's share above the slots", "PUT", "/api/v1/workspaces/" + ws + "/limits", map[string]any{"maxRunning": nil, "workspaceNodesInFlight": 6}, 6, true},
	} {
		before := warned()
		var got answer
		if code := harness.Call(t, c.method, base+c.path, harness.TestAdminToken, c.body, &got); code != http.StatusOK {
			t.Fatalf("%s: %d", c.what, code)
		}
		t.Logf("%s (%d, 5 slots): warnings %q", c.what, c.share, got.Warnings)
		if got.WorkspaceNodesInFlight == nil || *got.WorkspaceNodesInFlight != c.share {
			t.Errorf("%s: saved %v, want %d", c.what, got.WorkspaceNodesInFlight, c.share)
		}
		switch {
		case !c.warn && len(got.Warnings) > 0:
			t.Errorf("%s: warned %q", c.what, got.Warnings)
		case c.warn && (len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], fmt.Sprintf("workspaceNodesInFlight %d is above the 5 slots", c.share))):
			t.Errorf("%s: warnings %q, want one naming the share and the slots", c.what, got.Warnings)
		}
		if want := map[bool]float64{true: 1, false: 0}[c.warn]; warned()-before != want {
			t.Errorf("%s: the counter moved by %v, want %v", c.what, warned()-before, want)
		}
	}
}
