package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// TestAdmissionWaitCountsFromTheSlotItsWorkspaceFreed: an item that waited
// ten minutes behind its own FREE workspace's one running execution waited
// while admissible only from the moment that execution ended, so its
// admission wait is short; an item that waited as long in an ENTERPRISE
// workspace that was never full waited all that time while admissible.
// The wait stored on the execution is what the marking returns and what
// AdmissionWaits reads.
func TestAdmissionWaitCountsFromTheSlotItsWorkspaceFreed(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	const waited = 10 * time.Minute

	// start claims and marks what the limits admit, the item given having
	// been enqueued (and due) waited ago, after the executions running
	// in its workspace end.
	start := func(ws domain.ID, item domain.ID) ports.DispatchedRecord {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE workflow_execution_queue SET created_at = now() - $2::interval, available_at = now() - $2::interval WHERE id = $1`, item, waited); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE workflow_executions SET status = 'COMPLETED', completed_at = now(), duration_ms = 1 WHERE workspace_id = $1 AND status = 'RUNNING'`, ws); err != nil {
			t.Fatal(err)
		}
		res := claimAll(t, store)
		if len(res.Claimed) != 1 || res.Claimed[0].ID != item {
			t.Fatalf("claim = %+v; want the one item %s", res.Claimed, item)
		}
		recs, err := store.MarkDispatched(ctx, ports.Fence{}, []ports.DispatchedItem{{ID: item, ExecutionID: res.Claimed[0].ExecutionID}})
		if err != nil || len(recs) != 1 || recs[0].AdmissionWait == nil {
			t.Fatalf("marking %s: %+v, %v; want one record with its admission wait", item, recs, err)
		}
		exec := res.Claimed[0].ExecutionID
		read, err := store.AdmissionWaits(ctx, []domain.ID{exec})
		if err != nil || len(read) != 1 || read[exec].Wait != *recs[0].AdmissionWait || read[exec].Plan != recs[0].Plan {
			t.Fatalf("AdmissionWaits(%s) = %+v, %v; want the marking's record %+v", exec, read, err, recs[0])
		}
		return recs[0]
	}

	for _, c := range []struct {
		plan    domain.Plan
		full    bool
		atLeast time.Duration
		under   time.Duration
	}{
		{domain.PlanFree, true, 0, time.Minute},
		{domain.PlanEnterprise, false, waited, 2 * waited},
	} {
		ws, def := createWorkspace(t, store, c.plan)
		first := enqueue(t, store, ws, def, 1)[0]
		if rec := start(ws, first); *rec.AdmissionWait < waited || rec.Plan != c.plan {
			t.Errorf("%s: the first item, its workspace empty: wait %v, plan %q; want at least %v (nothing held it), plan %s", c.plan, *rec.AdmissionWait, rec.Plan, waited, c.plan)
		}
		second := enqueue(t, store, ws, def, 1)[0]
		rec := start(ws, second)
		if *rec.AdmissionWait < c.atLeast || *rec.AdmissionWait >= c.under {
			t.Errorf("%s (full before the slot freed: %v): admission wait %v; want in [%v, %v)", c.plan, c.full, *rec.AdmissionWait, c.atLeast, c.under)
		}
	}
}

// TestARunAdmittedBeforeItsMarkingStoresItsAdmissionWait: when the run's
// own admission (AdmitRun) records the start before the dispatcher's
// marking, the wait is stored on the execution by the same definition,
// and AdmissionWaits reads it for the marking that then finds nothing to
// move.
func TestARunAdmittedBeforeItsMarkingStoresItsAdmissionWait(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	ws, def := createWorkspace(t, store, domain.PlanPro)
	item := enqueue(t, store, ws, def, 1)[0]
	if _, err := pool.Exec(ctx, `UPDATE workflow_execution_queue SET created_at = now() - interval '3 seconds', available_at = now() - interval '3 seconds' WHERE id = $1`, item); err != nil {
		t.Fatal(err)
	}
	res := claimAll(t, store)
	if len(res.Claimed) != 1 {
		t.Fatalf("claim = %+v; want the item", res.Claimed)
	}
	exec := res.Claimed[0].ExecutionID
	if admission, err := store.AdmitRun(ctx, exec); err != nil || admission != ports.AdmissionGranted {
		t.Fatalf("AdmitRun = %v, %v; want granted", admission, err)
	}
	waits, err := store.AdmissionWaits(ctx, []domain.ID{exec})
	if err != nil || waits[exec].Plan != domain.PlanPro || waits[exec].Wait < 3*time.Second || waits[exec].Wait > time.Minute {
		t.Fatalf("AdmissionWaits after AdmitRun = %+v, %v; want PRO's wait of 3 s or a little more", waits, err)
	}
	if recs, err := store.MarkDispatched(ctx, ports.Fence{}, []ports.DispatchedItem{{ID: item, ExecutionID: exec}}); err != nil || len(recs) != 0 {
		t.Fatalf("marking after AdmitRun = %+v, %v; want nothing left to move", recs, err)
	}
}

// TestAdmissionWaitKeepsTheSlotFreedBeforeItsClaim: a PRO workspace full
// at its 5 runs frees a slot, an item that waited ten minutes behind them
// is claimed into it, and another run ends (the workspace full again)
// before the item's start is recorded. The item waited while admissible
// only from the first slot: the one freed after its claim, which moves
// the workspace's full_until past the claim, must not make it count from
// its enqueue.
func TestAdmissionWaitKeepsTheSlotFreedBeforeItsClaim(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	ws, def := createWorkspace(t, store, domain.PlanPro)
	enqueue(t, store, ws, def, 5)
	if res := claimAndDispatch(t, store); len(res.Claimed) != 5 {
		t.Fatalf("filling the workspace: %d claimed, want 5", len(res.Claimed))
	}
	item := enqueue(t, store, ws, def, 1)[0]
	if _, err := pool.Exec(ctx, `UPDATE workflow_execution_queue SET created_at = now() - interval '10 minutes', available_at = now() - interval '10 minutes' WHERE id = $1`, item); err != nil {
		t.Fatal(err)
	}
	endOne := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE workflow_executions SET status = 'COMPLETED', completed_at = now(), duration_ms = 1
			WHERE id = (SELECT id FROM workflow_executions WHERE workspace_id = $1 AND status = 'RUNNING' ORDER BY started_at LIMIT 1)`, ws); err != nil {
			t.Fatal(err)
		}
	}
	endOne()
	res := claimAll(t, store)
	if len(res.Claimed) != 1 || res.Claimed[0].ID != item {
		t.Fatalf("claim = %+v; want the waiting item", res.Claimed)
	}
	endOne()
	recs, err := store.MarkDispatched(ctx, ports.Fence{}, []ports.DispatchedItem{{ID: item, ExecutionID: res.Claimed[0].ExecutionID}})
	if err != nil || len(recs) != 1 || recs[0].AdmissionWait == nil {
		t.Fatalf("marking: %+v, %v", recs, err)
	}
	if w := *recs[0].AdmissionWait; w >= time.Minute {
		t.Errorf("admission wait %v; want it counted from the slot freed before the claim, not from the enqueue ten minutes ago", w)
	}
}

// TestAdmissionWaitCountsFromWhenItsOwnStartRateLetItGo: two ENTERPRISE
// workspaces, never full, each with a start rate of its own of one a
// minute with a burst of two, each with an item enqueued ten minutes ago.
// The first's bucket was left 30 s ahead of now by its last starts, so
// its rate let the item go only 30 s ago (its TAT less its tolerance of
// a minute): the item waited for its own tenant's limit until then, and
// its admission wait is about 30 s. The second's bucket is at rest (no
// row): nothing held its item, which waited all ten minutes.
func TestAdmissionWaitCountsFromWhenItsOwnStartRateLetItGo(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	rate := domain.StartRate{Rate: 1, Per: domain.PerMinute, Burst: 2}
	for _, c := range []struct {
		name         string
		bucket       bool
		atLeast, max time.Duration
	}{
		{"held by its rate until 30 s ago", true, 30 * time.Second, 40 * time.Second},
		{"its bucket at rest", false, 10 * time.Minute, 11 * time.Minute},
	} {
		ws, def := createWorkspace(t, store, domain.PlanEnterprise)
		if _, err := store.SetWorkspaceLimits(ctx, domain.WorkspaceLimits{WorkspaceID: ws, StartRate: &rate}, nil); err != nil {
			t.Fatal(err)
		}
		if c.bucket {
			if _, err := pool.Exec(ctx, `INSERT INTO start_rate_buckets (workspace_id, concurrency_key, tat, next_at)
				VALUES ($1, '', now() + interval '30 seconds', now() - interval '30 seconds')`, ws); err != nil {
				t.Fatal(err)
			}
		}
		item := enqueue(t, store, ws, def, 1)[0]
		if _, err := pool.Exec(ctx, `UPDATE workflow_execution_queue SET created_at = now() - interval '10 minutes', available_at = now() - interval '10 minutes' WHERE id = $1`, item); err != nil {
			t.Fatal(err)
		}
		res := claimAll(t, store)
		if len(res.Claimed) != 1 || res.Claimed[0].ID != item {
			t.Fatalf("%s: claim = %+v; want the item", c.name, res.Claimed)
		}
		recs, err := store.MarkDispatched(ctx, ports.Fence{}, []ports.DispatchedItem{{ID: item, ExecutionID: res.Claimed[0].ExecutionID}})
		if err != nil || len(recs) != 1 || recs[0].AdmissionWait == nil {
			t.Fatalf("%s: marking: %+v, %v", c.name, recs, err)
		}
		if w := *recs[0].AdmissionWait; w < c.atLeast || w >= c.max {
			t.Errorf("%s: admission wait %v; want in [%v, %v)", c.name, w, c.atLeast, c.max)
		}
	}
}
