package app

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/domain"
)

// expiringRows has backlog rows of every kind and plan past any cutoff,
// and records the cutoffs it was asked for.
type expiringRows struct {
	backlog map[domain.RetainedKind]map[domain.Plan]int
	cutoffs map[domain.Plan]time.Time
	calls   int
}

func (e *expiringRows) DeleteExpired(_ context.Context, kind domain.RetainedKind, plan domain.Plan, before time.Time, limit int) (int, error) {
	e.calls++
	e.cutoffs[plan] = before
	n := min(limit, e.backlog[kind][plan])
	e.backlog[kind][plan] -= n
	return n, nil
}

// RetentionDays is the plans' seeded retention, PRO's edited to 31 days.
func (e *expiringRows) RetentionDays(context.Context) (map[domain.Plan]int, error) {
	return map[domain.Plan]int{domain.PlanFree: 7, domain.PlanPro: 31, domain.PlanEnterprise: 90}, nil
}

func (e *expiringRows) OldestKept(context.Context) (map[domain.RetainedKind]time.Time, error) {
	return map[domain.RetainedKind]time.Time{domain.RetainedExecutions: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}, nil
}

// TestRetentionDeletesInBoundedBatchesPerPlanCutoff: each plan is cut at
// its own period as stored when the run starts (rows of no workspace at
// the longest), a kind stops at
// its first short batch, a run deletes at most MaxBatchesPerRun batches of
// a kind and plan and leaves the rest to the next, and the metrics count
// the rows and the oldest kept.
func TestRetentionDeletesInBoundedBatchesPerPlanCutoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	store := &expiringRows{backlog: map[domain.RetainedKind]map[domain.Plan]int{}, cutoffs: map[domain.Plan]time.Time{}}
	for _, k := range domain.RetainedKinds() {
		store.backlog[k] = map[domain.Plan]int{}
	}
	store.backlog[domain.RetainedExecutions][domain.PlanFree] = 25
	store.backlog[domain.RetainedActivity][domain.PlanPro] = 7
	cfg := DefaultRetentionConfig()
	cfg.BatchSize, cfg.MaxBatchesPerRun, cfg.Now = 5, 3, func() time.Time { return now }
	metrics := NewRetentionMetrics(prometheus.NewRegistry())
	r := NewRetention(store, newFakeLease(), testSchedule(), cfg, metrics, NewLeaseMetrics(prometheus.NewRegistry()), discardLog())

	r.run(context.Background())
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("executions")); got != 15 {
		t.Errorf("deleted %v executions in a run, want 3 batches of 5", got)
	}
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("activity")); got != 7 {
		t.Errorf("deleted %v activity rows, want all 7", got)
	}
	// 5 kinds × 4 plans, one short batch each, plus 2 more full batches of
	// FREE executions and one more of PRO activity.
	if store.calls != 5*4+2+1 {
		t.Errorf("%d statements, want %d", store.calls, 5*4+2+1)
	}
	day := 24 * time.Hour
	for plan, period := range map[domain.Plan]time.Duration{domain.PlanFree: 7 * day, domain.PlanPro: 31 * day, domain.PlanEnterprise: 90 * day, "": 90 * day} {
		if got := store.cutoffs[plan]; !got.Equal(now.Add(-period)) {
			t.Errorf("plan %q cut at %s, want %s", plan, got, now.Add(-period))
		}
	}
	if got := testutil.ToFloat64(metrics.OldestKeptAge.WithLabelValues("executions")); got != (24 * day).Seconds() {
		t.Errorf("oldest kept age %vs, want 24 days", got)
	}
	r.run(context.Background())
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("executions")); got != 25 {
		t.Errorf("deleted %v executions after two runs, want the whole backlog of 25", got)
	}
}
