package ports

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// TimetableParser reads a cron expression in a time zone. Its errors wrap
// domain.ErrBadCron or domain.ErrBadTimeZone.
type TimetableParser interface {
	Timetable(expr, zone string) (domain.Timetable, error)
}

// ScheduleCursor is the keyset position of the last schedule of a page.
type ScheduleCursor struct {
	CreatedAt time.Time
	ID        domain.ID
}

// DueSchedule is a due schedule, locked in the firing transaction, with
// what deciding its tick needs.
type DueSchedule struct {
	Schedule domain.Schedule
	// Now is the database's now(), the clock ticks are judged by.
	Now time.Time
	// DefinitionLive is false when the definition was deleted.
	DefinitionLive bool
	// PreviousActive says whether the last fired item is still queued or
	// running.
	PreviousActive bool
	// Concurrency is the concurrency of the definition's current version,
	// which the tick's item runs; nil for none, or when the definition is
	// gone.
	Concurrency *domain.Concurrency
}

// TickPlan is what app decided a due schedule does this tick.
type TickPlan struct {
	// Firing is the tick, the schedule's next fire time, and whether it
	// pauses or enqueues.
	Firing domain.Firing
	// Item is the tick's queue item when Firing.Enqueue and Refused is
	// nil, built as every enqueue's is.
	Item ItemToEnqueue
	// Refused is why the tick's item could not be built (its input lacks
	// what the definition's key reads): nothing is enqueued, the refusal
	// is recorded (activity "schedule.refused", naming the field) and the
	// schedule advances, so fixing its input fixes the next tick.
	Refused *domain.InputError
}

// ScheduleStore keeps schedules and fires them.
type ScheduleStore interface {
	// CreateSchedule stores a new schedule after counting the workspace's
	// schedules under its storage lock against its quota in force
	// (domain.PlanQuotas.CheckSchedules).
	CreateSchedule(ctx context.Context, s domain.Schedule) (domain.Schedule, error)
	GetSchedule(ctx context.Context, id domain.ID) (domain.Schedule, error)
	ListSchedules(ctx context.Context, workspaceID domain.ID, limit int, after *ScheduleCursor) ([]domain.Schedule, error)
	// UpdateSchedule loads the schedule under its row lock (so no tick
	// fires meanwhile), lets update change it, and writes the result, in
	// one transaction; the database's now() is passed to update.
	UpdateSchedule(ctx context.Context, id domain.ID, update func(s *domain.Schedule, now time.Time) error) (domain.Schedule, error)
	DeleteSchedule(ctx context.Context, id domain.ID) error
	// FireDueSchedule locks the due schedule with the oldest tick that no
	// other transaction holds and skip does not name, asks decide what it
	// does, and in the same transaction enqueues the plan's item (through the one enqueue path,
	// with its quotas, the item naming the schedule and tick) and advances
	// it to Firing.Next, or pauses it (Firing.Pause), or records the
	// plan's refusal and advances it. A crash before the
	// commit fires nothing and advances nothing. A tick an enqueue quota
	// refuses is recorded (activity "schedule.refused") and passed. It
	// returns false when no schedule was due.
	FireDueSchedule(ctx context.Context, skip []domain.ID, decide func(DueSchedule) (TickPlan, error)) (bool, error)
}
