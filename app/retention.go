package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// RetentionConfig is what the retention job deletes and how.
type RetentionConfig struct {
	// BatchSize is the rows one statement deletes at most (for executions,
	// with their node records), so no statement holds locks for long.
	BatchSize int
	// MaxBatchesPerRun bounds one run's batches of one kind and plan, so a
	// backlog is worked off over several runs, each leaving the lease on
	// time.
	MaxBatchesPerRun int
	// Now is the clock cutoffs are taken from.
	Now func() time.Time
}

// DefaultRetentionConfig keeps the default periods and deletes 100 rows a
// statement, at most 100 statements per kind and plan a run.
func DefaultRetentionConfig() RetentionConfig {
	return RetentionConfig{BatchSize: 100, MaxBatchesPerRun: 100, Now: time.Now}
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
func NewRetention(store ports.RetentionStore, lease ports.Lease, schedule MaintenanceSchedule, cfg RetentionConfig,
	metrics *RetentionMetrics, leaseMetrics *LeaseMetrics, log *slog.Logger) *Retention {
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

// run deletes each kind, plan by plan (and rows of no workspace), in
// batches until a batch comes back short or the run's batches are spent,
// then records how old the oldest rows kept are.
func (r *Retention) run(ctx context.Context) {
	now := r.cfg.Now()
	// Each run reads the plans' retention, so an edit applies to the next
	// run without a restart.
	policy, ok := r.policy(ctx)
	if !ok {
		return
	}
	plans := append(domain.Plans(), "")
	for _, kind := range domain.RetainedKinds() {
		for _, plan := range plans {
			before := policy.Cutoff(plan, now)
			for range r.cfg.MaxBatchesPerRun {
				n, err := r.store.DeleteExpired(ctx, kind, plan, before, r.cfg.BatchSize)
				if err != nil {
					if ctx.Err() == nil {
						r.log.Error("retention failed", "kind", kind, "plan", plan, "error", err)
					}
					return
				}
				r.metrics.Deleted.WithLabelValues(string(kind)).Add(float64(n))
				if n < r.cfg.BatchSize {
					break
				}
			}
		}
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
