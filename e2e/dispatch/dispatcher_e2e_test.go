package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/maintenance"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// dispatchBundle is what a dispatcher test works with: a real Postgres
// store on a fresh database, and a Temporal engine on the real server.
type dispatchBundle struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	engine *engine.WorkflowClient
	client client.Client
	log    *slog.Logger
}

func setupDispatch(t *testing.T) *dispatchBundle {
	t.Helper()
	pool := pgtest.Pool(t)
	c := harness.TemporalClient(t, harness.TemporalAddress(t))
	// No worker serves this prefix: started workflows simply wait, which is
	// all the dispatcher needs to observe.
	queues := engine.NewTaskQueues("disp" + uuid.NewString()[:8] + ".")
	log := harness.TestLog()
	return &dispatchBundle{pool: pool, store: postgres.NewStore(pool, log), engine: engine.NewWorkflowClient(c, queues, engine.DefaultRunLimits()), client: c, log: log}
}

// planLimits reads each plan's concurrency limit as stored.
func (b *dispatchBundle) planLimits(t *testing.T) map[domain.Plan]int {
	t.Helper()
	plans, err := b.store.ListPlans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[domain.Plan]int{}
	for _, p := range plans {
		out[p.Plan] = p.MaxRunning
	}
	return out
}

func testConfig() dispatch.DispatcherConfig {
	cfg := dispatch.DefaultDispatcherConfig()
	cfg.PollInterval = 100 * time.Millisecond
	cfg.Backoff = domain.DispatchBackoff{Base: 100 * time.Millisecond, Max: time.Second}
	cfg.StaleAfter = 2 * time.Second
	cfg.ReconcileAfter = 0
	cfg.Exclusive = false
	return cfg
}

// dispatcherParts are a non-exclusive dispatcher's claim loop with the
// breaker and maintenance jobs it shares, on the bundle's store.
type dispatcherParts struct {
	*dispatch.Dispatcher
	breaker    *dispatch.Breaker
	metrics    *dispatch.Metrics
	recovery   *maintenance.StaleRecovery
	reconciler *maintenance.Reconciler
}

func (b *dispatchBundle) dispatcher(engine ports.WorkflowEngine, cfg dispatch.DispatcherConfig, wake ports.Wakeups) *dispatcherParts {
	if wake == nil {
		wake = harness.NoWakeups{}
	}
	metrics := dispatch.NewMetrics(prometheus.NewRegistry())
	leaseMetrics := dispatch.NewLeaseMetrics(prometheus.NewRegistry())
	breaker := dispatch.NewBreaker(cfg.BreakerBackoff, metrics)
	lease := postgres.NewLease(b.pool, uuid.NewString())
	schedule := maintenance.DefaultJobSchedule()
	return &dispatcherParts{
		Dispatcher: dispatch.NewDispatcher(dispatch.DispatcherDeps{
			Store: b.store, Executions: b.store, Engine: engine, Wakeups: wake, Breaker: breaker, Metrics: metrics, Log: b.log,
		}, cfg),
		breaker:  breaker,
		metrics:  metrics,
		recovery: maintenance.NewStaleRecovery(b.store, engine, breaker, lease, cfg.StaleAfter, cfg.StartTimeout, schedule, metrics, leaseMetrics, b.log),
		reconciler: maintenance.NewReconciler(b.store, b.store, engine, breaker, lease, cfg.ReconcileAfter, cfg.StartTimeout, cfg.ReconcilePageSize, schedule,
			maintenance.NewReconcilerMetrics(prometheus.NewRegistry()), leaseMetrics, b.log),
	}
}

// workspace creates a workspace on plan with one empty-graph definition.
func (b *dispatchBundle) workspace(t *testing.T, plan domain.Plan) (domain.ID, domain.ID) {
	t.Helper()
	ctx := context.Background()
	w, err := b.store.CreateWorkspace(ctx, domain.Workspace{ID: domain.ID(uuid.New()), Name: "ws", Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: w.ID, Name: "d"})
	if err != nil {
		t.Fatal(err)
	}
	return w.ID, d.ID
}

func (b *dispatchBundle) enqueue(t *testing.T, ws, def domain.ID, n int) []domain.ID {
	t.Helper()
	ids := make([]domain.ID, n)
	for i := range ids {
		q, _, err := b.store.Enqueue(context.Background(), ports.ItemToEnqueue{
			ID: domain.ID(uuid.New()), WorkspaceID: ws, DefinitionID: def, Input: json.RawMessage(`{}`), Priority: 2, Actor: domain.Actor{Admin: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = q.ID
	}
	return ids
}

func (b *dispatchBundle) item(t *testing.T, id domain.ID) domain.QueueItem {
	t.Helper()
	q, err := b.store.GetQueueItem(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func (b *dispatchBundle) countStatus(t *testing.T, status domain.QueueStatus) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM workflow_execution_queue WHERE status = $1", string(status)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *dispatchBundle) running(t *testing.T) map[domain.ID]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT workspace_id, count(*) FROM workflow_executions WHERE status = 'RUNNING' GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[domain.ID]int{}
	for rows.Next() {
		var id domain.ID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// countingEngine wraps an engine and counts starts per execution.
type countingEngine struct {
	ports.WorkflowEngine
	mu     sync.Mutex
	starts map[domain.ID]int
	// fail makes StartWorkflow fail for the executions it returns true for.
	fail func(domain.ID) bool
}

func (c *countingEngine) StartWorkflow(ctx context.Context, req ports.WorkflowStart) error {
	c.mu.Lock()
	if c.starts == nil {
		c.starts = map[domain.ID]int{}
	}
	c.starts[req.ExecutionID]++
	c.mu.Unlock()
	if c.fail != nil && c.fail(req.ExecutionID) {
		return errors.New("injected start failure")
	}
	return c.WorkflowEngine.StartWorkflow(ctx, req)
}

func TestDispatchClaimsABatchAndTheNextCycleTheRest(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanEnterprise)
	ids := b.enqueue(t, ws, def, 15)
	d := b.dispatcher(b.engine, testConfig(), nil)

	res, err := d.DispatchBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Claimed != 10 || res.Dispatched != 10 || !res.Full {
		t.Fatalf("first batch = %+v, want 10 claimed and dispatched, full", res)
	}
	res, err = d.DispatchBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Dispatched != 5 || res.Full {
		t.Fatalf("second batch = %+v, want the remaining 5", res)
	}
	for _, id := range ids {
		q := b.item(t, id)
		if q.Status != domain.QueueDispatched || q.ExecutionID == nil || q.DispatchedAt == nil {
			t.Fatalf("item %s = %s exec %v, want DISPATCHED with an execution", id, q.Status, q.ExecutionID)
		}
		e, err := b.store.GetExecutionWithoutNodes(context.Background(), *q.ExecutionID)
		if err != nil || e.Status != domain.ExecutionRunning || e.Version != 1 {
			t.Fatalf("execution of %s = %+v, %v; want RUNNING version 1", id, e, err)
		}
		state, err := b.engine.DescribeWorkflow(context.Background(), *q.ExecutionID)
		if err != nil || state != ports.WorkflowRunning {
			t.Fatalf("workflow of %s: %s, %v; want it started on Temporal", id, state, err)
		}
	}
	res, err = d.DispatchBatch(context.Background())
	if err != nil || res.Claimed != 0 {
		t.Fatalf("empty queue: %+v, %v; want nothing claimed", res, err)
	}
}

func TestWorkspaceAtCapacityIsPassedOverAndNeverFails(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanFree)
	ids := b.enqueue(t, ws, def, 3)
	d := b.dispatcher(b.engine, testConfig(), nil)
	for range 3 {
		if _, err := d.DispatchBatch(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.running(t)[ws]; got != 1 {
		t.Fatalf("FREE workspace has %d RUNNING, want exactly 1", got)
	}
	if n := b.countStatus(t, domain.QueuePending); n != 2 {
		t.Fatalf("%d items PENDING, want the 2 waiting for the slot", n)
	}
	if n := b.countStatus(t, domain.QueueFailed); n != 0 {
		t.Fatalf("%d items FAILED; capacity must never fail an item", n)
	}
	// Freeing the slot admits the next one, oldest first.
	first := b.item(t, ids[0])
	if _, err := b.store.FinishExecution(context.Background(), *first.ExecutionID, domain.ExecutionCompleted, nil, queue.AtEnd(domain.ExecutionCompleted, "", harness.TestLog())); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DispatchBatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q := b.item(t, ids[1]); q.Status != domain.QueueDispatched {
		t.Fatalf("second item = %s after the slot freed, want DISPATCHED", q.Status)
	}
}

func TestBacklogBehindAFullWorkspaceDoesNotDelayOthers(t *testing.T) {
	b := setupDispatch(t)
	busy, busyDef := b.workspace(t, domain.PlanFree)
	b.enqueue(t, busy, busyDef, 1)
	d := b.dispatcher(b.engine, testConfig(), nil)
	if res, err := d.DispatchBatch(context.Background()); err != nil || res.Dispatched != 1 {
		t.Fatalf("occupying the slot: %+v %v", res, err)
	}
	// Hundreds wait behind the occupied slot, older than anything else.
	if _, err := b.pool.Exec(context.Background(), `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, created_at)
		SELECT gen_random_uuid(), $1, $2, now() - interval '1 hour' FROM generate_series(1, 500)`, busy, busyDef); err != nil {
		t.Fatal(err)
	}
	other, otherDef := b.workspace(t, domain.PlanFree)
	last := b.enqueue(t, other, otherDef, 1)[0]

	res, err := d.DispatchBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if q := b.item(t, last); q.Status != domain.QueueDispatched {
		t.Fatalf("the other workspace's item = %s after one batch (%+v), want DISPATCHED", q.Status, res)
	}
	if res.Claimed != 1 {
		t.Fatalf("batch claimed %d items, want only the admissible one (no claim-then-release churn)", res.Claimed)
	}
}

func TestPriorityOrdersWorkWithinAWorkspace(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanFree)
	b.enqueue(t, ws, def, 2)
	urgent, _, err := b.store.Enqueue(context.Background(), ports.ItemToEnqueue{
		ID: domain.ID(uuid.New()), WorkspaceID: ws, DefinitionID: def, Input: json.RawMessage(`{}`), Priority: 1, Actor: domain.Actor{Admin: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := b.dispatcher(b.engine, testConfig(), nil)
	if _, err := d.DispatchBatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q := b.item(t, urgent.ID); q.Status != domain.QueueDispatched {
		t.Fatalf("priority 1 item = %s, want it admitted first", q.Status)
	}
}

func TestRetryRunsUnderAnExecutionOfItsOwnAndSurvivesAShortOutage(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanPro)
	id := b.enqueue(t, ws, def, 1)[0]
	// Temporal is "down" for the first two attempts, as during an outage
	// shorter than the backoff schedule.
	var calls atomic.Int32
	var failedMu sync.Mutex
	var failed []domain.ID
	eng := &countingEngine{WorkflowEngine: b.engine, fail: func(exec domain.ID) bool {
		if calls.Add(1) > 2 {
			return false
		}
		failedMu.Lock()
		defer failedMu.Unlock()
		failed = append(failed, exec)
		return true
	}}
	cfg := testConfig()
	// Long enough that a loaded machine cannot reach the immediate retry
	// below only after the backoff has passed.
	cfg.Backoff = domain.DispatchBackoff{Base: 2 * time.Second, Max: 4 * time.Second}
	d := b.dispatcher(eng, cfg, nil)

	res, err := d.DispatchBatch(context.Background())
	if err != nil || res.Released != 1 {
		t.Fatalf("first try: %+v %v; want released", res, err)
	}
	q := b.item(t, id)
	if q.Status != domain.QueuePending || q.DispatchFailures != 1 || q.AttemptCount != 1 || q.LastError == "" || q.ExecutionID != nil {
		t.Fatalf("after a failed start: %+v, want it PENDING without the failed claim's execution", q)
	}
	if !q.AvailableAt.After(time.Now().Add(-time.Second)) {
		t.Fatalf("available_at %s: a failed item must back off", q.AvailableAt)
	}
	// An immediate retry finds nothing claimable: the backoff holds.
	if res, _ := d.DispatchBatch(context.Background()); res.Claimed != 0 {
		t.Fatalf("claimed during backoff: %+v", res)
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the item to be dispatched after the outage", func() bool {
		_, _ = d.DispatchBatch(context.Background())
		return b.item(t, id).Status == domain.QueueDispatched
	}))
	q = b.item(t, id)
	failedMu.Lock()
	defer failedMu.Unlock()
	if len(failed) != 2 || slices.Contains(failed, *q.ExecutionID) {
		t.Fatalf("the retry runs execution %s, the failed tries %v; want one of its own after two failed tries", *q.ExecutionID, failed)
	}
	for _, exec := range failed {
		// The failed tries' rows went with their release: they would hold
		// the slot during the backoff.
		if _, err := b.store.GetExecutionWithoutNodes(context.Background(), exec); !errors.Is(err, ports.ErrNotFound) {
			t.Fatalf("the failed try's execution %s is still there: %v", exec, err)
		}
	}
	if q.DispatchFailures != 2 {
		t.Fatalf("dispatch_failures = %d, want 2", q.DispatchFailures)
	}
}

func TestTemporalDownFailsNothingAndPausesDispatch(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanPro)
	ids := b.enqueue(t, ws, def, 3)
	// A client pointed at a port nobody listens on.
	dead := engine.NewWorkflowClient(harness.TemporalClient(t, "127.0.0.1:1"), engine.NewTaskQueues("dead."), engine.DefaultRunLimits())
	cfg := testConfig()
	cfg.BatchSize = 1
	d := b.dispatcher(dead, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.DispatchBatch(ctx); err != nil {
		t.Fatal(err)
	}
	if d.breaker.Err() == nil {
		t.Fatal("breaker closed with Temporal unreachable, want the open breaker's error")
	}
	// The item caught by the outage cannot be resolved: it stays CLAIMED,
	// holding its slot, with no failure counted; the others wait PENDING.
	claimed := 0
	for _, id := range ids {
		q := b.item(t, id)
		if q.DispatchFailures != 0 || q.Status == domain.QueueFailed {
			t.Fatalf("item %s during the outage: %s with %d dispatch failures, want no failure", id, q.Status, q.DispatchFailures)
		}
		if q.Status == domain.QueueClaimed {
			claimed++
		}
	}
	if claimed != 1 {
		t.Fatalf("%d items CLAIMED, want only the one whose start met the outage", claimed)
	}
	// The failed start is counted, by why it failed, as held: no failure
	// counts against the item.
	if got := testutil.ToFloat64(d.metrics.DispatchFailures.WithLabelValues(dispatch.ReasonTemporalUnavailable, dispatch.OutcomeHeld)); got != 1 {
		t.Errorf("queue_dispatch_failures_total{temporal_unavailable,held} = %v with Temporal unreachable, want 1", got)
	}
}

func TestOneFailedStartDoesNotRollBackTheBatch(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanEnterprise)
	b.enqueue(t, ws, def, 6)
	var victim atomic.Value
	eng := &countingEngine{WorkflowEngine: b.engine, fail: func(id domain.ID) bool {
		return victim.CompareAndSwap(nil, id) || victim.Load() == id
	}}
	d := b.dispatcher(eng, testConfig(), nil)
	res, err := d.DispatchBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Dispatched != 5 || res.Released != 1 {
		t.Fatalf("batch = %+v, want 5 dispatched and the failed one released", res)
	}
}

func TestDeletedWorkspaceOrDefinitionFailsItsItems(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	ws1, def1 := b.workspace(t, domain.PlanPro)
	gone := b.enqueue(t, ws1, def1, 1)[0]
	ws2, def2 := b.workspace(t, domain.PlanPro)
	orphan := b.enqueue(t, ws2, def2, 1)[0]
	if _, err := b.pool.Exec(ctx, "DELETE FROM workspaces WHERE id = $1", ws1); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DeleteDefinition(ctx, def2); err != nil {
		t.Fatal(err)
	}
	d := b.dispatcher(b.engine, testConfig(), nil)
	if _, err := d.DispatchBatch(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[domain.ID]string{gone: "workspace not found", orphan: "workflow definition not found"} {
		q := b.item(t, id)
		if q.Status != domain.QueueFailed || len(q.LastError) < len(want) || q.LastError[:len(want)] != want {
			t.Errorf("item %s = %s %q, want FAILED starting %q", id, q.Status, q.LastError, want)
		}
	}
}

func TestStaleRecoveryReleasesUnstartedAndSettlesStartedItems(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	ws, def := b.workspace(t, domain.PlanPro)
	ids := b.enqueue(t, ws, def, 2)
	// A dispatcher that claims and then "crashes" before starting anything.
	cfg := testConfig()
	claim, err := b.store.Claim(ctx, ports.Fence{}, 2, dispatch.PlanClaim(func(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
		out := map[domain.ID]int{}
		for _, w := range ws {
			out[w.ID] = 2
		}
		return out
	}), dispatch.RejectUnrunnable)
	if err != nil || len(claim.Claimed) != 2 {
		t.Fatalf("claim: %+v %v", claim, err)
	}
	// One of the two did reach Temporal before the crash.
	started := claim.Claimed[0]
	if err := b.engine.StartWorkflow(ctx, ports.WorkflowStart{ExecutionID: started.ExecutionID, WorkspaceID: ws, DefinitionID: def, Version: 1}); err != nil {
		t.Fatal(err)
	}
	d := b.dispatcher(b.engine, cfg, nil)
	if n, err := d.recovery.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("fresh claims recovered: %d %v; want none before the threshold", n, err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE workflow_execution_queue SET claimed_at = now() - interval '10 minutes' WHERE status = 'CLAIMED'"); err != nil {
		t.Fatal(err)
	}
	n, err := d.recovery.Recover(ctx)
	if err != nil || n != 2 {
		t.Fatalf("recovered %d, %v; want 2", n, err)
	}
	if q := b.item(t, started.ID); q.Status != domain.QueueDispatched {
		t.Fatalf("item whose workflow started = %s, want DISPATCHED (never started twice)", q.Status)
	}
	other := ids[0]
	if other == started.ID {
		other = ids[1]
	}
	q := b.item(t, other)
	if q.Status != domain.QueuePending || q.AttemptCount != 1 || q.ClaimedAt != nil {
		t.Fatalf("unstarted stale item = %+v, want PENDING with attempt_count 1", q)
	}
	if got := b.running(t)[ws]; got != 1 {
		t.Fatalf("%d RUNNING after recovery, want 1: the unstarted item's slot is freed", got)
	}
}

// shardStuckEngine is the real Temporal client, except that Temporal
// never answers about one workflow (its shard stuck, say): describing
// execution is unavailable, while the health check and every other
// question are answered.
type shardStuckEngine struct {
	ports.WorkflowEngine
	execution domain.ID
}

func (e shardStuckEngine) DescribeWorkflow(ctx context.Context, id domain.ID) (ports.WorkflowState, error) {
	if id == e.execution {
		return "", fmt.Errorf("%w: its shard does not answer", ports.ErrEngineUnavailable)
	}
	return e.WorkflowEngine.DescribeWorkflow(ctx, id)
}

// TestStaleRecoveryGoesPastAClaimTemporalDoesNotAnswerAbout has a
// dispatcher claim four items and "crash", one of their workflows having
// reached Temporal, and gives stale recovery a Temporal that answers its
// health check and every question but the describe of the oldest claim's
// workflow. It requires that each run settles the three others (the
// started one DISPATCHED, the rest PENDING with their slots freed) and
// leaves the oldest CLAIMED with its execution RUNNING, holding its slot;
// that the third run in a row counts it in
// queue_stale_recovery_unanswered_claims_total; and that once Temporal
// answers about it (it never started) it goes back to PENDING. Before
// stale recovery went past such a claim, the first run stopped at it and
// settled nothing.
func TestStaleRecoveryGoesPastAClaimTemporalDoesNotAnswerAbout(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	ws, def := b.workspace(t, domain.PlanPro)
	b.enqueue(t, ws, def, 4)
	claim, err := b.store.Claim(ctx, ports.Fence{}, 4, dispatch.PlanClaim(func(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
		out := map[domain.ID]int{}
		for _, w := range ws {
			out[w.ID] = 4
		}
		return out
	}), dispatch.RejectUnrunnable)
	if err != nil || len(claim.Claimed) != 4 {
		t.Fatalf("claim: %+v %v", claim, err)
	}
	stuck, started := claim.Claimed[0], claim.Claimed[1]
	if err := b.engine.StartWorkflow(ctx, ports.WorkflowStart{ExecutionID: started.ExecutionID, WorkspaceID: ws, DefinitionID: def, Version: 1}); err != nil {
		t.Fatal(err)
	}
	// The stuck claim is the oldest, so each run asks about it first.
	if _, err := b.pool.Exec(ctx, "UPDATE workflow_execution_queue SET claimed_at = now() - CASE WHEN id = $1 THEN interval '11 minutes' ELSE interval '10 minutes' END WHERE status = 'CLAIMED'", stuck.ID); err != nil {
		t.Fatal(err)
	}
	d := b.dispatcher(shardStuckEngine{WorkflowEngine: b.engine, execution: stuck.ExecutionID}, testConfig(), nil)

	for run := 1; run <= 3; run++ {
		n, err := d.recovery.Recover(ctx)
		want := 0
		if run == 1 {
			want = 3
		}
		if err != nil || n != want {
			t.Fatalf("run %d: Recover = %d, %v; want %d settled, going past the claim Temporal does not answer about", run, n, err, want)
		}
		if q := b.item(t, stuck.ID); q.Status != domain.QueueClaimed || q.ExecutionID == nil || *q.ExecutionID != stuck.ExecutionID {
			t.Fatalf("run %d left the unanswered claim %s %v; want it CLAIMED under its execution", run, q.Status, q.ExecutionID)
		}
		reported := 0.0
		if run == 3 {
			reported = 1
		}
		if got := testutil.ToFloat64(d.metrics.StaleUnansweredClaims); got != reported {
			t.Fatalf("after run %d queue_stale_recovery_unanswered_claims_total = %v; want %v", run, got, reported)
		}
	}
	if q := b.item(t, started.ID); q.Status != domain.QueueDispatched {
		t.Errorf("item whose workflow started = %s; want DISPATCHED", q.Status)
	}
	for _, c := range claim.Claimed[2:] {
		if q := b.item(t, c.ID); q.Status != domain.QueuePending {
			t.Errorf("unstarted item behind the unanswered claim = %s; want PENDING", q.Status)
		}
	}
	if got := b.running(t)[ws]; got != 2 {
		t.Fatalf("%d RUNNING; want 2: the started run's and the unanswered claim's, which holds its slot", got)
	}

	// Temporal answers about it again: it never started, so it goes back.
	answered := b.dispatcher(b.engine, testConfig(), nil)
	if n, err := answered.recovery.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("after Temporal answered, Recover = %d, %v; want the claim settled", n, err)
	}
	if q := b.item(t, stuck.ID); q.Status != domain.QueuePending {
		t.Errorf("the claim Temporal has never seen = %s; want PENDING", q.Status)
	}
}

func TestReconcilerRecordsWorkflowsTerminatedOutsideSluice(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	ws, def := b.workspace(t, domain.PlanFree)
	id := b.enqueue(t, ws, def, 1)[0]
	d := b.dispatcher(b.engine, testConfig(), nil)
	if _, err := d.DispatchBatch(ctx); err != nil {
		t.Fatal(err)
	}
	q := b.item(t, id)
	if err := b.client.TerminateWorkflow(ctx, engine.WorkflowID(*q.ExecutionID), "", "operator"); err != nil {
		t.Fatal(err)
	}
	n, err := d.reconciler.Reconcile(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reconciled %d, %v; want 1", n, err)
	}
	e, err := b.store.GetExecutionWithoutNodes(ctx, *q.ExecutionID)
	if err != nil || e.Status != domain.ExecutionFailed || e.Error == nil {
		t.Fatalf("execution = %+v %v; want FAILED with the reason", e, err)
	}
	if q := b.item(t, id); q.Status != domain.QueueFailed {
		t.Fatalf("queue item = %s, want FAILED", q.Status)
	}
	if got := b.running(t)[ws]; got != 0 {
		t.Fatalf("slot not freed: %d RUNNING", got)
	}
}

func TestLeaseIsExclusiveUntilItExpires(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	one, two := postgres.NewLease(b.pool, "one"), postgres.NewLease(b.pool, "two")
	if _, ok, err := one.TryAcquire(ctx, dispatch.QueueLeaseName, time.Second); err != nil || !ok {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	if _, ok, _ := two.TryAcquire(ctx, dispatch.QueueLeaseName, time.Second); ok {
		t.Fatal("a second holder took a held lease")
	}
	if _, ok, _ := one.TryAcquire(ctx, dispatch.QueueLeaseName, time.Second); !ok {
		t.Fatal("the holder could not extend its lease")
	}
	if err := one.Release(ctx, dispatch.QueueLeaseName, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := two.TryAcquire(ctx, dispatch.QueueLeaseName, 200*time.Millisecond); !ok {
		t.Fatal("a released lease could not be taken")
	}
	// lockAtLeastFor keeps it held after release.
	if err := two.Release(ctx, dispatch.QueueLeaseName, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := one.TryAcquire(ctx, dispatch.QueueLeaseName, time.Second); ok {
		t.Fatal("lease taken before lockAtLeastFor passed")
	}
	// An expired lease (lockAtMostFor) can be taken over.
	if _, err := b.pool.Exec(ctx, "UPDATE shedlock SET lock_until = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := one.TryAcquire(ctx, dispatch.QueueLeaseName, time.Second); !ok {
		t.Fatal("an expired lease could not be taken over")
	}
}

func TestThreeDispatchersNeverExceedAnyLimit(t *testing.T) {
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	limits := map[domain.ID]int{}
	planLimits := b.planLimits(t)
	total := 0
	for _, spec := range []struct {
		plan  domain.Plan
		items int
	}{{domain.PlanFree, 40}, {domain.PlanFree, 40}, {domain.PlanPro, 60}, {domain.PlanPro, 60}, {domain.PlanEnterprise, 100}} {
		ws, def := b.workspace(t, spec.plan)
		limits[ws] = planLimits[spec.plan]
		b.enqueue(t, ws, def, spec.items)
		total += spec.items
	}
	eng := &countingEngine{WorkflowEngine: b.engine}
	cfg := testConfig()
	cfg.PollInterval = 20 * time.Millisecond
	var wg sync.WaitGroup
	for range 3 {
		l := postgres.NewListener(b.pool, b.log)
		d := b.dispatcher(eng, cfg, l)
		wg.Add(2)
		go func() { defer wg.Done(); l.Run(ctx) }()
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	// Executions run for a while, then complete, like long workflows.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rows, err := b.pool.Query(ctx, "SELECT id FROM workflow_executions WHERE status = 'RUNNING' AND started_at < now() - interval '30 milliseconds'")
			if err != nil {
				continue
			}
			var ids []domain.ID
			for rows.Next() {
				var id domain.ID
				_ = rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				_, _ = b.store.FinishExecution(ctx, id, domain.ExecutionCompleted, nil, queue.AtEnd(domain.ExecutionCompleted, "", harness.TestLog()))
			}
			time.Sleep(5 * time.Millisecond) // a worker's pace of completions, not synchronisation
		}
	}()
	var violations []string
	samples := 0
	porttest.Eventually(t, 3*time.Minute, porttest.Holds("every item to run", func() bool {
		for ws, n := range b.running(t) {
			if n > limits[ws] {
				violations = append(violations, fmt.Sprintf("workspace %s: %d RUNNING > limit %d", ws, n, limits[ws]))
			}
		}
		samples++
		var left int
		_ = b.pool.QueryRow(context.Background(), "SELECT count(*) FROM workflow_execution_queue").Scan(&left)
		return left == 0
	}))
	cancel()
	wg.Wait()
	if len(violations) > 0 {
		t.Fatalf("%d of %d samples broke a limit, e.g. %s", len(violations), samples, violations[0])
	}
	var executions, completed int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*), count(*) FILTER (WHERE status = 'COMPLETED') FROM workflow_executions").Scan(&executions, &completed); err != nil {
		t.Fatal(err)
	}
	if executions != total || completed != total {
		t.Fatalf("%d executions (%d completed) for %d items: want exactly one each", executions, completed, total)
	}
	eng.mu.Lock()
	defer eng.mu.Unlock()
	if len(eng.starts) != total {
		t.Fatalf("%d distinct workflows started for %d items", len(eng.starts), total)
	}
	for id, n := range eng.starts {
		if n != 1 {
			t.Fatalf("execution %s was started %d times", id, n)
		}
	}
	t.Logf("%d items through 3 dispatchers, %d samples, no limit broken", total, samples)
	pgtest.RequireExactStats(t, b.pool, "after three dispatchers ran concurrently")
}

// TestCancellingAClaimedItemCancelsTheWorkflowItsDispatcherStarted: a
// dispatcher claims an item, starts its workflow and dies before marking
// it DISPATCHED. Cancelling the item, still CLAIMED, answers CANCELLED and
// cancels that workflow on the real server, so the run does not go on.
func TestCancellingAClaimedItemCancelsTheWorkflowItsDispatcherStarted(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	ws, def := b.workspace(t, domain.PlanFree)
	id := b.enqueue(t, ws, def, 1)[0]
	claim, err := b.store.Claim(ctx, ports.Fence{}, 1, dispatch.PlanClaim(func(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
		out := map[domain.ID]int{}
		for _, w := range ws {
			out[w.ID] = 1
		}
		return out
	}), dispatch.RejectUnrunnable)
	if err != nil || len(claim.Claimed) != 1 {
		t.Fatalf("claim: %+v %v", claim, err)
	}
	started := claim.Claimed[0]
	if err := b.engine.StartWorkflow(ctx, ports.WorkflowStart{ExecutionID: started.ExecutionID, WorkspaceID: ws, DefinitionID: def, Version: 1}); err != nil {
		t.Fatal(err)
	}
	executions := usecases.NewExecutions(b.store, b.store, b.store, b.store, b.engine, domain.ProcessQuotas{})
	outcome, err := executions.CancelQueueItem(ctx, domain.Actor{WorkspaceID: ws}, id)
	if err != nil || outcome != usecases.CancelDone {
		t.Fatalf("cancel: %s, %v; want CANCELLED", outcome, err)
	}
	if q := b.item(t, id); q.Status != domain.QueueCancelled {
		t.Errorf("item = %s, want CANCELLED", q.Status)
	}
	cancelRequested := false
	iter := b.client.GetWorkflowHistory(ctx, engine.WorkflowID(started.ExecutionID), "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetWorkflowExecutionCancelRequestedEventAttributes() != nil {
			cancelRequested = true
		}
	}
	if !cancelRequested {
		t.Error("the started workflow was not asked to cancel: its run would go on behind a CANCELLED item")
	}
}
