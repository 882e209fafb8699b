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
