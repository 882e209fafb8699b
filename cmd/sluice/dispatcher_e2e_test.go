package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/db"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// dispatchBundle is what a dispatcher test works with: a real Postgres
// store on a fresh database, and a Temporal engine on the real server.
type dispatchBundle struct {
	pool   *pgxpool.Pool
	store  *postgres.Store
	engine *engine.Engine
	client client.Client
	log    *slog.Logger
}

func temporalClient(t *testing.T, hostPort string) client.Client {
	t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: hostPort, Namespace: "default", Logger: nopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func setupDispatch(t *testing.T) *dispatchBundle {
	t.Helper()
	pool := pgtest.Pool(t)
	c := temporalClient(t, temporalAddress(t))
	// No worker serves this prefix: started workflows simply wait, which is
	// all the dispatcher needs to observe.
	queues := engine.NewTaskQueues("disp" + uuid.NewString()[:8] + ".")
	log := testLog()
	return &dispatchBundle{pool: pool, store: postgres.NewStore(pool, log), engine: engine.NewEngine(c, queues), client: c, log: log}
}

func testConfig() app.DispatcherConfig {
	cfg := app.DefaultDispatcherConfig()
	cfg.PollInterval = 100 * time.Millisecond
	cfg.Backoff = domain.DispatchBackoff{Base: 100 * time.Millisecond, Max: time.Second}
	cfg.RecoveryInterval = 200 * time.Millisecond
	cfg.StaleAfter = 2 * time.Second
	cfg.ReconcileAfter = 0
	cfg.Exclusive = false
	cfg.RecoveryLeaseAtLeastFor = 0
	return cfg
}

func (b *dispatchBundle) dispatcher(engine ports.WorkflowEngine, cfg app.DispatcherConfig, wake ports.Wakeups) *app.Dispatcher {
	if wake == nil {
		wake = noWakeups{}
	}
	return app.NewDispatcher(b.store, b.store, engine, postgres.NewLease(b.pool, uuid.NewString()), wake,
		domain.DefaultTierPolicy(), cfg, app.NewDispatchMetrics(prometheus.NewRegistry()), b.log)
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
		q, _, err := b.store.Enqueue(context.Background(), ports.Enqueue{
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
		e, _, err := b.store.GetExecution(context.Background(), *q.ExecutionID)
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
	if _, err := b.store.FinishExecution(context.Background(), *first.ExecutionID, domain.ExecutionCompleted, nil); err != nil {
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
	urgent, _, err := b.store.Enqueue(context.Background(), ports.Enqueue{
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

func TestRetryReusesTheExecutionIDAndSurvivesAShortOutage(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanPro)
	id := b.enqueue(t, ws, def, 1)[0]
	// Temporal is "down" for the first two attempts, as during an outage
	// shorter than the backoff schedule.
	var calls atomic.Int32
	eng := &countingEngine{WorkflowEngine: b.engine, fail: func(domain.ID) bool { return calls.Add(1) <= 2 }}
	cfg := testConfig()
	d := b.dispatcher(eng, cfg, nil)

	res, err := d.DispatchBatch(context.Background())
	if err != nil || res.Released != 1 {
		t.Fatalf("first try: %+v %v; want released", res, err)
	}
	q := b.item(t, id)
	if q.Status != domain.QueuePending || q.DispatchFailures != 1 || q.AttemptCount != 1 || q.LastError == "" || q.ExecutionID == nil {
		t.Fatalf("after a failed start: %+v", q)
	}
	firstExec := *q.ExecutionID
	if _, _, err := b.store.GetExecution(context.Background(), firstExec); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("the failed try's execution row is still there (%v): it would hold the slot during the backoff", err)
	}
	if !q.AvailableAt.After(time.Now().Add(-time.Second)) {
		t.Fatalf("available_at %s: a failed item must back off", q.AvailableAt)
	}
	// An immediate retry finds nothing claimable: the backoff holds.
	if res, _ := d.DispatchBatch(context.Background()); res.Claimed != 0 {
		t.Fatalf("claimed during backoff: %+v", res)
	}
	eventually(t, 10*time.Second, "the item to be dispatched after the outage", func() bool {
		_, _ = d.DispatchBatch(context.Background())
		return b.item(t, id).Status == domain.QueueDispatched
	})
	q = b.item(t, id)
	if *q.ExecutionID != firstExec {
		t.Fatalf("retry used execution %s, want the kept id %s", *q.ExecutionID, firstExec)
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
	dead := engine.NewEngine(temporalClient(t, "127.0.0.1:1"), engine.NewTaskQueues("dead."))
	cfg := testConfig()
	cfg.BatchSize = 1
	d := b.dispatcher(dead, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.DispatchBatch(ctx); err != nil {
		t.Fatal(err)
	}
	if d.Ready() == nil {
		t.Fatal("Ready() = nil with Temporal unreachable, want the open breaker's error")
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
	claim, err := b.store.Claim(ctx, ports.Fence{}, domain.DefaultTierPolicy().Limits(), func(ws []ports.PendingWorkspace) map[domain.ID]int {
		out := map[domain.ID]int{}
		for _, w := range ws {
			out[w.ID] = 2
		}
		return out
	})
	if err != nil || len(claim.Claimed) != 2 {
		t.Fatalf("claim: %+v %v", claim, err)
	}
	// One of the two did reach Temporal before the crash.
	started := claim.Claimed[0]
	if err := b.engine.StartWorkflow(ctx, ports.WorkflowStart{ExecutionID: started.ExecutionID, WorkspaceID: ws, DefinitionID: def, Version: 1}); err != nil {
		t.Fatal(err)
	}
	d := b.dispatcher(b.engine, cfg, nil)
	if n, err := d.RecoverStale(ctx); err != nil || n != 0 {
		t.Fatalf("fresh claims recovered: %d %v; want none before the threshold", n, err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE workflow_execution_queue SET claimed_at = now() - interval '10 minutes' WHERE status = 'CLAIMED'"); err != nil {
		t.Fatal(err)
	}
	n, err := d.RecoverStale(ctx)
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
	n, err := d.Reconcile(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reconciled %d, %v; want 1", n, err)
	}
	e, _, err := b.store.GetExecution(ctx, *q.ExecutionID)
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
	if ok, err := one.TryAcquire(ctx, app.QueueLeaseName, time.Second); err != nil || !ok {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	if ok, _ := two.TryAcquire(ctx, app.QueueLeaseName, time.Second); ok {
		t.Fatal("a second holder took a held lease")
	}
	if ok, _ := one.TryAcquire(ctx, app.QueueLeaseName, time.Second); !ok {
		t.Fatal("the holder could not extend its lease")
	}
	if err := one.Release(ctx, app.QueueLeaseName, 0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := two.TryAcquire(ctx, app.QueueLeaseName, 200*time.Millisecond); !ok {
		t.Fatal("a released lease could not be taken")
	}
	// lockAtLeastFor keeps it held after release.
	if err := two.Release(ctx, app.QueueLeaseName, time.Hour); err != nil {
		t.Fatal(err)
	}
	if ok, _ := one.TryAcquire(ctx, app.QueueLeaseName, time.Second); ok {
		t.Fatal("lease taken before lockAtLeastFor passed")
	}
	// An expired lease (lockAtMostFor) can be taken over.
	if _, err := b.pool.Exec(ctx, "UPDATE shedlock SET lock_until = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := one.TryAcquire(ctx, app.QueueLeaseName, time.Second); !ok {
		t.Fatal("an expired lease could not be taken over")
	}
}

func TestThreeDispatchersNeverExceedAnyLimit(t *testing.T) {
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	limits := map[domain.ID]int{}
	total := 0
	for _, spec := range []struct {
		plan  domain.Plan
		items int
	}{{domain.PlanFree, 40}, {domain.PlanFree, 40}, {domain.PlanPro, 60}, {domain.PlanPro, 60}, {domain.PlanEnterprise, 100}} {
		ws, def := b.workspace(t, spec.plan)
		limits[ws], _ = domain.DefaultTierPolicy().Limit(spec.plan)
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
				_, _ = b.store.FinishExecution(ctx, id, domain.ExecutionCompleted, nil)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var violations []string
	samples := 0
	eventually(t, 3*time.Minute, "every item to run", func() bool {
		for ws, n := range b.running(t) {
			if n > limits[ws] {
				violations = append(violations, fmt.Sprintf("workspace %s: %d RUNNING > limit %d", ws, n, limits[ws]))
			}
		}
		samples++
		var left int
		_ = b.pool.QueryRow(context.Background(), "SELECT count(*) FROM workflow_execution_queue").Scan(&left)
		return left == 0
	})
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
	b.requireExactStats(t, "after three dispatchers ran concurrently")
}

// statsDrift compares workspace_queue_stats with counts taken from the
// base tables: PENDING items and RUNNING executions per workspace, and the
// plan of every workspace that exists (NULL for one that does not). Every
// workspace must have a row; a row with nothing counted on a workspace that
// is gone is drift too, since the dispatcher forgets those.
func (b *dispatchBundle) statsDrift(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		WITH truth AS (
		    SELECT workspace_id, sum(p)::int AS pending, sum(r)::int AS running
		    FROM (SELECT workspace_id, 1 AS p, 0 AS r FROM workflow_execution_queue WHERE status = 'PENDING'
		          UNION ALL
		          SELECT workspace_id, 0, 1 FROM workflow_executions WHERE status = 'RUNNING') x
		    GROUP BY 1),
		ids AS (SELECT workspace_id FROM workspace_queue_stats UNION SELECT workspace_id FROM truth UNION SELECT id FROM workspaces)
		SELECT i.workspace_id, s.workspace_id IS NOT NULL, coalesce(s.pending, 0), coalesce(t.pending, 0),
		       coalesce(s.running, 0), coalesce(t.running, 0), coalesce(s.plan, '-'), coalesce(w.plan, '-')
		FROM ids i
		LEFT JOIN workspace_queue_stats s ON s.workspace_id = i.workspace_id
		LEFT JOIN truth t ON t.workspace_id = i.workspace_id
		LEFT JOIN workspaces w ON w.id = i.workspace_id
		WHERE (w.id IS NOT NULL AND s.workspace_id IS NULL)
		   OR coalesce(s.pending, 0) <> coalesce(t.pending, 0)
		   OR coalesce(s.running, 0) <> coalesce(t.running, 0)
		   OR (s.workspace_id IS NOT NULL AND s.plan IS DISTINCT FROM w.plan)
		   OR (s.workspace_id IS NOT NULL AND w.id IS NULL AND s.pending = 0 AND s.running = 0 AND t.workspace_id IS NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var drift []string
	for rows.Next() {
		var id domain.ID
		var hasRow bool
		var pending, wantPending, running, wantRunning int
		var plan, wantPlan string
		if err := rows.Scan(&id, &hasRow, &pending, &wantPending, &running, &wantRunning, &plan, &wantPlan); err != nil {
			t.Fatal(err)
		}
		drift = append(drift, fmt.Sprintf("workspace %s: row %v, pending %d (want %d), running %d (want %d), plan %s (want %s)",
			id, hasRow, pending, wantPending, running, wantRunning, plan, wantPlan))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return drift
}

func (b *dispatchBundle) requireExactStats(t *testing.T, step string) {
	t.Helper()
	if drift := b.statsDrift(t); len(drift) > 0 {
		t.Fatalf("%s: workspace_queue_stats differs from the base tables:\n%s", step, strings.Join(drift, "\n"))
	}
}

// claimAll claims every admissible item as a dispatcher that then crashes
// would: the items stay CLAIMED with RUNNING executions.
func (b *dispatchBundle) claimAll(t *testing.T) ports.ClaimResult {
	t.Helper()
	res, err := b.store.Claim(context.Background(), ports.Fence{}, domain.DefaultTierPolicy().Limits(), func(ws []ports.PendingWorkspace) map[domain.ID]int {
		out := map[domain.ID]int{}
		for _, w := range ws {
			limit, _ := domain.DefaultTierPolicy().Limit(w.Plan)
			out[w.ID] = limit - len(w.Running)
		}
		return out
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestQueueStatsStayExactThroughEveryTransition(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	free, freeDef := b.workspace(t, domain.PlanFree)
	pro, proDef := b.workspace(t, domain.PlanPro)
	ent, entDef := b.workspace(t, domain.PlanEnterprise)
	b.requireExactStats(t, "workspaces created")

	freeItems := b.enqueue(t, free, freeDef, 3)
	b.enqueue(t, pro, proDef, 4)
	entItems := b.enqueue(t, ent, entDef, 6)
	b.requireExactStats(t, "enqueue")

	// One batch: claims, executions, DISPATCHED, and one failed start that
	// goes back to PENDING with its execution row dropped.
	var failOnce sync.Once
	var failed domain.ID
	eng := &countingEngine{WorkflowEngine: b.engine, fail: func(id domain.ID) bool {
		hit := false
		failOnce.Do(func() { failed, hit = id, true })
		return hit
	}}
	cfg := testConfig()
	cfg.BatchSize = 50
	d := b.dispatcher(eng, cfg, nil)
	res, err := d.DispatchBatch(ctx)
	if err != nil || res.Released != 1 || res.Dispatched != 10 {
		t.Fatalf("batch = %+v, %v; want 10 dispatched and 1 released", res, err)
	}
	b.requireExactStats(t, "claim, dispatch and a dispatch-failure release")

	// A retry whose earlier execution row is still there (here FAILED) is
	// written by the upsert's UPDATE branch: FAILED back to RUNNING.
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, completed_at)
		SELECT q.execution_id, q.workspace_id, q.workflow_definition_id, 1, 'FAILED', now()
		FROM workflow_execution_queue q WHERE q.execution_id = $1`, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE workflow_execution_queue SET available_at = now() WHERE execution_id = $1", failed); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "a finished execution row left behind")
	if res, err := d.DispatchBatch(ctx); err != nil || res.Dispatched != 1 {
		t.Fatalf("retry batch = %+v, %v; want the released item dispatched", res, err)
	}
	b.requireExactStats(t, "a retry reusing its execution row")

	// Cancel a PENDING item, then a CLAIMED one (its execution goes too).
	if _, err := b.store.CancelQueued(ctx, freeItems[2]); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "cancel of a PENDING item")
	more := b.enqueue(t, ent, entDef, 2)
	if claim := b.claimAll(t); len(claim.Claimed) != 2 {
		t.Fatalf("claimed %d, want the 2 new ENTERPRISE items", len(claim.Claimed))
	}
	if _, err := b.store.CancelQueued(ctx, more[0]); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "cancel of a CLAIMED item")

	// Stale recovery releases the other claimed item, never started.
	if _, err := b.pool.Exec(ctx, "UPDATE workflow_execution_queue SET claimed_at = now() - interval '10 minutes' WHERE status = 'CLAIMED'"); err != nil {
		t.Fatal(err)
	}
	if n, err := d.RecoverStale(ctx); err != nil || n != 1 {
		t.Fatalf("recovered %d, %v; want 1", n, err)
	}
	if q := b.item(t, more[1]); q.Status != domain.QueuePending {
		t.Fatalf("stale item = %s, want PENDING", q.Status)
	}
	b.requireExactStats(t, "stale recovery")

	// Completion in each final status frees the slots.
	for i, status := range []domain.ExecutionStatus{domain.ExecutionCompleted, domain.ExecutionFailed, domain.ExecutionCancelled} {
		q := b.item(t, entItems[i])
		if found, err := b.store.FinishExecution(ctx, *q.ExecutionID, status, nil); err != nil || !found {
			t.Fatalf("finishing %s: %v %v", status, found, err)
		}
	}
	q := b.item(t, freeItems[0])
	if _, err := b.store.FinishExecution(ctx, *q.ExecutionID, domain.ExecutionCompleted, nil); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "completion")

	// A plan change is copied; the upgraded workspace gets its new room.
	if _, err := b.store.UpdateWorkspacePlan(ctx, free, domain.PlanPro); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "plan change")
	if _, err := d.DispatchBatch(ctx); err != nil {
		t.Fatal(err)
	}
	if q := b.item(t, freeItems[1]); q.Status != domain.QueueDispatched {
		t.Fatalf("upgraded workspace's item = %s, want DISPATCHED", q.Status)
	}
	b.requireExactStats(t, "dispatch after the plan change")

	// Deleting a workspace with RUNNING executions and PENDING items: the
	// executions cascade away, the items stay and are counted until the
	// dispatcher fails them, then the row is forgotten.
	orphans := b.enqueue(t, pro, proDef, 7)
	if _, err := b.pool.Exec(ctx, "DELETE FROM workspaces WHERE id = $1", pro); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "workspace deletion")
	if _, err := d.DispatchBatch(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range orphans {
		if q := b.item(t, id); q.Status != domain.QueueFailed {
			t.Fatalf("deleted workspace's item = %s, want FAILED", q.Status)
		}
	}
	b.requireExactStats(t, "failing a deleted workspace's items")
	var left int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM workspace_queue_stats WHERE workspace_id = $1", pro).Scan(&left); err != nil || left != 0 {
		t.Fatalf("deleted workspace's row: %d, %v; want it forgotten", left, err)
	}

	// A workspace deleted with nothing counted on it leaves no row.
	empty, _ := b.workspace(t, domain.PlanFree)
	if _, err := b.pool.Exec(ctx, "DELETE FROM workspaces WHERE id = $1", empty); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "deleting an idle workspace")

	// Bulk writes in one statement, and TRUNCATE.
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id)
		SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN $1::uuid ELSE $2::uuid END, $3 FROM generate_series(1, 50) g`, free, ent, entDef); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "bulk insert")
	if _, err := b.pool.Exec(ctx, "UPDATE workflow_execution_queue SET status = 'CANCELLED' WHERE status = 'PENDING' AND workspace_id = $1", free); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "bulk update")
	if _, err := b.pool.Exec(ctx, "TRUNCATE workflow_execution_queue"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, "TRUNCATE workflow_executions CASCADE"); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "truncate")
}

// TestStatsStayExactUnderConcurrentWrites enqueues from eight callers into
// two workspaces while two dispatchers claim and a completer finishes
// executions, so the same counter rows are written by concurrent
// transactions of every kind; at the end the counts match the base tables.
func TestStatsStayExactUnderConcurrentWrites(t *testing.T) {
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pro, proDef := b.workspace(t, domain.PlanPro)
	ent, entDef := b.workspace(t, domain.PlanEnterprise)
	cfg := testConfig()
	cfg.PollInterval = 10 * time.Millisecond
	var loops sync.WaitGroup
	for range 2 {
		d := b.dispatcher(b.engine, cfg, nil)
		loops.Add(1)
		go func() { defer loops.Done(); d.Run(ctx) }()
	}
	loops.Add(1)
	go func() {
		defer loops.Done()
		for ctx.Err() == nil {
			var ids []domain.ID
			rows, err := b.pool.Query(ctx, "SELECT id FROM workflow_executions WHERE status = 'RUNNING'")
			if err == nil {
				for rows.Next() {
					var id domain.ID
					_ = rows.Scan(&id)
					ids = append(ids, id)
				}
				rows.Close()
			}
			for _, id := range ids {
				_, _ = b.store.FinishExecution(ctx, id, domain.ExecutionCompleted, nil)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	const callers, each = 8, 25
	var enqueuers sync.WaitGroup
	for c := range callers {
		ws, def := pro, proDef
		if c%2 == 1 {
			ws, def = ent, entDef
		}
		enqueuers.Add(1)
		go func() {
			defer enqueuers.Done()
			for range each {
				if _, _, err := b.store.Enqueue(context.Background(), ports.Enqueue{
					ID: domain.ID(uuid.New()), WorkspaceID: ws, DefinitionID: def, Input: json.RawMessage(`{}`), Priority: 2, Actor: domain.Actor{Admin: true},
				}); err != nil {
					t.Errorf("enqueue: %v", err)
					return
				}
			}
		}()
	}
	enqueuers.Wait()
	eventually(t, time.Minute, "every item to run", func() bool {
		var left int
		_ = b.pool.QueryRow(context.Background(), "SELECT count(*) FROM workflow_execution_queue").Scan(&left)
		return left == 0
	})
	cancel()
	loops.Wait()
	b.requireExactStats(t, "after concurrent enqueues, claims and completions")
	var pending, running int
	if err := b.pool.QueryRow(context.Background(), "SELECT coalesce(sum(pending), 0), coalesce(sum(running), 0) FROM workspace_queue_stats").Scan(&pending, &running); err != nil || pending != 0 || running != 0 {
		t.Fatalf("counts left: %d pending, %d running, %v; want none", pending, running, err)
	}
}

// TestStatsMigrationBackfillsExistingRows migrates a database with queue
// items and executions in every state down to before workspace_queue_stats
// and up again: the backfill counts what is there, and the triggers take
// over from it.
func TestStatsMigrationBackfillsExistingRows(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	migrations, err := fs.Sub(db.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDBFromPool(b.pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.DownTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	free, freeDef := b.workspace(t, domain.PlanFree)
	ent, entDef := b.workspace(t, domain.PlanEnterprise)
	idle, _ := b.workspace(t, domain.PlanPro)
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, completed_at)
		VALUES (gen_random_uuid(), $1, $2, 1, 'RUNNING', NULL), (gen_random_uuid(), $3, $4, 1, 'RUNNING', NULL),
		       (gen_random_uuid(), $3, $4, 1, 'COMPLETED', now())`, free, freeDef, ent, entDef); err != nil {
		t.Fatal(err)
	}
	// Two PENDING items behind FREE's busy slot, one PENDING and one
	// CLAIMED in ENTERPRISE, and one of a workspace that does not exist.
	if _, err := b.pool.Exec(ctx, `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, status, claimed_at, execution_id)
		VALUES (gen_random_uuid(), $1, $2, 'PENDING', NULL, NULL), (gen_random_uuid(), $1, $2, 'PENDING', NULL, NULL),
		       (gen_random_uuid(), $3, $4, 'PENDING', NULL, NULL), (gen_random_uuid(), $3, $4, 'CLAIMED', now(), gen_random_uuid()),
		       (gen_random_uuid(), $5, $2, 'PENDING', NULL, NULL)`, free, freeDef, ent, entDef, domain.ID(uuid.New())); err != nil {
		t.Fatal(err)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatal(err)
	}
	b.requireExactStats(t, "backfill")
	var n int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM workspace_queue_stats WHERE workspace_id = $1 AND pending = 0 AND running = 0", idle).Scan(&n); err != nil || n != 1 {
		t.Fatalf("idle workspace's row: %d, %v; want one with nothing counted", n, err)
	}
	d := b.dispatcher(b.engine, testConfig(), nil)
	res, err := d.DispatchBatch(ctx)
	if err != nil || res.Dispatched != 1 || res.Failed != 1 {
		t.Fatalf("batch after the backfill = %+v, %v; want the ENTERPRISE item dispatched and the orphan failed", res, err)
	}
	b.requireExactStats(t, "dispatch after the backfill")
}

// TestWrongCountsNeverOverAdmit shows the counts are only a prefilter: with
// a FREE workspace's RUNNING count wrongly zero, the dispatcher locks it,
// recounts under the lock and admits nothing.
func TestWrongCountsNeverOverAdmit(t *testing.T) {
	b := setupDispatch(t)
	ctx := context.Background()
	ws, def := b.workspace(t, domain.PlanFree)
	b.enqueue(t, ws, def, 3)
	d := b.dispatcher(b.engine, testConfig(), nil)
	if res, err := d.DispatchBatch(ctx); err != nil || res.Dispatched != 1 {
		t.Fatalf("first batch = %+v, %v; want the one slot filled", res, err)
	}
	if _, err := b.pool.Exec(ctx, "UPDATE workspace_queue_stats SET running = 0 WHERE workspace_id = $1", ws); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		res, err := d.DispatchBatch(ctx)
		if err != nil || res.Claimed != 0 {
			t.Fatalf("batch with a wrong count = %+v, %v; want nothing claimed", res, err)
		}
	}
	if got := b.running(t)[ws]; got != 1 {
		t.Fatalf("FREE workspace has %d RUNNING, want exactly 1", got)
	}
}

// TestClaimCountsTheFullWorkspacesItsPrefilterSkips: a full workspace with
// pending work is never locked (the prefilter skips it by its counts), yet
// the claim reports it as refused, by plan, for
// queue_admission_refusals_total.
func TestClaimCountsTheFullWorkspacesItsPrefilterSkips(t *testing.T) {
	b := setupDispatch(t)
	ws, def := b.workspace(t, domain.PlanFree)
	b.enqueue(t, ws, def, 2)
	d := b.dispatcher(b.engine, testConfig(), nil)
	if res, err := d.DispatchBatch(context.Background()); err != nil || res.Dispatched != 1 {
		t.Fatalf("occupying the slot: %+v, %v", res, err)
	}
	res, err := b.store.Claim(context.Background(), ports.Fence{}, domain.DefaultTierPolicy().Limits(), func(ws []ports.PendingWorkspace) map[domain.ID]int {
		for _, w := range ws {
			t.Errorf("workspace %s was locked; the prefilter should have skipped it", w.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Refused[domain.PlanFree] < 1 || res.AtCapacity != 0 {
		t.Errorf("claim = %+v; want the full FREE workspace among the refused, none found full under the lock", res)
	}
}
