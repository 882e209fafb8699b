package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// TestTheAdmissionLimitsHistoryKeepsWhatACapacityWindowReads: an edit of
// a floor, a ceiling or the pool's capacity writes a snapshot of every
// plan's in its transaction, an edit of another quota writes none, and
// retention deletes the snapshots set before the one in force an hour
// ago, keeping that one (so a window's first point still reads the
// limits that stood then) and every later one.
func TestTheAdmissionLimitsHistoryKeepsWhatACapacityWindowReads(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()
	rows := func() int {
		t.Helper()
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM admission_limits_history`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	plans := len(domain.Plans())
	if n := rows(); n != plans {
		t.Fatalf("%d snapshot rows at migration, want one per plan (%d)", n, plans)
	}
	if _, err := b.store.UpdatePlan(ctx, domain.PlanPro, domain.PlanChange{Quotas: domain.QuotaOverrides{PendingItems: new(500)}, StartRate: domain.StartRateEdit{Keep: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != plans {
		t.Fatalf("%d snapshot rows after an edit of pendingItems, want still %d", n, plans)
	}
	backdate := func(age string) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, `UPDATE admission_limits_history SET set_at = now() - $1::interval
			WHERE set_at > now() - interval '1 minute'`, age); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.store.UpdatePlan(ctx, domain.PlanPro, domain.PlanChange{Floor: new(1), StartRate: domain.StartRateEdit{Keep: true}}, nil); err != nil {
		t.Fatal(err)
	}
	backdate("3 hours")
	if _, err := b.store.UpdatePool(ctx, new(10), nil); err != nil {
		t.Fatal(err)
	}
	backdate("2 hours")
	if _, err := b.store.UpdatePlan(ctx, domain.PlanEnterprise, domain.PlanChange{MaxRunning: new(25), StartRate: domain.StartRateEdit{Keep: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 4*plans {
		t.Fatalf("%d snapshot rows after three edits of admission limits, want %d", n, 4*plans)
	}

	n, err := b.store.DeleteAdmissionLimitsHistory(ctx, time.Now().Add(-domain.CapacityReach()))
	if err != nil {
		t.Fatal(err)
	}
	// The migration's and the floor edit's go; the pool edit's, in force
	// an hour ago, stays with the ceiling edit's.
	if n != 2*plans || rows() != 2*plans {
		t.Errorf("retention deleted %d rows and kept %d, want %d deleted and %d kept", n, rows(), 2*plans, 2*plans)
	}
	var capacity, floor, ceiling int
	if err := b.pool.QueryRow(ctx, `SELECT pool_capacity, floor, (SELECT max_running FROM admission_limits_at(now() - interval '1 hour') WHERE plan = 'ENTERPRISE')
		FROM admission_limits_at(now() - interval '1 hour') WHERE plan = 'PRO'`).Scan(&capacity, &floor, &ceiling); err != nil {
		t.Fatal(err)
	}
	if capacity != 10 || floor != 1 || ceiling != 20 {
		t.Errorf("an hour ago reads capacity %d, PRO floor %d, ENTERPRISE ceiling %d; want 10, 1 and 20, as they stood", capacity, floor, ceiling)
	}
	if n, err := b.store.DeleteAdmissionLimitsHistory(ctx, time.Now().Add(-domain.CapacityReach())); err != nil || n != 0 {
		t.Errorf("a second retention run deleted %d (%v), want nothing", n, err)
	}
}

// TestTheWorkspaceLimitsHistoryKeepsWhatACapacityWindowReads: a
// workspace's edit that changes its plan, own ceiling or own floor keeps
// the figures it replaced, one row for that workspace in the edit's
// transaction; a workspace created or edited otherwise writes none.
// Retention deletes the rows replaced more than an hour ago, so an hour
// ago still reads what stood then, and a deleted workspace's rows go
// with it.
func TestTheWorkspaceLimitsHistoryKeepsWhatACapacityWindowReads(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()
	rows := func() int {
		t.Helper()
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM workspace_limits_history`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ws, _ := createWorkspace(t, b.store, domain.PlanFree)
	if n := rows(); n != 0 {
		t.Fatalf("%d rows for two workspaces at rest, want none", n)
	}
	set := func(floor int, pendingItems *int) {
		t.Helper()
		if _, err := b.store.SetWorkspaceLimits(ctx, domain.WorkspaceLimits{WorkspaceID: ws, Floor: &floor, Quotas: domain.QuotaOverrides{PendingItems: pendingItems}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	move := func(plan domain.Plan) {
		t.Helper()
		if _, err := b.store.UpdateWorkspacePlan(ctx, ws, plan, nil); err != nil {
			t.Fatal(err)
		}
	}
	backdate := func(age string) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, `UPDATE workspace_limits_history SET replaced_at = now() - $1::interval
			WHERE replaced_at > now() - interval '1 minute'`, age); err != nil {
			t.Fatal(err)
		}
	}
	set(1, nil)
	backdate("3 hours")
	set(1, new(500))
	move(domain.PlanFree)
	if n := rows(); n != 1 {
		t.Fatalf("%d rows after a floor set and edits of pendingItems and of the plan to the same plan, want 1", n)
	}
	move(domain.PlanEnterprise)
	backdate("30 minutes")
	set(3, new(500))
	if n := rows(); n != 3 {
		t.Fatalf("%d rows after three edits of the workspace's floor or plan, want 3", n)
	}

	n, err := b.store.DeleteAdmissionLimitsHistory(ctx, time.Now().Add(-domain.CapacityReach()))
	if err != nil {
		t.Fatal(err)
	}
	// The first floor's row (FREE, no floor of its own until 3 hours ago)
	// goes; the move's, in force an hour ago, stays with the last edit's.
	if n != 1 || rows() != 2 {
		t.Errorf("retention deleted %d rows and kept %d, want 1 deleted and 2 kept", n, rows())
	}
	at := func(age string) (plan string, floor int) {
		t.Helper()
		if err := b.pool.QueryRow(ctx, `SELECT plan, floor FROM workspace_limits_spans
			WHERE workspace_id = $1 AND from_at <= now() - $2::interval AND to_at > now() - $2::interval`, ws, age).Scan(&plan, &floor); err != nil {
			t.Fatal(err)
		}
		return plan, floor
	}
	for _, c := range []struct {
		age, plan string
		floor     int
	}{{"1 hour", "FREE", 1}, {"10 minutes", "ENTERPRISE", 1}, {"-1 minute", "ENTERPRISE", 3}} {
		if plan, floor := at(c.age); plan != c.plan || floor != c.floor {
			t.Errorf("%s ago reads plan %s and floor %d, want %s and %d, as they stood", c.age, plan, floor, c.plan, c.floor)
		}
	}
	if n, err := b.store.DeleteAdmissionLimitsHistory(ctx, time.Now().Add(-domain.CapacityReach())); err != nil || n != 0 {
		t.Errorf("a second retention run deleted %d (%v), want nothing", n, err)
	}
	if _, err := b.pool.Exec(ctx, `DELETE FROM workspaces WHERE id = $1`, ws); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 0 {
		t.Errorf("%d rows after the workspace's delete, want none", n)
	}
}
