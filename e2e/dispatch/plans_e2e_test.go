package dispatch

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestALimitChangedThroughTheAPIIsUsedByRunningDispatchers: two running
// dispatchers (non-exclusive, woken by LISTEN/NOTIFY) admit by the PRO
// plan's seeded 5; the admin raises it to 8 and they use it within a
// second, with no restart. Lowered to 3, nothing running is cancelled,
// and once every run ends the dispatchers admit 3, never more, from the
// moment the edit returned. A workspace's own limit then beats its
// plan's the same way, and clearing it returns to the plan's.
func TestALimitChangedThroughTheAPIIsUsedByRunningDispatchers(t *testing.T) {
	s := harness.NewStack(t)
	c := harness.TemporalClient(t, harness.TemporalAddress(t))
	log := harness.TestLog()
	b := &dispatchBundle{pool: s.Pool, store: postgres.NewStore(s.Pool, log), client: c, log: log,
		engine: engine.NewWorkflowClient(c, engine.NewTaskQueues("plans"+uuid.NewString()[:8]+"."), engine.DefaultRunLimits())}
	admin := s.Client(t, harness.AdminToken)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ws, def := b.workspace(t, domain.PlanPro)
	b.enqueue(t, ws, def, 60)
	cfg := testConfig()
	cfg.PollInterval = 5 * time.Second // only a wake-up may make a change show within a second
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 2 {
		l := postgres.NewListener(b.pool, b.log)
		d := b.dispatcher(b.engine, cfg, l)
		wg.Add(2)
		go func() { defer wg.Done(); l.Run(ctx) }()
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	running := func() int { return b.running(t)[ws] }
	porttest.Eventually(t, 10*time.Second, porttest.Holds("the seeded PRO limit of 5 to fill", func() bool { return running() == 5 }))

	setPlan := func(n int) {
		t.Helper()
		r, err := admin.UpdatePlanWithResponse(ctx, client.PRO, client.UpdatePlanJSONRequestBody{MaxRunning: &n})
		if err != nil || r.StatusCode() != http.StatusOK || r.JSON200.MaxRunning != n {
			t.Fatalf("PATCH /plans/PRO %d: %v %d %s", n, err, r.StatusCode(), r.Body)
		}
	}
	setPlan(8)
	took := porttest.Eventually(t, time.Second, porttest.Holds("the raised limit of 8 to be used", func() bool { return running() == 8 }))
	t.Logf("a raised limit was used %v after the API answered", took)

	setPlan(3)
	if n := running(); n != 8 {
		t.Fatalf("%d RUNNING right after lowering the limit, want the 8 that ran: lowering cancels nothing", n)
	}
	// Every run ends at once; from now on the sampler sees at most 3.
	finishAll := func() {
		t.Helper()
		rows, err := b.pool.Query(ctx, "SELECT id FROM workflow_executions WHERE status = 'RUNNING' AND workspace_id = $1", ws)
		if err != nil {
			t.Fatal(err)
		}
		var ids []domain.ID
		for rows.Next() {
			var id domain.ID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			if _, err := b.store.FinishExecution(ctx, id, domain.ExecutionCompleted, nil, queue.AtEnd(domain.ExecutionCompleted, "", log)); err != nil {
				t.Fatal(err)
			}
		}
	}
	over := 0
	sample := func(limit int) func() bool {
		return func() bool {
			n := running()
			if n > limit {
				over++
			}
			return n == limit
		}
	}
	finishAll()
	porttest.Eventually(t, 5*time.Second, porttest.Holds("the lowered limit of 3 to fill", sample(3)))
	if over > 0 {
		t.Fatalf("%d samples over the lowered limit of 3", over)
	}

	// A workspace's own limit replaces its plan's, at once, and clearing
	// it returns to the plan's.
	four := 4
	r, err := admin.SetWorkspaceLimitsWithResponse(ctx, uuid.UUID(ws), client.SetWorkspaceLimitsJSONRequestBody{MaxRunning: &four})
	if err != nil || r.StatusCode() != http.StatusOK || r.JSON200.MaxRunning == nil || *r.JSON200.MaxRunning != 4 {
		t.Fatalf("PUT limits 4: %v %d %s", err, r.StatusCode(), r.Body)
	}
	porttest.Eventually(t, time.Second, porttest.Holds("the workspace's own limit of 4 to be used", func() bool { return running() == 4 }))
	w, err := admin.GetWorkspaceWithResponse(ctx, uuid.UUID(ws))
	if err != nil || w.JSON200 == nil || w.JSON200.Limit != 4 {
		t.Fatalf("the workspace shows limit %v (%v), want its own 4", w.JSON200, err)
	}
	r, err = admin.SetWorkspaceLimitsWithResponse(ctx, uuid.UUID(ws), client.SetWorkspaceLimitsJSONRequestBody{MaxRunning: nil})
	if err != nil || r.StatusCode() != http.StatusOK || r.JSON200.MaxRunning != nil {
		t.Fatalf("PUT limits null: %v %d %s", err, r.StatusCode(), r.Body)
	}
	finishAll()
	porttest.Eventually(t, 5*time.Second, porttest.Holds("the plan's limit of 3 to apply again", sample(3)))
	if over > 0 {
		t.Fatalf("%d samples over the plan's limit of 3 once the workspace's own was cleared", over)
	}
	pgtest.RequireExactStats(t, b.pool, "after limits changed under running dispatchers")
}
