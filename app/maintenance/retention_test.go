package maintenance

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/domain"
)

// expiringRows has backlog rows of every kind and plan past any cutoff,
// and records the cutoffs it was asked for.
type expiringRows struct {
	backlog map[domain.RetainedKind]map[domain.Plan]int
	cutoffs map[domain.Plan]time.Time
	// historyCutoff is the admission limits' history's.
	historyCutoff time.Time
	calls         int
	// tick is what a statement costs the clock.
	tick func()
}

func (e *expiringRows) DeleteExpired(_ context.Context, kind domain.RetainedKind, plan domain.Plan, before time.Time, limit int) (int, error) {
	e.calls++
	e.tick()
	e.cutoffs[plan] = before
	n := min(limit, e.backlog[kind][plan])
	e.backlog[kind][plan] -= n
	return n, nil
}

// DeleteAdmissionLimitsHistory records the cutoff it was asked for.
func (e *expiringRows) DeleteAdmissionLimitsHistory(_ context.Context, before time.Time) (int, error) {
	e.historyCutoff = before
	return 0, nil
}

// RetentionDays is the plans' seeded retention, PRO's edited to 31 days.
func (e *expiringRows) RetentionDays(context.Context) (map[domain.Plan]int, error) {
	return map[domain.Plan]int{domain.PlanFree: 7, domain.PlanPro: 31, domain.PlanEnterprise: 90}, nil
}

func (e *expiringRows) OldestKept(context.Context) (map[domain.RetainedKind]time.Time, error) {
	return map[domain.RetainedKind]time.Time{domain.RetainedExecutions: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}, nil
}

// TestRetentionDeletesInBatchesUntilNothingPastItsPeriodRemains: each
// plan is cut at its own period as stored when the run starts (rows of no
// workspace at the longest), each kind and plan takes a batch in turn
// until it comes back short, so a run clears a backlog of many batches
// (25 rows in batches of 5) rather than leaving it for later runs, the
// admission limits' history is cut at the longest capacity window, and
// the metrics count the rows and the oldest kept.
func TestRetentionDeletesInBatchesUntilNothingPastItsPeriodRemains(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	store := newExpiringRows()
	store.backlog[domain.RetainedExecutions][domain.PlanFree] = 25
	store.backlog[domain.RetainedActivity][domain.PlanPro] = 7
	cfg := DefaultRetentionConfig()
	cfg.Pass.BatchSize, cfg.Now = 5, func() time.Time { return now }
	metrics := NewRetentionMetrics(prometheus.NewRegistry())
	r := NewRetention(store, apptest.NewLease(), testSchedule(), cfg, metrics, dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())

	r.run(context.Background())
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("executions")); got != 25 {
		t.Errorf("deleted %v executions in a run, want the whole backlog of 25", got)
	}
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("activity")); got != 7 {
		t.Errorf("deleted %v activity rows, want all 7", got)
	}
	// 5 kinds × 4 plans, one batch each; then FREE executions' 4 more
	// full batches and the short one, and PRO activity's short one.
	if want := 5*4 + 5 + 1; store.calls != want {
		t.Errorf("%d statements, want %d", store.calls, want)
	}
	day := 24 * time.Hour
	for plan, period := range map[domain.Plan]time.Duration{domain.PlanFree: 7 * day, domain.PlanPro: 31 * day, domain.PlanEnterprise: 90 * day, "": 90 * day} {
		if got := store.cutoffs[plan]; !got.Equal(now.Add(-period)) {
			t.Errorf("plan %q cut at %s, want %s", plan, got, now.Add(-period))
		}
	}
	if got := store.historyCutoff; !got.Equal(now.Add(-time.Hour)) {
		t.Errorf("admission limits' history cut at %s, want an hour ago (%s), the longest capacity window", got, now.Add(-time.Hour))
	}
	if got := testutil.ToFloat64(metrics.OldestKeptAge.WithLabelValues("executions")); got != (24 * day).Seconds() {
		t.Errorf("oldest kept age %vs, want 24 days", got)
	}
}

// TestARetentionRunStopsWhenItsTimeIsSpentAndTheNextGoesOn: with each
// statement taking a second and a pass of 21 seconds, a run makes 21
// statements (every kind and plan once, then one more batch of the
// backlog) and leaves the rest to the next runs, which clear it.
func TestARetentionRunStopsWhenItsTimeIsSpentAndTheNextGoesOn(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	store := newExpiringRows()
	store.tick = func() { clock = clock.Add(time.Second) }
	store.backlog[domain.RetainedExecutions][domain.PlanFree] = 25
	store.backlog[domain.RetainedActivity][domain.PlanPro] = 7
	cfg := DefaultRetentionConfig()
	cfg.Pass = PurgePass{BatchSize: 5, Budget: 21 * time.Second}
	cfg.Now = func() time.Time { return clock }
	metrics := NewRetentionMetrics(prometheus.NewRegistry())
	r := NewRetention(store, apptest.NewLease(), testSchedule(), cfg, metrics, dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())

	r.run(context.Background())
	if store.calls != 21 {
		t.Errorf("%d statements in a 21 s pass of 1 s statements, want 21", store.calls)
	}
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("executions")); got != 10 {
		t.Errorf("deleted %v executions in the first run, want 2 batches of 5", got)
	}
	// Each later run takes every kind and plan once, then two more of the
	// backlog: 10 more executions a run.
	r.run(context.Background())
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("activity")); got != 7 {
		t.Errorf("deleted %v activity rows after two runs, want all 7", got)
	}
	r.run(context.Background())
	if got := testutil.ToFloat64(metrics.Deleted.WithLabelValues("executions")); got != 25 {
		t.Errorf("deleted %v executions after three runs, want the whole backlog of 25", got)
	}
}

func newExpiringRows() *expiringRows {
	e := &expiringRows{backlog: map[domain.RetainedKind]map[domain.Plan]int{}, cutoffs: map[domain.Plan]time.Time{}, tick: func() {}}
	for _, k := range domain.RetainedKinds() {
		e.backlog[k] = map[domain.Plan]int{}
	}
	return e
}
