package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports/porttest"
)

// The head-of-line fixture: holdingWorkspaces workspaces of
// itemsPerHolder PENDING items each, none of which may start now, beside
// which a new ENTERPRISE workspace's newcomerItems items are measured to
// newcomerRunning RUNNING (its plan's limit).
const (
	holdingWorkspaces = 50
	itemsPerHolder    = 200
	newcomerItems     = 40
	newcomerRunning   = 20
)

// seedHeldItems inserts n PENDING items of def into ws in one statement,
// available from notBefore and keyed by key (limit 1) when key is not
// empty: a fixture, as fast as the database inserts rows.
func (b *dispatchBundle) seedHeldItems(t *testing.T, ws, def domain.ID, n int, notBefore string, key string) {
	t.Helper()
	var k *string
	if key != "" {
		k = &key
	}
	if _, err := b.pool.Exec(context.Background(), `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, input, priority, available_at,
		                                      concurrency_key, concurrency_limit)
		SELECT gen_random_uuid(), $1, $2, '{}', 2, now() + $4::interval, $5::text, CASE WHEN $5::text IS NULL THEN NULL ELSE 1 END
		FROM generate_series(1, $3)`, ws, def, n, notBefore, k); err != nil {
		t.Fatal(err)
	}
}

// timeToRunning enqueues newcomerItems items (one bulk enqueue) into a
// new ENTERPRISE workspace and returns how long until newcomerRunning of
// them are RUNNING, and the workspace.
func (b *dispatchBundle) timeToRunning(t *testing.T) (time.Duration, domain.ID) {
	t.Helper()
	ws, def := b.workspace(t, domain.PlanEnterprise)
	began := time.Now()
	b.enqueueBulk(t, ws, def, newcomerItems)
	porttest.Eventually(t, 60*time.Second, porttest.Holds("the newcomer's items to run", func() bool {
		return b.running(t)[ws] >= newcomerRunning
	}))
	took := time.Since(began)
	if n := b.running(t)[ws]; n != newcomerRunning {
		t.Errorf("the newcomer has %d RUNNING, want its limit %d", n, newcomerRunning)
	}
	return took, ws
}

// TestWorkspacesWhoseItemsCannotStartNowTakeNoShareOfTheClaim: 50
// workspaces hold 200 PENDING items each (10,000) that cannot start now,
// delayed by a notBefore 29 days ahead, or all of one concurrency key at
// its limit, or behind a start rate with no start left; two dispatchers
// race with the production poll (5 s). A new ENTERPRISE workspace's 40
// items reach its 20 RUNNING within twice the time they take without the
// 50 workspaces, plus 0.5 s, and none of the held items starts. The claim
// deals its batch only among the workspaces that can start an item now
// and counts a batch full against what could start, so the newcomer does
// not wait for the poll behind workspaces that took its share.
func TestWorkspacesWhoseItemsCannotStartNowTakeNoShareOfTheClaim(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hold creates a holding workspace and seeds its items.
		hold func(t *testing.T, b *dispatchBundle)
	}{
		{"notBefore 29 days ahead", func(t *testing.T, b *dispatchBundle) {
			ws, def := b.workspace(t, domain.PlanFree)
			b.seedHeldItems(t, ws, def, itemsPerHolder, "29 days", "")
		}},
		{"key at its limit", func(t *testing.T, b *dispatchBundle) {
			// PRO (limit 5) has room; its one key (limit 1) runs one.
			ws, def := b.workspace(t, domain.PlanPro)
			if _, err := b.pool.Exec(context.Background(), `
				INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, concurrency_key)
				VALUES (gen_random_uuid(), $1, $2, 1, 'RUNNING', 'held')`, ws, def); err != nil {
				t.Fatal(err)
			}
			b.seedHeldItems(t, ws, def, itemsPerHolder, "0 s", "held")
		}},
		{"start rate with no start left", func(t *testing.T, b *dispatchBundle) {
			// One start a minute, and its bucket's next start 55 s ahead.
			ws, def := b.workspace(t, domain.PlanFree)
			rate := domain.StartRate{Rate: 1, Per: domain.PerMinute, Burst: 1}
			if _, err := b.store.SetWorkspaceLimits(context.Background(), domain.WorkspaceLimits{WorkspaceID: ws, StartRate: &rate}, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := b.pool.Exec(context.Background(), `
				INSERT INTO start_rate_buckets (workspace_id, concurrency_key, tat, next_at)
				VALUES ($1, '', now() + interval '55 s', now() + interval '55 s')`, ws); err != nil {
				t.Fatal(err)
			}
			b.seedHeldItems(t, ws, def, itemsPerHolder, "0 s", "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setupDispatch(t)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			b.startDispatchersPolling(ctx, &wg, 2, dispatch.DefaultDispatcherConfig().PollInterval)

			alone, _ := b.timeToRunning(t)
			for range holdingWorkspaces {
				tc.hold(t, b)
			}
			var heldBefore int
			if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM workflow_executions WHERE status = 'RUNNING'").Scan(&heldBefore); err != nil {
				t.Fatal(err)
			}
			beside, ws := b.timeToRunning(t)
			t.Logf("%s: the newcomer's %d items to %d RUNNING: %s alone, %s beside %d workspaces of %d held items",
				tc.name, newcomerItems, newcomerRunning, alone.Round(time.Millisecond), beside.Round(time.Millisecond),
				holdingWorkspaces, itemsPerHolder)
			if bound := 2*alone + 500*time.Millisecond; beside > bound {
				t.Errorf("beside the held items the newcomer took %s to reach %d RUNNING, want within %s (2 × %s + 0.5 s)",
					beside, newcomerRunning, bound, alone)
			}
			var running int
			if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM workflow_executions WHERE status = 'RUNNING' AND workspace_id <> $1", ws).Scan(&running); err != nil {
				t.Fatal(err)
			}
			if running != heldBefore {
				t.Errorf("%d executions RUNNING outside the newcomer, want the %d there before: a held item started", running, heldBefore)
			}
		})
	}
}
