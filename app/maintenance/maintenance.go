package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/testsignal"
	"github.com/sluicehq/sluice/ports"
)

// The maintenance jobs' lease names, one per job as ShedLock keeps one lock
// per scheduled task, so that the jobs never wait on each other and only
// one process runs each at a time.
const (
	StaleRecoveryLeaseName    = "recoverStaleQueueItems"
	ReconcilerLeaseName       = "reconcileExecutions"
	CloseWatchLeaseName       = "watchClosedWorkflows"
	IdempotencyPurgeLeaseName = "purgeIdempotencyKeys"
	RetentionLeaseName        = "deleteExpiredRows"
)

// JobSchedule is how often a maintenance job runs and the ShedLock
// terms of its lease. Running a minute late harms no job, so the terms are
// ShedLock's usual ones rather than the queue lease's short heartbeat.
type JobSchedule struct {
	// Interval is the time between runs.
	Interval time.Duration
	// LeaseAtMostFor bounds how long a holder that dies keeps the job away
	// from the others.
	LeaseAtMostFor time.Duration
	// LeaseAtLeastFor keeps the lease after a run, so that processes with
	// skewed schedules do not run the job back to back.
	LeaseAtLeastFor time.Duration
}

// DefaultJobSchedule runs a job every minute under a lease held at
// most two minutes and at least 30 seconds.
func DefaultJobSchedule() JobSchedule {
	return JobSchedule{Interval: time.Minute, LeaseAtMostFor: 2 * time.Minute, LeaseAtLeastFor: 30 * time.Second}
}

// maintenance runs one job on its schedule under its own lease. Each
// maintenance service holds one whose job is the service's run.
type maintenance struct {
	name     string
	lease    ports.Lease
	schedule JobSchedule
	metrics  *dispatch.LeaseMetrics
	log      *slog.Logger
	job      func(ctx context.Context)
	// elsewhere, when set, is called on a turn that did not get the lease:
	// a job clears there the gauges that describe its last run, so that a
	// process the job has moved away from does not keep reporting it.
	elsewhere func()

	// ran is signalled after each turn: true when the job ran, false when
	// the lease was elsewhere or could not be had.
	ran testsignal.Signal[bool]
}

// run runs a turn at once and then every Interval until ctx ends.
func (m *maintenance) run(ctx context.Context) {
	tick := time.NewTicker(m.schedule.Interval)
	defer tick.Stop()
	for {
		m.turn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// turn runs the job once if this process can take its lease, and releases
// the lease after it. A panicking job is logged and the loop goes on.
func (m *maintenance) turn(ctx context.Context) {
	ran := false
	defer func() { m.ran.Send(ran) }()
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("maintenance panicked", "lease", m.name, "panic", fmt.Sprint(r))
		}
	}()
	_, held, err := m.lease.TryAcquire(ctx, m.name, m.schedule.LeaseAtMostFor)
	if err != nil || !held {
		if err != nil && ctx.Err() == nil {
			m.log.Error("acquiring maintenance lease failed", "lease", m.name, "error", err)
		}
		m.metrics.Failures.Inc()
		if m.elsewhere != nil {
			m.elsewhere()
		}
		return
	}
	defer func() {
		if err := m.lease.Release(context.WithoutCancel(ctx), m.name, m.schedule.LeaseAtLeastFor); err != nil {
			m.log.Warn("releasing maintenance lease failed", "lease", m.name, "error", err)
		}
	}()
	m.job(ctx)
	ran = true
}
