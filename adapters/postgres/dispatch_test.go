package postgres_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// seedQueue makes an ENTERPRISE workspace limited to 1,000 running (so a
// claim may take every item seeded) with a definition at version 1 and n
// PENDING items of it, and returns the definition and the items.
func seedQueue(t *testing.T, pool *pgxpool.Pool, n int) (uuid.UUID, []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	ws, def := uuid.New(), uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO workspaces (id, name, plan) VALUES ($1, 'w', 'ENTERPRISE')`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO workspace_limits (workspace_id, max_running) VALUES ($1, 1000)`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_definitions (id, workspace_id, name) VALUES ($1, $2, 'd')`, def, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph) VALUES ($1, 1, '{"nodes":[],"edges":[]}')`, def); err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
		if _, err := pool.Exec(ctx, `INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id) VALUES ($1, $2, $3)`, ids[i], ws, def); err != nil {
			t.Fatal(err)
		}
	}
	return def, ids
}

const allBudget = 100

// admitAll gives each locked workspace 100 items whatever the budget
// (allBudget); the planner's verdicts still hold each workspace's limit.
func admitAll(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
	out := map[domain.ID]int{}
	for _, w := range ws {
		out[w.ID] = 100
	}
	return out
}

func itemState(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) (string, string) {
	t.Helper()
	var status string
	var lastErr *string
	if err := pool.QueryRow(context.Background(), `SELECT status, last_error FROM workflow_execution_queue WHERE id = $1`, id).Scan(&status, &lastErr); err != nil {
		return "GONE", ""
	}
	if lastErr == nil {
		return status, ""
	}
	return status, *lastErr
}

func TestClaimFailsAnItemWhoseVersionIsMissingAndClaimsTheRest(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	_, good := seedQueue(t, pool, 50)
	badDef, bad := seedQueue(t, pool, 1)
	if _, err := pool.Exec(ctx, `DELETE FROM workflow_definition_versions WHERE workflow_definition_id = $1`, badDef); err != nil {
		t.Fatal(err)
	}
	res, err := store.Claim(ctx, ports.Fence{}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable)
	if err != nil {
		t.Fatalf("claim with one item missing its version: %v", err)
	}
	if len(res.Claimed) != 50 || res.Failed != 1 {
		t.Fatalf("claimed %d, failed %d; want the 50 good items claimed in the same batch and the bad item failed", len(res.Claimed), res.Failed)
	}
	if status, lastErr := itemState(t, pool, bad[0]); status != "FAILED" || !strings.Contains(lastErr, "version 1 not found") {
		t.Fatalf("bad item: %s %q, want FAILED naming the missing version", status, lastErr)
	}
	claimed := 0
	for _, id := range good {
		if status, _ := itemState(t, pool, id); status == "CLAIMED" {
			claimed++
		}
	}
	if claimed != 50 {
		t.Fatalf("%d good items CLAIMED, want 50", claimed)
	}
}

// TestClaimRunsARetrysPinnedVersionAndFailsOneWhoseVersionIsGone: with
// version 3 current, an item pinned to version 1 is claimed at version 1
// with version 1's graph, an unpinned item at version 3, and an item
// pinned to a version that no longer exists fails alone, naming it.
func TestClaimRunsARetrysPinnedVersionAndFailsOneWhoseVersionIsGone(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	def, items := seedQueue(t, pool, 3)
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph)
		VALUES ($1, 2, '{"nodes":[{"key":"two","type":"TRANSFORM"}],"edges":[]}'), ($1, 3, '{"nodes":[{"key":"three","type":"TRANSFORM"}],"edges":[]}')`, def); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE workflow_definitions SET current_version = 3 WHERE id = $1`, def); err != nil {
		t.Fatal(err)
	}
	pinned, current, gone := items[0], items[1], items[2]
	if _, err := pool.Exec(ctx, `UPDATE workflow_execution_queue SET pinned_version = CASE id WHEN $1 THEN 1 ELSE 9 END WHERE id IN ($1, $2)`, pinned, gone); err != nil {
		t.Fatal(err)
	}
	res, err := store.Claim(ctx, ports.Fence{}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(res.Claimed) != 2 || res.Failed != 1 {
		t.Fatalf("claimed %d, failed %d; want the pinned and the current item claimed, the one pinned to a gone version failed", len(res.Claimed), res.Failed)
	}
	for _, c := range res.Claimed {
		want, graph := 3, "three"
		if c.ID == domain.ID(pinned) {
			want, graph = 1, `"nodes": []`
		}
		if c.Version != want || !strings.Contains(string(c.Graph), graph) {
			t.Errorf("item %s claimed at version %d with graph %s; want version %d", c.ID, c.Version, c.Graph, want)
		}
		var stored int
		if err := pool.QueryRow(ctx, `SELECT workflow_version FROM workflow_executions WHERE id = $1`, c.ExecutionID).Scan(&stored); err != nil || stored != want {
			t.Errorf("item %s's execution stored at version %d (%v); want %d", c.ID, stored, err, want)
		}
	}
	if status, lastErr := itemState(t, pool, gone); status != "FAILED" || !strings.Contains(lastErr, "version 9, which this retry runs, not found") {
		t.Fatalf("item pinned to a gone version: %s %q, want FAILED naming the version", status, lastErr)
	}
	if status, _ := itemState(t, pool, current); status != "CLAIMED" {
		t.Fatalf("unpinned item: %s, want CLAIMED", status)
	}
}

func TestClaimFailsAnItemWhoseExecutionRowIsRefusedAndClaimsTheRest(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	_, good := seedQueue(t, pool, 5)
	_, bad := seedQueue(t, pool, 1)
	// A row-level refusal the claim cannot foresee: a check the bad item's
	// execution breaks.
	if _, err := pool.Exec(ctx, `ALTER TABLE workflow_executions ADD CONSTRAINT test_refuse CHECK (input IS DISTINCT FROM '{"refuse":true}'::jsonb)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE workflow_execution_queue SET input = '{"refuse":true}' WHERE id = $1`, bad[0]); err != nil {
		t.Fatal(err)
	}
	res, err := store.Claim(ctx, ports.Fence{}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(res.Claimed) != 5 || res.Failed != 1 {
		t.Fatalf("claimed %d, failed %d; want 5 and 1", len(res.Claimed), res.Failed)
	}
	if status, lastErr := itemState(t, pool, bad[0]); status != "FAILED" || !strings.Contains(lastErr, "test_refuse") {
		t.Fatalf("refused item: %s %q, want FAILED with the database's reason", status, lastErr)
	}
	for _, id := range good {
		if status, _ := itemState(t, pool, id); status != "CLAIMED" {
			t.Fatalf("good item %s is %s, want CLAIMED", id, status)
		}
	}
}

func TestClaimIsFencedByTheQueueLease(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	seedQueue(t, pool, 3)
	one, two := postgres.NewLease(pool, "one"), postgres.NewLease(pool, "two")
	if _, ok, err := one.TryAcquire(ctx, "q", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if _, err := store.Claim(ctx, ports.Fence{Lease: "q", Holder: two.Holder()}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable); !errors.Is(err, ports.ErrLeaseLost) {
		t.Fatalf("claim by a non-holder: %v, want ErrLeaseLost", err)
	}
	// The holder's lease runs out while it is paused: it must not claim.
	if _, err := pool.Exec(ctx, `UPDATE shedlock SET lock_until = now() - interval '1 second' WHERE name = 'q'`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, ports.Fence{Lease: "q", Holder: one.Holder()}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable); !errors.Is(err, ports.ErrLeaseLost) {
		t.Fatalf("claim on an expired lease: %v, want ErrLeaseLost", err)
	}
	if _, ok, err := two.TryAcquire(ctx, "q", time.Minute); err != nil || !ok {
		t.Fatalf("takeover: %v %v", ok, err)
	}
	res, err := store.Claim(ctx, ports.Fence{Lease: "q", Holder: two.Holder()}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable)
	if err != nil || len(res.Claimed) != 3 {
		t.Fatalf("claim by the new holder: %d claimed, %v; want 3", len(res.Claimed), err)
	}
}

func TestFinishExecutionEndsTheItemWhenTheExecutionRowIsGone(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	_, ids := seedQueue(t, pool, 2)
	res, err := store.Claim(ctx, ports.Fence{}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable)
	if err != nil || len(res.Claimed) != 2 {
		t.Fatalf("claim: %d, %v", len(res.Claimed), err)
	}
	// One item is DISPATCHED, the other still CLAIMED (its marking was
	// lost); both execution rows are gone.
	first := res.Claimed[0]
	if _, err := store.MarkDispatched(ctx, ports.Fence{}, []ports.DispatchedItem{{ID: first.ID, ExecutionID: first.ExecutionID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM workflow_executions`); err != nil {
		t.Fatal(err)
	}
	msg := "node a failed"
	for _, c := range res.Claimed {
		if _, err := finish(ctx, store, c.ExecutionID, domain.ExecutionFailed, &msg); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if status, lastErr := itemState(t, pool, id); status != "FAILED" || lastErr != msg {
			t.Fatalf("item %s after completion without its execution: %s %q, want FAILED %q", id, status, lastErr, msg)
		}
	}
}

// finish ends an execution as the worker does, ending its queue item by
// app's rule.
func finish(ctx context.Context, store *postgres.Store, id domain.ID, status domain.ExecutionStatus, msg *string, nodes ...domain.NodeRecord) (bool, error) {
	reason := ""
	if msg != nil {
		reason = *msg
	}
	return store.FinishExecution(ctx, id, status, msg, queue.AtEnd(status, reason, quiet()), nodes...)
}

// cancel cancels a queue item as the API does: Cancel applied under the
// item's row lock.
func cancel(ctx context.Context, store *postgres.Store, id domain.ID) (domain.QueueItem, error) {
	return store.UpdateQueueItem(ctx, id, func(q *domain.QueueItem) error { return q.Cancel() })
}

// auditTrail is the item's audit rows in the order they were written:
// "actor action" each.
func auditTrail(t *testing.T, pool *pgxpool.Pool, id domain.ID) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT actor, action FROM activity WHERE subject_id = $1 ORDER BY created_at, action`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var actor, action string
		if err := rows.Scan(&actor, &action); err != nil {
			t.Fatal(err)
		}
		out = append(out, actor+" "+action)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEveryQueueTransitionWritesItsAuditRow(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()

	// One item's whole life: a failed start, a retry, a completed run.
	first := b.claimed(t)
	b.releaseAfterError(t, first.QueueItem, "start failed", time.Now())
	b.elapseBackoff(t, first.ID)
	retry := b.claim(t, 1)[0]
	if n := b.markDispatched(t, retry); n != 1 {
		t.Fatalf("marked %d DISPATCHED, want 1", n)
	}
	if _, err := finish(ctx, b.store, retry.ExecutionID, domain.ExecutionCompleted, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"admin execution.enqueued", "dispatcher queue.claimed", "dispatcher queue.released",
		"dispatcher queue.claimed", "dispatcher queue.dispatched", "workflow queue.completed",
	}
	if got := auditTrail(t, b.pool, first.ID); !slices.Equal(got, want) {
		t.Errorf("audit rows of a completed item:\n got %q\nwant %q", got, want)
	}

	// The other ends: cancelled while PENDING, and a failed run.
	cancelled := b.pending(t)
	if _, err := cancel(ctx, b.store, cancelled); err != nil {
		t.Fatal(err)
	}
	if got, wantCancelled := auditTrail(t, b.pool, cancelled), []string{"admin execution.enqueued", "api queue.cancelled"}; !slices.Equal(got, wantCancelled) {
		t.Errorf("audit rows of a cancelled item: got %q, want %q", got, wantCancelled)
	}
	failed := b.dispatched(t)
	msg := "node a failed"
	if _, err := finish(ctx, b.store, failed.ExecutionID, domain.ExecutionFailed, &msg); err != nil {
		t.Fatal(err)
	}
	want = []string{"admin execution.enqueued", "dispatcher queue.claimed", "dispatcher queue.dispatched", "workflow queue.failed"}
	if got := auditTrail(t, b.pool, failed.ID); !slices.Equal(got, want) {
		t.Errorf("audit rows of a failed item:\n got %q\nwant %q", got, want)
	}
	var details map[string]any
	if err := b.pool.QueryRow(ctx, `SELECT details FROM activity WHERE subject_id = $1 AND action = 'queue.failed'`, failed.ID).Scan(&details); err != nil {
		t.Fatal(err)
	}
	if details["from"] != "DISPATCHED" || details["executionId"] != failed.ExecutionID.String() || details["lastError"] != msg {
		t.Errorf("queue.failed details = %v, want from DISPATCHED, the execution id and the error", details)
	}
}

func TestMissingReferencesAndOrphanCompletionsAreLogged(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var logs porttest.JSONLog
	store := postgres.NewStore(pool, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx := context.Background()
	goneDef, goneDefItems := seedQueue(t, pool, 1)
	if _, err := pool.Exec(ctx, `UPDATE workflow_definitions SET deleted_at = now() WHERE id = $1`, goneDef); err != nil {
		t.Fatal(err)
	}
	otherDef, _ := seedQueue(t, pool, 1)
	var goneWS uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT workspace_id FROM workflow_definitions WHERE id = $1`, otherDef).Scan(&goneWS); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM workspaces WHERE id = $1`, goneWS); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, ports.Fence{}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable); err != nil {
		t.Fatal(err)
	}
	if recs := logs.Records(t, "definition not found; failing the queue item"); len(recs) != 1 ||
		recs[0]["level"] != "WARN" || recs[0]["queue_item_id"] != goneDefItems[0].String() || recs[0]["workflow_definition_id"] != goneDef.String() {
		t.Errorf("definition not found logged as %v, want one WARN naming the item and its definition", recs)
	}
	if recs := logs.Records(t, "workspace not found; failing its pending queue items"); len(recs) != 1 ||
		recs[0]["level"] != "WARN" || recs[0]["workspace_id"] != goneWS.String() {
		t.Errorf("workspace not found logged as %v, want one WARN naming the workspace", recs)
	}

	orphan := domain.ID(uuid.New())
	if _, err := finish(ctx, store, orphan, domain.ExecutionCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if recs := logs.Records(t, "completion found no queue item"); len(recs) != 1 ||
		recs[0]["level"] != "WARN" || recs[0]["execution_id"] != orphan.String() {
		t.Errorf("an orphan completion logged as %v, want one WARN naming the execution", recs)
	}
}

func TestClaimsRecordTheirTermAndAnEndedTermCanNeitherMarkNorHideThem(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	seedQueue(t, pool, 2)
	one, two := postgres.NewLease(pool, "one"), postgres.NewLease(pool, "two")
	if _, ok, err := one.TryAcquire(ctx, "q", time.Minute); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	res, err := store.Claim(ctx, ports.Fence{Lease: "q", Holder: one.Holder()}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable)
	if err != nil || len(res.Claimed) != 2 {
		t.Fatalf("claim: %d claimed, %v; want 2", len(res.Claimed), err)
	}
	var lockedAt time.Time
	if err := pool.QueryRow(ctx, `SELECT locked_at FROM shedlock WHERE name = 'q'`).Scan(&lockedAt); err != nil {
		t.Fatal(err)
	}
	claimer := res.Claimed[0].Claimer
	if want := (ports.Fence{Lease: "q", Holder: one.Holder(), Term: lockedAt}); !claimer.Term.Equal(lockedAt) || claimer.Lease != want.Lease || claimer.Holder != want.Holder {
		t.Fatalf("claimed by %+v, want %+v", claimer, want)
	}
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue WHERE claim_lease = 'q' AND claimed_by = 'one' AND claim_term = $1`, lockedAt).Scan(&stored); err != nil || stored != 2 {
		t.Fatalf("%d items store their claimer, %v; want 2", stored, err)
	}
	mark := func(c ports.ClaimedItem) ([]ports.DispatchedRecord, error) {
		return store.MarkDispatched(ctx, c.Claimer, []ports.DispatchedItem{{ID: c.ID, ExecutionID: c.ExecutionID}})
	}

	// A renewal keeps the term: the claims are live and markable.
	if _, ok, err := one.TryAcquire(ctx, "q", time.Minute); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	if ended, err := store.ClaimsOfEndedTerms(ctx, 10); err != nil || len(ended) != 0 {
		t.Fatalf("ended terms' claims while the term is live: %d, %v; want none", len(ended), err)
	}
	if recs, err := mark(res.Claimed[0]); err != nil || len(recs) != 1 {
		t.Fatalf("mark within the term: %d, %v; want 1", len(recs), err)
	}

	// The term ends (the holder paused past it) and another takes over:
	// the claim left is the new holder's to settle, and the old holder's
	// late mark is refused.
	expire := func() {
		if _, err := pool.Exec(ctx, `UPDATE shedlock SET lock_until = now() - interval '1 second' WHERE name = 'q'`); err != nil {
			t.Fatal(err)
		}
	}
	expire()
	if _, ok, err := two.TryAcquire(ctx, "q", time.Minute); err != nil || !ok {
		t.Fatalf("takeover: %v %v", ok, err)
	}
	ended, err := store.ClaimsOfEndedTerms(ctx, 10)
	if err != nil || len(ended) != 1 || ended[0].ID != res.Claimed[1].ID || ended[0].Status != domain.QueueClaimed {
		t.Fatalf("ended terms' claims after the takeover: %+v, %v; want the one item still CLAIMED", ended, err)
	}
	if _, err := mark(res.Claimed[1]); !errors.Is(err, ports.ErrLeaseLost) {
		t.Fatalf("late mark after the takeover: %v, want ErrLeaseLost", err)
	}
	// The old holder taking the lease back begins a new term: its old
	// term's marks stay refused, and the claim stays to be settled.
	expire()
	if _, ok, err := one.TryAcquire(ctx, "q", time.Minute); err != nil || !ok {
		t.Fatalf("taking it back: %v %v", ok, err)
	}
	if _, err := mark(res.Claimed[1]); !errors.Is(err, ports.ErrLeaseLost) {
		t.Fatalf("mark of an earlier term by the same holder: %v, want ErrLeaseLost", err)
	}
	if status, _ := itemState(t, pool, uuid.UUID(res.Claimed[1].ID)); status != "CLAIMED" {
		t.Fatalf("item %s after the refused marks, want CLAIMED", status)
	}
	if ended, err := store.ClaimsOfEndedTerms(ctx, 10); err != nil || len(ended) != 1 {
		t.Fatalf("ended terms' claims after the same holder's new term: %d, %v; want 1", len(ended), err)
	}
	// The settler's unfenced mark goes through.
	if recs, err := store.MarkDispatched(ctx, ports.Fence{}, []ports.DispatchedItem{{ID: res.Claimed[1].ID, ExecutionID: res.Claimed[1].ExecutionID}}); err != nil || len(recs) != 1 {
		t.Fatalf("settling mark: %d, %v; want 1", len(recs), err)
	}
	// Expired leases with the prefix are forgotten; live ones and others
	// stay.
	if _, err := pool.Exec(ctx, `INSERT INTO shedlock (name, lock_until, locked_at, locked_by) VALUES
		('reg-gone', now() - interval '1 second', now() - interval '1 minute', 'x'),
		('reg-live', now() + interval '1 minute', now(), 'y')`); err != nil {
		t.Fatal(err)
	}
	expire()
	if n, err := store.ForgetExpiredLeases(ctx, "reg-"); err != nil || n != 1 {
		t.Fatalf("forgot %d expired leases, %v; want the one with the prefix", n, err)
	}
	rows, err := pool.Query(ctx, `SELECT name FROM shedlock ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	if names, err := pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || !slices.Equal(names, []string{"q", "reg-live"}) {
		t.Fatalf("leases left %v, %v; want q (expired, another prefix) and reg-live", names, err)
	}
	// An unfenced claim has no claimer, so no term of its ends: it is
	// stale recovery's alone.
	seedQueue(t, pool, 1)
	if res, err := store.Claim(ctx, ports.Fence{}, allBudget, dispatch.PlanClaim(admitAll), dispatch.RejectUnrunnable); err != nil || len(res.Claimed) != 1 || res.Claimed[0].Claimer.Fenced() {
		t.Fatalf("unfenced claim: %+v, %v; want 1 item with no claimer", res.Claimed, err)
	}
	if ended, err := store.ClaimsOfEndedTerms(ctx, 10); err != nil || len(ended) != 0 {
		t.Fatalf("ended terms' claims with only an unfenced claim CLAIMED: %d, %v; want none", len(ended), err)
	}
}
