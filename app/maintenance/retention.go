package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// RetentionConfig is what the retention job deletes and how.
type RetentionConfig struct {
	// Pass is a run's batches (for executions, each row with its node
	// records) and the time a run may spend on them.
	Pass PurgePass
	// Now is the clock cutoffs are taken from.
	Now func() time.Time
}

// DefaultRetentionConfig deletes 100 rows a statement (an execution
// brings its node records) for at most the default pass's time a run.
func DefaultRetentionConfig() RetentionConfig {
	pass := DefaultPurgePass()
	pass.BatchSize = 100
	return RetentionConfig{Pass: pass, Now: time.Now}
}

// RetentionMetrics are the retention job's series; the kind label takes
// the few values of domain.RetainedKinds.
type RetentionMetrics struct {
	// Deleted counts the rows retention deleted, by kind (node records go
	// with their executions and are not counted apart).
	Deleted *prometheus.CounterVec
	// OldestKeptAge is the age of the oldest row of each kind still
	// stored, as of the last run: past its plan's period plus a run or two
	// means retention is falling behind.
	OldestKeptAge *prometheus.GaugeVec
}

// NewRetentionMetrics creates the series and registers them with reg.
func NewRetentionMetrics(reg prometheus.Registerer) *RetentionMetrics {
	m := &RetentionMetrics{
		Deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_deleted_rows_total", Help: "Rows retention deleted past their plan's period, by kind (executions include their node records).",
		}, []string{"kind"}),
		OldestKeptAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retention_oldest_kept_age_seconds", Help: "Age of the oldest row of each kind still stored, as of the last retention run.",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.Deleted, m.OldestKeptAge)
	return m
}

// Retention deletes finished executions (with their node records), FAILED
// and CANCELLED queue items, activity rows, replaced definition versions
// and deleted definitions once their workspace's plan's period has passed.
// One process runs it at a time, under the deleteExpiredRows lease.
type Retention struct {
	store   ports.RetentionStore
	cfg     RetentionConfig
	metrics *RetentionMetrics
	log     *slog.Logger
	loop    maintenance
}

// NewRetention builds the retention job.
func NewRetention(store ports.RetentionStore, lease ports.Lease, schedule JobSchedule, cfg RetentionConfig,
	metrics *RetentionMetrics, leaseMetrics *dispatch.LeaseMetrics, log *slog.Logger) *Retention {
	r := &Retention{store: store, cfg: cfg, metrics: metrics, log: log}
	r.loop = maintenance{name: RetentionLeaseName, lease: lease, schedule: schedule, metrics: leaseMetrics, log: log, job: r.run}
	return r
}

// policy reads the plans' retention as stored now; false, logged, when it
// cannot.
func (r *Retention) policy(ctx context.Context) (domain.RetentionPolicy, bool) {
	days, err := r.store.RetentionDays(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("reading the plans' retention failed", "error", err)
		}
		return domain.RetentionPolicy{}, false
	}
	policy, err := domain.NewRetentionPolicy(days)
	if err != nil {
		r.log.Error("a plan's retention is out of range", "error", err)
		return domain.RetentionPolicy{}, false
	}
	return policy, true
}

// Run deletes on the schedule until ctx ends.
func (r *Retention) Run(ctx context.Context) { r.loop.run(ctx) }

// run deletes each kind of each plan (and rows of no workspace), a batch
// of each in turn, until every one has come back short or the pass's time
// is spent, then records how old the oldest rows kept are.
func (r *Retention) run(ctx context.Context) {
	now := r.cfg.Now()
	// Each run reads the plans' retention, so an edit applies to the next
	// run without a restart.
	policy, ok := r.policy(ctx)
	if !ok {
		return
	}
	// The admission limits' history is kept for the longest capacity
	// window only: one statement, before the pass, whatever it finds.
	if _, err := r.store.DeleteAdmissionLimitsHistory(ctx, now.Add(-domain.CapacityReach())); err != nil && ctx.Err() == nil {
		r.log.Error("deleting the admission limits' history failed", "error", err)
	}
	var steps []purgeStep
	for _, kind := range domain.RetainedKinds() {
		for _, plan := range append(domain.Plans(), "") {
			before := policy.Cutoff(plan, now)
			steps = append(steps, func(ctx context.Context, limit int) (int, error) {
				n, err := r.store.DeleteExpired(ctx, kind, plan, before, limit)
				if err != nil && ctx.Err() == nil {
					r.log.Error("retention failed", "kind", kind, "plan", plan, "error", err)
				}
				r.metrics.Deleted.WithLabelValues(string(kind)).Add(float64(n))
				return n, err
			})
		}
	}
	caughtUp, err := r.cfg.Pass.run(ctx, r.cfg.Now, steps)
	if err != nil {
		return
	}
	if !caughtUp {
		r.log.Warn("retention left rows past their period for the next run: its pass's time was spent", "budget", r.cfg.Pass.Budget)
	}
	oldest, err := r.store.OldestKept(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("reading the oldest rows kept failed", "error", err)
		}
		return
	}
	for kind, t := range oldest {
		r.metrics.OldestKeptAge.WithLabelValues(string(kind)).Set(max(0, now.Sub(t).Seconds()))
	}
}
