package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/examples/teamservice"
	"github.com/sluicehq/sluice/ports/porttest"
)

// gatedTenant is one workspace of the gated-workflow fault test: its plan's
// limit, an optional concurrency key limit over the input's customer, and
// how many charges it enqueues.
type gatedTenant struct {
	plan      string
	limit     int
	keyLimit  int // 0: no concurrency key
	customers int
	items     int

	id  uuid.UUID
	def uuid.UUID
}

// runningSample is one look at how many of a tenant's team workflows run,
// per workspace and per (workspace, key).
type runningSample struct {
	byTenant map[uuid.UUID]int
	byKey    map[string]int
}

// TestFaultGatedTemporalWorkflowsStayWithinEachTenantsLimit is issue 35's
// real-stack proof: a team's own workflow type (the example's
// ChargeCustomer, run by its own worker process on its own task queue),
// gated by a one-node TEMPORAL_WORKFLOW definition per tenant, with
// tenants of limits 1, 5 and 20 (the last also keyed per customer), three
// non-exclusive dispatchers, and, during the run, kill -9 of a dispatcher
// and of the team's worker and a 20 s Temporal outage. The running count
// of each tenant's team workflows, sampled from Temporal and from Sluice,
// is never over the tenant's limit (nor a key's over its limit), and every
// enqueued charge runs exactly once.
func TestFaultGatedTemporalWorkflowsStayWithinEachTenantsLimit(t *testing.T) {
	harness.FaultTest(t)
	dbURL := pgtest.URL(t)
	server := newTemporalServer(t)
	ctx := context.Background()
	conn := connect(t, dbURL)
	queue := "team-billing-" + uuid.NewString()[:8]

	env := harness.FaultEnv(dbURL, server.addr(), "gated"+uuid.NewString()[:8]+".",
		"SLUICE_DISPATCH_EXCLUSIVE=false", "SLUICE_ADMIN_TOKEN="+harness.TestAdminToken)
	port, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	harness.StartFaultRole(t, "api", append(env, fmt.Sprintf("SLUICE_HTTP_ADDR=127.0.0.1:%d", port)))
	var dispatchers []*harness.FaultRole
	for range 3 {
		dispatchers = append(dispatchers, harness.StartFaultRole(t, "dispatcher", env))
	}
	harness.StartFaultRole(t, "worker", env)
	porttest.Eventually(t, time.Minute, porttest.Holds("the api process to serve", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}))
	team := harness.StartTeamWorker(t, server.addr(), queue)

	tenants := []*gatedTenant{
		{plan: "FREE", limit: 1, items: 6},
		{plan: "PRO", limit: 5, items: 20},
		{plan: "ENTERPRISE", limit: 20, keyLimit: 3, customers: 10, items: 60},
	}
	limitOf := map[uuid.UUID]*gatedTenant{}
	for _, tn := range tenants {
		var ws struct{ ID uuid.UUID }
		if code := harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "gated-" + tn.plan, "plan": tn.plan}, &ws); code != 201 {
			t.Fatalf("create workspace: %d", code)
		}
		tn.id = ws.ID
		limitOf[ws.ID] = tn
		harness.AllowTaskQueue(t, base, ws.ID.String(), queue, teamservice.WorkflowType)
		var concurrency map[string]any
		if tn.keyLimit > 0 {
			concurrency = map[string]any{"key": "{{ input.customer }}", "limit": tn.keyLimit}
		}
		var def struct{ ID uuid.UUID }
		if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", harness.TestAdminToken,
			map[string]any{"workspaceId": ws.ID, "name": "charge", "graph": harness.ChargeGraph(queue, concurrency)}, &def); code != 201 {
			t.Fatalf("create the gating definition for %s: %d", tn.plan, code)
		}
		tn.def = def.ID
	}
	enqueued := 0
	enqueue := func(tn *gatedTenant, n int) {
		t.Helper()
		customer := fmt.Sprintf("c%d", n%max(tn.customers, 1))
		input := teamservice.ChargeInput{Customer: customer, AmountCents: int64(100 + n), HoldMs: 1500}
		if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
			map[string]any{"workspaceId": tn.id, "workflowDefinitionId": tn.def, "input": input}, nil); code != 202 {
			t.Fatalf("enqueue a charge for %s: %d", tn.plan, code)
		}
		enqueued++
	}
	for _, tn := range tenants {
		for n := range tn.items {
			enqueue(tn, n)
		}
	}

	// The sampler: from Temporal, the open ChargeCustomer workflows, each
	// confirmed running by a describe (visibility trails the workflow's
	// own state), mapped to their tenant and key through the parent run
	// their workflow id names; from Sluice, its RUNNING executions.
	temporal := harness.TemporalClient(t, server.addr())
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var (
		mu             sync.Mutex
		temporalPeak   = map[string]int{}
		sluicePeak     = map[string]int{}
		temporalLooks  int
		temporalMissed int
		over           []string
	)
	owners := map[uuid.UUID][2]string{} // execution -> (workspace, key)
	ownerOf := func(conn *pgx.Conn, exec uuid.UUID) ([2]string, bool) {
		if o, ok := owners[exec]; ok {
			return o, true
		}
		var ws uuid.UUID
		var key *string
		if err := conn.QueryRow(sampleCtx, `SELECT workspace_id, concurrency_key FROM workflow_executions WHERE id = $1`, exec).Scan(&ws, &key); err != nil {
			return [2]string{}, false
		}
		o := [2]string{ws.String(), ""}
		if key != nil {
			o[1] = *key
		}
		owners[exec] = o
		return o, true
	}
	check := func(source string, s runningSample, peak map[string]int) {
		for ws, n := range s.byTenant {
			tn := limitOf[ws]
			peak[tn.plan] = max(peak[tn.plan], n)
			if n > tn.limit {
				over = append(over, fmt.Sprintf("%s: %s ran %d, limit %d", source, tn.plan, n, tn.limit))
			}
		}
		for k, n := range s.byKey {
			ws, _, _ := strings.Cut(k, "|")
			tn := limitOf[uuid.MustParse(ws)]
			peak[tn.plan+" key"] = max(peak[tn.plan+" key"], n)
			if n > tn.keyLimit {
				over = append(over, fmt.Sprintf("%s: %s key %s ran %d, limit %d", source, tn.plan, k, n, tn.keyLimit))
			}
		}
	}
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sconn, err := pgx.Connect(sampleCtx, dbURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer sconn.Close(context.Background())
		for sampleCtx.Err() == nil {
			if s, ok := sampleTemporal(sampleCtx, temporal, func(exec uuid.UUID) ([2]string, bool) { return ownerOf(sconn, exec) }); ok {
				mu.Lock()
				temporalLooks++
				check("Temporal", s, temporalPeak)
				mu.Unlock()
			} else {
				mu.Lock()
				temporalMissed++
				mu.Unlock()
			}
			if s, err := sampleSluice(sampleCtx, sconn); err == nil {
				mu.Lock()
				check("Sluice", s, sluicePeak)
				mu.Unlock()
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(100 * time.Millisecond): // the sampling period, not synchronisation
			}
		}
	}()

	const runningQ = `SELECT count(*) FROM workflow_executions WHERE status = 'RUNNING'`
	const completedQ = `SELECT count(*) FROM workflow_executions WHERE status = 'COMPLETED'`
	porttest.Eventually(t, time.Minute, porttest.Holds("the ENTERPRISE tenant to run a full 20", func() bool {
		return count(t, conn, runningQ+` AND workspace_id = $1`, tenants[2].id) >= 20
	}))

	// kill -9 of a dispatcher: the other two carry on.
	_ = dispatchers[0].Cmd.Process.Signal(syscall.SIGKILL)
	<-dispatchers[0].Done
	// kill -9 of the team's worker, restarted: its workflow tasks and
	// activities in flight time out and run again on the new one.
	team.Kill()
	harness.StartTeamWorker(t, server.addr(), queue)
	// The Temporal outage, with enqueues arriving during it.
	outage := faultDuration("SLUICE_FAULT_GATED_TEMPORAL_OUTAGE", 20*time.Second)
	server.stop()
	stoppedAt := time.Now()
	for n := 0; time.Since(stoppedAt) < outage; n++ {
		enqueue(tenants[n%len(tenants)], 1000+n)
		time.Sleep(outage / 10) // spreads the enqueues over the outage; not synchronisation
	}
	server.start()
	backAt := time.Now()

	waitCount(t, conn, 3*time.Minute, "every charge completed", enqueued, completedQ)
	drained := time.Since(backAt)
	stopSampling()
	<-sampled

	// Exactly once: one execution per item, all COMPLETED, and Temporal
	// holds exactly one completed ChargeCustomer per execution.
	if n := count(t, conn, `SELECT count(*) FROM workflow_executions`); n != enqueued {
		t.Errorf("%d executions for %d enqueued items, want one each", n, enqueued)
	}
	if n := count(t, conn, `SELECT count(*) FROM workflow_execution_queue`); n != 0 {
		t.Errorf("%d queue items left, want none", n)
	}
	var children []string
	// Visibility trails the workflows' own state by a moment.
	_ = porttest.Eventually(t, 30*time.Second, func() error {
		if children = completedCharges(t, temporal); len(children) < enqueued {
			return fmt.Errorf("Temporal lists %d completed charges of %d", len(children), enqueued)
		}
		return nil
	})
	distinct := map[string]bool{}
	for _, id := range children {
		distinct[id] = true
	}
	if len(children) != enqueued || len(distinct) != enqueued {
		t.Errorf("Temporal completed %d ChargeCustomer workflows (%d distinct parents) for %d enqueued, want exactly one each", len(children), len(distinct), enqueued)
	}

	mu.Lock()
	defer mu.Unlock()
	t.Logf("FIGURE gated team workflows: %d charges on 3 tenants (limits 1, 5, 20; keys of 3) through kill -9 of a dispatcher and of the team worker and a %s Temporal outage; peak running per tenant from Temporal %v (%d looks, %d while Temporal was down), from Sluice %v; over a limit: %d (target 0: %s); drained %.1f s after Temporal returned",
		enqueued, outage, temporalPeak, temporalLooks, temporalMissed, sluicePeak, len(over), metOrMissed(len(over) == 0), drained.Seconds())
	if len(over) > 0 {
		t.Fatalf("over a limit (%d samples), first: %s", len(over), over[0])
	}
	if temporalPeak["ENTERPRISE"] == 0 || temporalPeak["FREE"] != 1 {
		t.Fatalf("the Temporal sampler saw peaks %v: it did not see the tenants' workflows run", temporalPeak)
	}
}

// sampleTemporal counts the running ChargeCustomer workflows per tenant
// and key; false when Temporal does not answer (its outage).
func sampleTemporal(ctx context.Context, c client.Client, owner func(uuid.UUID) ([2]string, bool)) (runningSample, bool) {
	s := runningSample{byTenant: map[uuid.UUID]int{}, byKey: map[string]int{}}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var token []byte
	for {
		resp, err := c.ListWorkflow(rctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     "default",
			Query:         fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", teamservice.WorkflowType),
			NextPageToken: token,
		})
		if err != nil {
			return s, false
		}
		for _, wf := range resp.GetExecutions() {
			d, err := c.DescribeWorkflowExecution(rctx, wf.GetExecution().GetWorkflowId(), wf.GetExecution().GetRunId())
			if err != nil {
				return s, false
			}
			if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				continue
			}
			exec, ok := parentExecution(wf.GetExecution().GetWorkflowId())
			if !ok {
				continue
			}
			o, ok := owner(exec)
			if !ok {
				continue
			}
			ws := uuid.MustParse(o[0])
			s.byTenant[ws]++
			if o[1] != "" {
				s.byKey[o[0]+"|"+o[1]]++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return s, true
		}
	}
}

// parentExecution reads the Sluice execution a child's workflow id names
// (execution-<id>/<node key>[/<suffix>]).
func parentExecution(workflowID string) (uuid.UUID, bool) {
	parent, _, ok := strings.Cut(workflowID, "/")
	if !ok {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(strings.TrimPrefix(parent, "execution-"))
	return id, err == nil
}

// sampleSluice counts Sluice's RUNNING executions per tenant and key.
func sampleSluice(ctx context.Context, conn *pgx.Conn) (runningSample, error) {
	s := runningSample{byTenant: map[uuid.UUID]int{}, byKey: map[string]int{}}
	rows, err := conn.Query(ctx, `
		SELECT workspace_id, concurrency_key, count(*) FROM workflow_executions WHERE status = 'RUNNING' GROUP BY 1, 2`)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var ws uuid.UUID
		var key *string
		var n int
		if err := rows.Scan(&ws, &key, &n); err != nil {
			return s, err
		}
		s.byTenant[ws] += n
		if key != nil {
			s.byKey[ws.String()+"|"+*key] += n
		}
	}
	return s, rows.Err()
}

// completedCharges lists the parent execution of every completed
// ChargeCustomer workflow.
func completedCharges(t *testing.T, c client.Client) []string {
	t.Helper()
	var parents []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     "default",
			Query:         fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Completed'", teamservice.WorkflowType),
			NextPageToken: token,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, wf := range resp.GetExecutions() {
			id, _ := parentExecution(wf.GetExecution().GetWorkflowId())
			parents = append(parents, id.String())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return parents
		}
	}
}
