package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// ScheduleFiringLeaseName names the schedule firing job's lease.
const ScheduleFiringLeaseName = "fireSchedules"

// ScheduleFiringConfig is how the dispatcher fires schedules.
type ScheduleFiringConfig struct {
	// Schedule is how often the job runs and its lease's terms. A turn
	// fires every due tick, so ticks fire up to Interval late; a holder
	// that dies mid-turn keeps the others away for LeaseAtMostFor.
	Schedule JobSchedule
	// CatchUp is how late a tick may fire on its own: ticks overdue by
	// more were missed (no dispatcher ran, or the schedule was paused) and
	// fire once, as the latest of them. It should exceed LeaseAtMostFor,
	// so that a failover loses no tick.
	CatchUp time.Duration
	// MaxPerTurn bounds the ticks one turn fires, so a turn ends within
	// its lease; the next turn goes on.
	MaxPerTurn int
}

// DefaultScheduleFiringConfig fires every second under a lease held at
// most 15 s, and fires each tick overdue by up to a minute.
func DefaultScheduleFiringConfig() ScheduleFiringConfig {
	return ScheduleFiringConfig{
		Schedule:   JobSchedule{Interval: time.Second, LeaseAtMostFor: 15 * time.Second},
		CatchUp:    time.Minute,
		MaxPerTurn: 1000,
	}
}

// ScheduleFiring is the dispatcher's job that fires due schedules: one
// process at a time under the fireSchedules lease, and exactly once per
// tick whatever happens to it, because each tick's item is written in the
// transaction that advances its schedule (ports.ScheduleStore.
// FireDueSchedule), under the schedule's row lock, with a unique
// (schedule_id, schedule_tick) on the queue behind it.
type ScheduleFiring struct {
	store  ports.ScheduleStore
	parser ports.TimetableParser
	cfg    ScheduleFiringConfig
	log    *slog.Logger
	loop   maintenance
	// failing holds the schedules whose last tick failed, each passed over
	// until its back-off ends, so one tenant's failing schedule (its tick
	// keeps erring, say on a definition its enqueue cannot read) cannot
	// hold the oldest-due place and stop every other tenant's schedules.
	// Only the job's goroutine touches it; a new lease holder starts
	// without it and learns again at the cost of one failed tick each.
	failing map[domain.ID]scheduleBackOff
	now     func() time.Time
}

// scheduleBackOff is how long a failing schedule is passed over.
type scheduleBackOff struct {
	until time.Time
	wait  time.Duration
}

// Back-off of a failing schedule: the first retry after
// firstScheduleRetry, doubling up to maxScheduleRetry.
const (
	firstScheduleRetry = time.Second
	maxScheduleRetry   = 5 * time.Minute
)

// NewScheduleFiring builds the job.
func NewScheduleFiring(store ports.ScheduleStore, parser ports.TimetableParser, lease ports.Lease,
	cfg ScheduleFiringConfig, leaseMetrics *dispatch.LeaseMetrics, log *slog.Logger) *ScheduleFiring {
	f := &ScheduleFiring{store: store, parser: parser, cfg: cfg, log: log, failing: map[domain.ID]scheduleBackOff{}, now: time.Now}
	f.loop = maintenance{name: ScheduleFiringLeaseName, lease: lease, schedule: cfg.Schedule, metrics: leaseMetrics, log: log, job: f.fireDue}
	return f
}

// Run fires due schedules on the job's schedule until ctx ends.
func (f *ScheduleFiring) Run(ctx context.Context) { f.loop.run(ctx) }

// fireDue fires due ticks, one transaction each, until none is due or the
// turn's bound is reached. A tick that fails on its own schedule (the
// error comes after decide saw it) backs that schedule off and the turn
// goes on with the others; an error before any schedule was read (the
// database) ends the turn.
func (f *ScheduleFiring) fireDue(ctx context.Context) {
	for range f.cfg.MaxPerTurn {
		var current *domain.ID
		fired, err := f.store.FireDueSchedule(ctx, f.passedOver(), func(d ports.DueSchedule) (ports.TickPlan, error) {
			current = &d.Schedule.ID
			return f.decide(d)
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if current == nil {
				f.log.Error("firing a schedule failed", "error", err)
				return
			}
			f.backOff(*current, err)
			continue
		}
		if !fired {
			return
		}
		if current != nil {
			delete(f.failing, *current)
		}
	}
}

// passedOver is the failing schedules still backing off, forgetting those
// whose back-off ended long ago (a schedule deleted while failing).
func (f *ScheduleFiring) passedOver() []domain.ID {
	now := f.now()
	var skip []domain.ID
	for id, b := range f.failing {
		switch {
		case now.Before(b.until):
			skip = append(skip, id)
		case now.Sub(b.until) > 2*maxScheduleRetry:
			delete(f.failing, id)
		}
	}
	return skip
}

// backOff passes schedule id over for twice its last wait (the first time
// firstScheduleRetry), at most maxScheduleRetry.
func (f *ScheduleFiring) backOff(id domain.ID, err error) {
	wait := firstScheduleRetry
	if b, ok := f.failing[id]; ok {
		wait = min(2*b.wait, maxScheduleRetry)
	}
	f.failing[id] = scheduleBackOff{until: f.now().Add(wait), wait: wait}
	f.log.Error("firing a schedule's tick failed; passing it over while the others fire", "schedule_id", id, "retry_in", wait, "error", err)
}

// decide is what a due schedule does: a schedule whose definition is gone,
// or whose timetable no longer reads, is paused; any other fires its tick
// (domain.Schedule.Fire), and a tick that enqueues has its item built as
// every enqueue's is (queue.NewItem), by the dispatcher (no actor). An
// input that lacks what the definition's key reads is the plan's refusal.
func (f *ScheduleFiring) decide(d ports.DueSchedule) (ports.TickPlan, error) {
	if !d.DefinitionLive {
		return ports.TickPlan{Firing: domain.Firing{Tick: *d.Schedule.NextFireAt, Pause: true}}, nil
	}
	tt, err := queue.TimetableOf(f.parser, d.Schedule)
	if err != nil {
		f.log.Warn("a schedule's timetable no longer reads; pausing it", "schedule_id", d.Schedule.ID, "error", err)
		return ports.TickPlan{Firing: domain.Firing{Tick: *d.Schedule.NextFireAt, Pause: true}}, nil
	}
	plan := ports.TickPlan{Firing: d.Schedule.Fire(tt, d.Now, f.cfg.CatchUp, d.PreviousActive)}
	if !plan.Firing.Enqueue || plan.Firing.Pause {
		return plan, nil
	}
	sc := d.Schedule
	plan.Item, err = queue.NewItem(ports.ItemToEnqueue{WorkspaceID: sc.WorkspaceID, DefinitionID: sc.DefinitionID, Input: sc.Input,
		Priority: sc.Priority, Actor: domain.Actor{}}, d.Concurrency)
	if bad := (*domain.InputError)(nil); errors.As(err, &bad) {
		return ports.TickPlan{Firing: plan.Firing, Refused: bad}, nil
	}
	return plan, err
}
