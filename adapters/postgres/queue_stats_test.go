package postgres_test

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/db"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// claimAll claims every item the default tier limits admit, counting the
// RUNNING executions the claim found under its locks, as the dispatcher's
// admission does.
func claimAll(t *testing.T, store *postgres.Store) ports.ClaimResult {
	t.Helper()
	res, err := store.Claim(context.Background(), ports.Fence{}, tierBudget, dispatch.PlanClaim(admitByTier), dispatch.RejectUnrunnable)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// admitByTier gives each locked workspace the free slots its limit, as
// the claim read it, leaves it, whatever the budget (tierBudget, more than
// the tests' free slots).
const tierBudget = 100_000

func admitByTier(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
	out := map[domain.ID]int{}
	for _, w := range ws {
		out[w.ID] = domain.FreeSlots(w.Limit, w.Running)
	}
	return out
}

// dispatchAll marks every claimed item DISPATCHED, as a dispatcher whose
// starts all succeeded does.
func dispatchAll(t *testing.T, store *postgres.Store, items []ports.ClaimedItem) int {
	t.Helper()
	req := make([]ports.DispatchedItem, len(items))
	for i, it := range items {
		req[i] = ports.DispatchedItem{ID: it.ID, ExecutionID: it.ExecutionID}
	}
	recs, err := store.MarkDispatched(context.Background(), ports.Fence{}, req)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// claimAndDispatch claims what the limits admit and marks it DISPATCHED.
func claimAndDispatch(t *testing.T, store *postgres.Store) ports.ClaimResult {
	t.Helper()
	res := claimAll(t, store)
	if n := dispatchAll(t, store, res.Claimed); n != len(res.Claimed) {
		t.Fatalf("marked %d of %d claimed items DISPATCHED", n, len(res.Claimed))
	}
	return res
}

func queueItem(t *testing.T, store *postgres.Store, id domain.ID) domain.QueueItem {
	t.Helper()
	q, err := store.GetQueueItem(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestQueueStatsStayExactThroughEveryTransition(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	free, freeDef := createWorkspace(t, store, domain.PlanFree)
	pro, proDef := createWorkspace(t, store, domain.PlanPro)
	ent, entDef := createWorkspace(t, store, domain.PlanEnterprise)
	pgtest.RequireExactStats(t, pool, "workspaces created")

	freeItems := enqueue(t, store, free, freeDef, 3)
	enqueue(t, store, pro, proDef, 4)
	entItems := enqueue(t, store, ent, entDef, 6)
	pgtest.RequireExactStats(t, pool, "enqueue")

	// One batch: claims, executions, DISPATCHED, and one failed start that
	// goes back to PENDING with its execution row dropped.
	res := claimAll(t, store)
	if len(res.Claimed) != 11 {
		t.Fatalf("claimed %d, want 1 FREE, 4 PRO and 6 ENTERPRISE items", len(res.Claimed))
	}
	pgtest.RequireExactStats(t, pool, "claim")
	var started []ports.ClaimedItem
	var failed ports.ClaimedItem
	for _, c := range res.Claimed {
		if c.ID == entItems[5] {
			failed = c
		} else {
			started = append(started, c)
		}
	}
	if n := dispatchAll(t, store, started); n != 10 {
		t.Fatalf("marked %d DISPATCHED, want 10", n)
	}
	next := failed.QueueState
	if err := next.ReleaseAfterDispatchError("injected start failure", time.Now(), domain.DispatchBackoff{Base: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ids, err := store.ApplyTransitions(ctx, []ports.QueueTransition{{
		ID: failed.ID, FromStatus: failed.Status, FromClaimedAt: failed.ClaimedAt, To: next, DropExecution: &failed.ExecutionID,
	}}); err != nil || len(ids) != 1 {
		t.Fatalf("release: %v, %v", ids, err)
	}
	pgtest.RequireExactStats(t, pool, "dispatch and a dispatch-failure release")

	// The retry, once its backoff has passed, runs under an execution of
	// its own.
	if _, err := pool.Exec(ctx, "UPDATE workflow_execution_queue SET available_at = now() WHERE id = $1", failed.ID); err != nil {
		t.Fatal(err)
	}
	if retry := claimAndDispatch(t, store); len(retry.Claimed) != 1 || retry.Claimed[0].ID != failed.ID || retry.Claimed[0].ExecutionID == failed.ExecutionID {
		t.Fatalf("retry claimed %+v; want the released item under a new execution", retry.Claimed)
	}
	pgtest.RequireExactStats(t, pool, "a retry under a new execution")

	// Cancel a PENDING item, then a CLAIMED one (its execution stays RUNNING
	// until its dispatcher settles it).
	if _, err := cancel(ctx, store, freeItems[2]); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "cancel of a PENDING item")
	more := enqueue(t, store, ent, entDef, 2)
	claim := claimAll(t, store)
	if len(claim.Claimed) != 2 {
		t.Fatalf("claimed %d, want the 2 new ENTERPRISE items", len(claim.Claimed))
	}
	if _, err := cancel(ctx, store, more[0]); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "cancel of a CLAIMED item")
	msg := "cancelled before its workflow started"
	for _, c := range claim.Claimed {
		if c.ID == more[0] {
			if _, err := finish(ctx, store, c.ExecutionID, domain.ExecutionCancelled, &msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	pgtest.RequireExactStats(t, pool, "the cancelled item's execution recorded")

	// Stale recovery releases the other claimed item, never started.
	if _, err := pool.Exec(ctx, "UPDATE workflow_execution_queue SET claimed_at = now() - interval '10 minutes' WHERE status = 'CLAIMED'"); err != nil {
		t.Fatal(err)
	}
	stale, err := store.StaleClaimed(ctx, time.Minute, 10)
	if err != nil || len(stale) != 1 {
		t.Fatalf("stale claims: %d, %v; want 1", len(stale), err)
	}
	recovered := stale[0].QueueState
	if err := recovered.ReleaseUnstarted("not started: its dispatcher stopped"); err != nil {
		t.Fatal(err)
	}
	if ids, err := store.ApplyTransitions(ctx, []ports.QueueTransition{{
		ID: stale[0].ID, FromStatus: stale[0].Status, FromClaimedAt: stale[0].ClaimedAt, To: recovered, DropExecution: stale[0].ExecutionID,
	}}); err != nil || len(ids) != 1 {
		t.Fatalf("recovery: %v, %v", ids, err)
	}
	if q := queueItem(t, store, more[1]); q.Status != domain.QueuePending {
		t.Fatalf("stale item = %s, want PENDING", q.Status)
	}
	pgtest.RequireExactStats(t, pool, "stale recovery")

	// Completion in each final status frees the slots.
	for i, status := range []domain.ExecutionStatus{domain.ExecutionCompleted, domain.ExecutionFailed, domain.ExecutionCancelled} {
		q := queueItem(t, store, entItems[i])
		if found, err := finish(ctx, store, *q.ExecutionID, status, nil); err != nil || !found {
			t.Fatalf("finishing %s: %v %v", status, found, err)
		}
	}
	q := queueItem(t, store, freeItems[0])
	if _, err := finish(ctx, store, *q.ExecutionID, domain.ExecutionCompleted, nil); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "completion")

	// A plan change is copied; the upgraded workspace gets its new room.
	if _, err := store.UpdateWorkspacePlan(ctx, free, domain.PlanPro, nil); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "plan change")
	claimAndDispatch(t, store)
	if q := queueItem(t, store, freeItems[1]); q.Status != domain.QueueDispatched {
		t.Fatalf("upgraded workspace's item = %s, want DISPATCHED", q.Status)
	}
	pgtest.RequireExactStats(t, pool, "dispatch after the plan change")

	// Deleting a workspace with RUNNING executions and PENDING items: the
	// executions cascade away, the items stay and are counted until the
	// claim fails them, then the row is forgotten.
	orphans := enqueue(t, store, pro, proDef, 7)
	if _, err := pool.Exec(ctx, "DELETE FROM workspaces WHERE id = $1", pro); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "workspace deletion")
	if res := claimAndDispatch(t, store); res.Failed != len(orphans) {
		t.Fatalf("claim failed %d items, want the deleted workspace's %d", res.Failed, len(orphans))
	}
	for _, id := range orphans {
		if q := queueItem(t, store, id); q.Status != domain.QueueFailed {
			t.Fatalf("deleted workspace's item = %s, want FAILED", q.Status)
		}
	}
	pgtest.RequireExactStats(t, pool, "failing a deleted workspace's items")
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM workspace_queue_stats WHERE workspace_id = $1", pro).Scan(&left); err != nil || left != 0 {
		t.Fatalf("deleted workspace's row: %d, %v; want it forgotten", left, err)
	}

	// A workspace deleted with nothing counted on it leaves no row.
	empty, _ := createWorkspace(t, store, domain.PlanFree)
	if _, err := pool.Exec(ctx, "DELETE FROM workspaces WHERE id = $1", empty); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "deleting an idle workspace")

	// Bulk writes in one statement, and TRUNCATE.
	if _, err := pool.Exec(ctx, `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id)
		SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN $1::uuid ELSE $2::uuid END, $3 FROM generate_series(1, 50) g`, free, ent, entDef); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "bulk insert")
	if _, err := pool.Exec(ctx, "UPDATE workflow_execution_queue SET status = 'CANCELLED' WHERE status = 'PENDING' AND workspace_id = $1", free); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "bulk update")
	if _, err := pool.Exec(ctx, "TRUNCATE workflow_execution_queue"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "TRUNCATE workflow_executions CASCADE"); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "truncate")
}

// TestStatsStayExactUnderConcurrentWrites enqueues from eight callers into
// two workspaces while two claimers claim and mark DISPATCHED and a
// completer finishes executions, so the same counter rows are written by
// concurrent transactions of every kind; at the end the counts match the
// base tables.
func TestStatsStayExactUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pro, proDef := createWorkspace(t, store, domain.PlanPro)
	ent, entDef := createWorkspace(t, store, domain.PlanEnterprise)
	var loops sync.WaitGroup
	for range 2 {
		loops.Go(func() {
			for ctx.Err() == nil {
				res, err := store.Claim(ctx, ports.Fence{}, tierBudget, dispatch.PlanClaim(admitByTier), dispatch.RejectUnrunnable)
				if err != nil {
					continue
				}
				req := make([]ports.DispatchedItem, len(res.Claimed))
				for i, it := range res.Claimed {
					req[i] = ports.DispatchedItem{ID: it.ID, ExecutionID: it.ExecutionID}
				}
				_, _ = store.MarkDispatched(ctx, ports.Fence{}, req)
				time.Sleep(5 * time.Millisecond) // a dispatcher's poll interval
			}
		})
	}
	loops.Go(func() {
		for ctx.Err() == nil {
			rows, _ := pool.Query(ctx, "SELECT id FROM workflow_executions WHERE status = 'RUNNING'")
			ids, _ := pgx.CollectRows(rows, pgx.RowTo[domain.ID])
			for _, id := range ids {
				_, _ = finish(ctx, store, id, domain.ExecutionCompleted, nil)
			}
			time.Sleep(2 * time.Millisecond) // pacing, not synchronisation
		}
	})
	const callers, each = 8, 25
	var enqueuers sync.WaitGroup
	for c := range callers {
		ws, def := pro, proDef
		if c%2 == 1 {
			ws, def = ent, entDef
		}
		enqueuers.Go(func() {
			for range each {
				if _, _, err := store.Enqueue(context.Background(), ports.ItemToEnqueue{
					ID: domain.ID(uuid.New()), WorkspaceID: ws, DefinitionID: def, Input: []byte(`{}`), Priority: 2, Actor: domain.Actor{Admin: true},
				}); err != nil {
					t.Errorf("enqueue: %v", err)
					return
				}
			}
		})
	}
	enqueuers.Wait()
	porttest.Eventually(t, time.Minute, func() error {
		var left int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM workflow_execution_queue").Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left > 0 {
			return fmt.Errorf("%d items still queued", left)
		}
		return nil
	})
	cancel()
	loops.Wait()
	pgtest.RequireExactStats(t, pool, "after concurrent enqueues, claims and completions")
	var pending, running int
	if err := pool.QueryRow(context.Background(), "SELECT coalesce(sum(pending), 0), coalesce(sum(running), 0) FROM workspace_queue_stats").Scan(&pending, &running); err != nil || pending != 0 || running != 0 {
		t.Fatalf("counts left: %d pending, %d running, %v; want none", pending, running, err)
	}
}

// TestStatsMigrationBackfillsExistingRows migrates a database with queue
// items and executions in every state down to before workspace_queue_stats
// and up again: the backfill counts what is there, and the triggers take
// over from it.
func TestStatsMigrationBackfillsExistingRows(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	migrations, err := fs.Sub(db.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.DownTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	free, freeDef := createWorkspaceAtV1(t, pool, domain.PlanFree)
	ent, entDef := createWorkspaceAtV1(t, pool, domain.PlanEnterprise)
	idle, _ := createWorkspaceAtV1(t, pool, domain.PlanPro)
	if _, err := pool.Exec(ctx, `
		INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, completed_at)
		VALUES (gen_random_uuid(), $1, $2, 1, 'RUNNING', NULL), (gen_random_uuid(), $3, $4, 1, 'RUNNING', NULL),
		       (gen_random_uuid(), $3, $4, 1, 'COMPLETED', now())`, free, freeDef, ent, entDef); err != nil {
		t.Fatal(err)
	}
	// Two PENDING items behind FREE's busy slot, one PENDING and one
	// CLAIMED in ENTERPRISE, and one of a workspace that does not exist.
	if _, err := pool.Exec(ctx, `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, status, claimed_at, execution_id)
		VALUES (gen_random_uuid(), $1, $2, 'PENDING', NULL, NULL), (gen_random_uuid(), $1, $2, 'PENDING', NULL, NULL),
		       (gen_random_uuid(), $3, $4, 'PENDING', NULL, NULL), (gen_random_uuid(), $3, $4, 'CLAIMED', now(), gen_random_uuid()),
		       (gen_random_uuid(), $5, $2, 'PENDING', NULL, NULL)`, free, freeDef, ent, entDef, domain.ID(uuid.New())); err != nil {
		t.Fatal(err)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireExactStats(t, pool, "backfill")
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM workspace_queue_stats WHERE workspace_id = $1 AND pending = 0 AND running = 0", idle).Scan(&n); err != nil || n != 1 {
		t.Fatalf("idle workspace's row: %d, %v; want one with nothing counted", n, err)
	}
	res := claimAndDispatch(t, store)
	if len(res.Claimed) != 1 || res.Claimed[0].WorkspaceID != ent || res.Failed != 1 {
		t.Fatalf("claim after the backfill = %+v; want the ENTERPRISE item claimed and the orphan failed", res)
	}
	pgtest.RequireExactStats(t, pool, "dispatch after the backfill")
}

// createWorkspaceAtV1 makes a workspace with a one-version definition by
// SQL, on the schema of migration 00001: the store's writes read tables
// that later migrations add (a definition's create reads the plan's
// quotas).
func createWorkspaceAtV1(t *testing.T, pool *pgxpool.Pool, plan domain.Plan) (domain.ID, domain.ID) {
	t.Helper()
	ws, def := domain.ID(uuid.New()), domain.ID(uuid.New())
	if _, err := pool.Exec(context.Background(), `
		WITH w AS (INSERT INTO workspaces (id, name, plan) VALUES ($1, 'ws', $3) RETURNING id),
		     d AS (INSERT INTO workflow_definitions (id, workspace_id, name) SELECT $2, id, 'd' FROM w RETURNING id)
		INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph)
		SELECT id, 1, '{"nodes": [], "edges": []}' FROM d`, ws, def, string(plan)); err != nil {
		t.Fatal(err)
	}
	return ws, def
}

// TestWrongCountsNeverOverAdmit shows the counts are only a prefilter: with
// a FREE workspace's RUNNING count wrongly zero, the claim locks it,
// recounts under the lock and admits nothing.
func TestWrongCountsNeverOverAdmit(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	ws, def := createWorkspace(t, store, domain.PlanFree)
	enqueue(t, store, ws, def, 3)
	if res := claimAndDispatch(t, store); len(res.Claimed) != 1 {
		t.Fatalf("first claim = %+v; want the one slot filled", res)
	}
	if _, err := pool.Exec(ctx, "UPDATE workspace_queue_stats SET running = 0 WHERE workspace_id = $1", ws); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if res := claimAll(t, store); len(res.Claimed) != 0 || res.AtCapacity != 1 {
			t.Fatalf("claim with a wrong count = %+v; want the workspace locked, found full, nothing claimed", res)
		}
	}
	var running int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM workflow_executions WHERE workspace_id = $1 AND status = 'RUNNING'", ws).Scan(&running); err != nil || running != 1 {
		t.Fatalf("FREE workspace has %d RUNNING, %v; want exactly 1", running, err)
	}
}

// TestClaimCountsTheFullWorkspacesItsPrefilterSkips: a full workspace with
// pending work is never locked (the prefilter skips it by its counts), yet
// the claim reports it as refused, by plan, for
// queue_admission_refusals_total.
func TestClaimCountsTheFullWorkspacesItsPrefilterSkips(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ws, def := createWorkspace(t, store, domain.PlanFree)
	enqueue(t, store, ws, def, 2)
	if res := claimAndDispatch(t, store); len(res.Claimed) != 1 {
		t.Fatalf("occupying the slot: %+v", res)
	}
	res, err := store.Claim(context.Background(), ports.Fence{}, 10, dispatch.PlanClaim(func(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
		for _, w := range ws {
			t.Errorf("workspace %s was locked; the prefilter should have skipped it", w.ID)
		}
		return nil
	}), dispatch.RejectUnrunnable)
	if err != nil {
		t.Fatal(err)
	}
	if res.Refused[domain.PlanFree] < 1 || res.AtCapacity != 0 {
		t.Errorf("claim = %+v; want the full FREE workspace among the refused, none found full under the lock", res)
	}
}
