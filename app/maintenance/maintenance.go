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
// the lease after it. The job runs only while the lease is this process's,
// in the term it was taken in: it is renewed while the job runs (keep),
// and the job's context is cancelled when it cannot be, so a long job (a
// reconciler walk over many workflows) neither outlives its lease nor
// runs beside the same job in another process. A panicking job is logged
// and the loop goes on.
func (m *maintenance) turn(ctx context.Context) {
	ran := false
	defer func() { m.ran.Send(ran) }()
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("maintenance panicked", "lease", m.name, "panic", fmt.Sprint(r))
		}
	}()
	term, held, err := m.lease.TryAcquire(ctx, m.name, m.schedule.LeaseAtMostFor)
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
	jobCtx, stop := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		m.keep(jobCtx, term, stop)
	}()
	defer func() {
		stop()
		<-kept
	}()
	m.job(jobCtx)
	ran = true
}

// keep renews the job's lease, taken in term, every third of its term
// until ctx ends, and calls lost when the lease is no longer this
// process's in that term (another holder has it, or it lapsed and a
// renewal began a new term), or when renewals have failed until the next
// one would come after the lease may have expired. A renewal that fails
// once is tried again at the next tick.
func (m *maintenance) keep(ctx context.Context, term time.Time, lost context.CancelFunc) {
	every := m.schedule.LeaseAtMostFor / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		got, held, err := m.lease.TryAcquire(ctx, m.name, m.schedule.LeaseAtMostFor)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && held && got.Equal(term):
			renewed = time.Now()
			continue
		case err != nil && time.Since(renewed)+every < m.schedule.LeaseAtMostFor:
			m.log.Warn("renewing a maintenance lease failed; trying again", "lease", m.name, "error", err)
			continue
		}
		m.log.Warn("maintenance lease lost while its job ran; stopping the job", "lease", m.name, "held", held, "error", err)
		m.metrics.Failures.Inc()
		lost()
		return
	}
}
