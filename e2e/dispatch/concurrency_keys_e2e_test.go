package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// keyedWorkspace creates an ENTERPRISE workspace whose own limit is
// maxRunning, with one empty-graph definition keyed on input.k with
// keyLimit.
func (b *dispatchBundle) keyedWorkspace(t *testing.T, maxRunning, keyLimit int) (domain.ID, domain.ID) {
	t.Helper()
	ctx := context.Background()
	w, err := b.store.CreateWorkspace(ctx, domain.Workspace{ID: domain.ID(uuid.New()), Name: "keyed", Plan: domain.PlanEnterprise})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.SetWorkspaceLimits(ctx, domain.WorkspaceLimits{WorkspaceID: w.ID, MaxRunning: &maxRunning}, nil); err != nil {
		t.Fatal(err)
	}
	g := domain.Graph{Nodes: []domain.Node{}, Edges: []domain.Edge{}, Concurrency: &domain.Concurrency{Key: "{{ input.k }}", Limit: keyLimit}}
	d, err := b.store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: w.ID, Name: "keyed", Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return w.ID, d.ID
}

// enqueueKeyed enqueues n items of key through the application's enqueue,
// which resolves the key over the input.
func (b *dispatchBundle) enqueueKeyed(t *testing.T, ws, def domain.ID, key string, n int) {
	t.Helper()
	executions := usecases.NewExecutions(b.store, b.store, b.store, b.store, nil, domain.DefaultProcessQuotas())
	input, _ := json.Marshal(map[string]string{"k": key})
	for range n {
		if _, _, err := executions.Enqueue(context.Background(), domain.Actor{Admin: true}, usecases.EnqueueRequest{
			WorkspaceID: ws, DefinitionID: def, Input: input,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// runningByKey counts RUNNING executions per concurrency key of ws.
func (b *dispatchBundle) runningByKey(ctx context.Context, ws domain.ID) (map[string]int, int, error) {
	rows, err := b.pool.Query(ctx, "SELECT coalesce(concurrency_key, ''), count(*) FROM workflow_executions WHERE status = 'RUNNING' AND workspace_id = $1 GROUP BY 1", ws)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out, total := map[string]int{}, 0
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, 0, err
		}
		out[k], total = n, total+n
	}
	return out, total, rows.Err()
}

// startDispatchers runs n non-exclusive dispatchers, each woken by its own
// listener, until ctx ends.
func (b *dispatchBundle) startDispatchers(ctx context.Context, wg *sync.WaitGroup, engine ports.WorkflowEngine, n int) {
	cfg := testConfig()
	cfg.PollInterval = 20 * time.Millisecond
	for range n {
		l := postgres.NewListener(b.pool, b.log)
		d := b.dispatcher(engine, cfg, l)
		wg.Add(2)
		go func() { defer wg.Done(); l.Run(ctx) }()
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
}

// TestThreeDispatchersHoldEveryKeyLimitWith200Keys: 200 keys in one
// workspace (limit 1 each, 2 items each), the workspace's own limit 50,
// three dispatchers racing in non-exclusive mode while runs complete, and
// a sampler every 50 ms: no sample is over the workspace's limit or any
// key's, and every item runs once.
func TestThreeDispatchersHoldEveryKeyLimitWith200Keys(t *testing.T) {
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const keys, perKey, wsLimit, keyLimit = 200, 2, 50, 1
	ws, def := b.keyedWorkspace(t, wsLimit, keyLimit)
	for k := range keys {
		b.enqueueKeyed(t, ws, def, fmt.Sprintf("customer-%d", k), perKey)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	b.startDispatchers(ctx, &wg, b.engine, 3)
	// Runs complete after 30 ms, as a worker would finish them.
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
	// The sampler: every 50 ms, RUNNING per key and in all.
	var mu sync.Mutex
	var violations []string
	samples, peak := 0, 0
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			byKey, total, err := b.runningByKey(ctx, ws)
			if err != nil {
				continue
			}
			mu.Lock()
			samples++
			peak = max(peak, total)
			if total > wsLimit {
				violations = append(violations, fmt.Sprintf("%d RUNNING > workspace limit %d", total, wsLimit))
			}
			for k, n := range byKey {
				if n > keyLimit {
					violations = append(violations, fmt.Sprintf("key %s: %d RUNNING > key limit %d", k, n, keyLimit))
				}
			}
			mu.Unlock()
		}
	}()
	porttest.Eventually(t, 3*time.Minute, porttest.Holds("every keyed item to run", func() bool {
		var left int
		_ = b.pool.QueryRow(context.Background(), "SELECT count(*) FROM workflow_execution_queue").Scan(&left)
		return left == 0
	}))
	cancel()
	<-sampled
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("%d violations in %d samples, e.g. %s", len(violations), samples, violations[0])
	}
	if samples < 10 {
		t.Fatalf("only %d samples taken", samples)
	}
	var executions, completed int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*), count(*) FILTER (WHERE status = 'COMPLETED') FROM workflow_executions").Scan(&executions, &completed); err != nil {
		t.Fatal(err)
	}
	if executions != keys*perKey || completed != keys*perKey {
		t.Fatalf("%d executions (%d completed) for %d items: want exactly one each", executions, completed, keys*perKey)
	}
	t.Logf("%d keyed items through 3 dispatchers: %d samples every 50 ms, peak %d RUNNING, 0 over the workspace's or any key's limit", keys*perKey, samples, peak)
	pgtest.RequireExactStats(t, b.pool, "after three dispatchers ran keyed items")
}

// TestAFreeKeyIsAdmittedWhileOtherKeysAreFull: 10 keys of one workspace
// are full (limit 1, running) with 50 items each waiting behind them; an
// item of an eleventh key is admitted within a second by three running
// dispatchers: a full key holds back no other key.
func TestAFreeKeyIsAdmittedWhileOtherKeysAreFull(t *testing.T) {
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const fullKeys, waiting = 10, 50
	ws, def := b.keyedWorkspace(t, 100, 1)
	for k := range fullKeys {
		b.enqueueKeyed(t, ws, def, fmt.Sprintf("busy-%d", k), 1+waiting)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	b.startDispatchers(ctx, &wg, b.engine, 3)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("every busy key to be full", func() bool {
		byKey, total, err := b.runningByKey(ctx, ws)
		return err == nil && total == fullKeys && len(byKey) == fullKeys
	}))
	var pending int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1 AND status = 'PENDING'", ws).Scan(&pending); err != nil || pending != fullKeys*waiting {
		t.Fatalf("%d items waiting (%v), want %d behind the full keys", pending, err, fullKeys*waiting)
	}
	// Each waiting item says it waits on its key, with the figure.
	pendingStatus := domain.QueuePending
	page, err := b.store.ListQueue(ctx, ws, &pendingStatus, 100, nil)
	if err != nil || len(page) != 100 {
		t.Fatalf("listing the waiting items: %d, %v", len(page), err)
	}
	waits, err := usecases.NewExecutions(b.store, b.store, b.store, b.store, nil, domain.DefaultProcessQuotas()).WaitingOn(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range page {
		if w := waits[q.ID]; w == nil || w.Reason != domain.WaitKeyLimit || w.Limit != 1 || w.Running != 1 || w.Key != q.ConcurrencyKey {
			t.Fatalf("item of key %s waits on %+v, want its key's limit 1 with 1 running", q.ConcurrencyKey, w)
		}
	}
	start := time.Now()
	b.enqueueKeyed(t, ws, def, "free", 1)
	took := porttest.Eventually(t, time.Second, porttest.Holds("the free key's item to run", func() bool {
		byKey, _, err := b.runningByKey(ctx, ws)
		return err == nil && byKey["free"] == 1
	}))
	byKey, total, err := b.runningByKey(ctx, ws)
	if err != nil || total != fullKeys+1 {
		t.Fatalf("%d RUNNING (%v) after the free key ran, want %d: no full key's item may have been admitted", total, err, fullKeys+1)
	}
	for k, n := range byKey {
		if n != 1 {
			t.Fatalf("key %s has %d RUNNING, want 1", k, n)
		}
	}
	t.Logf("a free key's item ran %v after its enqueue (%v measured by the poll), with %d items waiting on %d full keys", time.Since(start), took, fullKeys*waiting, fullKeys)
}
