package usecases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Schedules are the use cases of schedules: a workspace's definitions run
// on a cron expression in a time zone, or on a fixed interval.
type Schedules struct {
	store       ports.ScheduleStore
	definitions ports.DefinitionStore
	workspaces  ports.WorkspaceStore
	parser      ports.TimetableParser
}

// NewSchedules builds the schedule use cases.
func NewSchedules(store ports.ScheduleStore, definitions ports.DefinitionStore, workspaces ports.WorkspaceStore,
	parser ports.TimetableParser) *Schedules {
	return &Schedules{store: store, definitions: definitions, workspaces: workspaces, parser: parser}
}

// ScheduleShownFireTimes is how many next fire times a schedule is shown
// with.
const ScheduleShownFireTimes = 5

// ScheduleView is a schedule as shown: with its next fire times from now
// (none while paused).
type ScheduleView struct {
	domain.Schedule
	NextFireTimes []time.Time
}

// ScheduleChanges are the fields a create sets or an edit changes; nil
// leaves a field as it is (on create: its default).
type ScheduleChanges struct {
	Name            *string
	Cron            *string
	TimeZone        *string
	IntervalSeconds *int
	Input           *json.RawMessage
	Priority        *int
	Overlap         *domain.OverlapPolicy
}

// apply writes the changes into s. A new cron expression replaces an
// interval and a new interval a cron expression; giving both is refused.
func (c ScheduleChanges) apply(s *domain.Schedule) error {
	if c.Cron != nil && c.IntervalSeconds != nil {
		return &domain.FieldError{Field: "/intervalSeconds", Message: "give either cronExpression or intervalSeconds, not both"}
	}
	if c.Name != nil {
		s.Name = *c.Name
	}
	if c.Cron != nil {
		s.Cron, s.Interval = *c.Cron, 0
	}
	if c.IntervalSeconds != nil {
		s.Cron, s.Interval = "", time.Duration(*c.IntervalSeconds)*time.Second
	}
	if c.TimeZone != nil {
		s.TimeZone = *c.TimeZone
	}
	if c.Input != nil {
		s.Input = *c.Input
	}
	if c.Priority != nil {
		s.Priority = *c.Priority
	}
	if c.Overlap != nil {
		if !c.Overlap.Valid() {
			return &domain.FieldError{Field: "/overlapPolicy", Message: "want skip or queue"}
		}
		s.Overlap = *c.Overlap
	}
	if s.Cron == "" && s.Interval == 0 {
		return &domain.FieldError{Field: "/cronExpression", Message: "give cronExpression or intervalSeconds"}
	}
	return nil
}

// checkTimetable reads the schedule's timetable and refuses one that never
// fires, or fires more often than the workspace's plan allows.
func (s *Schedules) checkTimetable(ctx context.Context, sc domain.Schedule, now time.Time) (domain.Timetable, error) {
	tt, err := queue.TimetableOf(s.parser, sc)
	if err != nil {
		return nil, err
	}
	field := "/cronExpression"
	if sc.Cron == "" {
		field = "/intervalSeconds"
	}
	gap, ok := domain.ShortestGap(tt, now)
	if !ok {
		return nil, &domain.FieldError{Field: field, Message: "never fires"}
	}
	quotas, err := s.workspaces.WorkspaceQuotas(ctx, sc.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if err := quotas.CheckScheduleInterval(gap, field); err != nil {
		return nil, err
	}
	return tt, nil
}

// checkInput refuses a schedule whose input its ticks could not enqueue:
// one that lacks what the definition's concurrency key reads, or gives a
// key past its bound, is an *domain.InputError naming /input, the key
// resolved over the schedule's input as each tick resolves it. So the
// mistake is answered where it is made, not recorded at every tick; a tick
// still refuses an input that a key added to the definition later cannot
// resolve. A definition deleted meanwhile is left to the tick, which
// pauses its schedule.
func (s *Schedules) checkInput(ctx context.Context, sc domain.Schedule) error {
	concurrency, err := s.definitions.DefinitionConcurrency(ctx, sc.DefinitionID, 0)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return nil
	case err != nil:
		return err
	case concurrency == nil:
		return nil
	}
	_, err = concurrency.ResolveKey(sc.Input)
	return err
}

// Create stores a new schedule of a definition of the caller's workspace.
// It counts against the plan's schedule quota, its timetable may fire no
// more often than the plan allows, and its input must resolve the
// definition's concurrency key (checkInput).
func (s *Schedules) Create(ctx context.Context, a domain.Actor, workspaceID, definitionID domain.ID, paused bool, c ScheduleChanges) (ScheduleView, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return ScheduleView{}, err
	}
	owner, err := s.definitions.DefinitionWorkspace(ctx, definitionID)
	if err != nil {
		return ScheduleView{}, err
	}
	if owner != workspaceID {
		return ScheduleView{}, fmt.Errorf("%w: the workflow definition belongs to another workspace", ErrForbidden)
	}
	sc := domain.Schedule{ID: domain.ID(uuid.New()), WorkspaceID: workspaceID, DefinitionID: definitionID,
		TimeZone: "UTC", Input: json.RawMessage("{}"), Priority: queue.DefaultPriority, Overlap: domain.OverlapSkip}
	if err = c.apply(&sc); err != nil {
		return ScheduleView{}, err
	}
	if err = s.checkInput(ctx, sc); err != nil {
		return ScheduleView{}, err
	}
	now := time.Now()
	tt, err := s.checkTimetable(ctx, sc, now)
	if err != nil {
		return ScheduleView{}, err
	}
	if paused {
		sc.PausedAt = &now
	} else {
		sc.Retime(tt, now)
	}
	created, err := s.store.CreateSchedule(ctx, sc)
	if err != nil {
		return ScheduleView{}, err
	}
	return s.view(created, tt, now), nil
}

// view adds the next fire times to a schedule.
func (s *Schedules) view(sc domain.Schedule, tt domain.Timetable, now time.Time) ScheduleView {
	v := ScheduleView{Schedule: sc, NextFireTimes: []time.Time{}}
	if sc.NextFireAt == nil || tt == nil {
		return v
	}
	v.NextFireTimes = append(v.NextFireTimes, *sc.NextFireAt)
	if next := domain.NextTicks(tt, maxTime(now, *sc.NextFireAt), ScheduleShownFireTimes-1); len(next) > 0 {
		v.NextFireTimes = append(v.NextFireTimes, next...)
	}
	return v
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// viewStored shows a stored schedule; a timetable that no longer reads
// (a zone gone from the time-zone database) shows no fire times.
func (s *Schedules) viewStored(sc domain.Schedule) ScheduleView {
	tt, err := queue.TimetableOf(s.parser, sc)
	if err != nil {
		tt = nil
	}
	return s.view(sc, tt, time.Now())
}

// Get shows a schedule of the caller's workspace.
func (s *Schedules) Get(ctx context.Context, a domain.Actor, id domain.ID) (ScheduleView, error) {
	sc, err := s.owned(ctx, a, id)
	if err != nil {
		return ScheduleView{}, err
	}
	return s.viewStored(sc), nil
}

// owned loads a schedule and checks the caller may touch it.
func (s *Schedules) owned(ctx context.Context, a domain.Actor, id domain.ID) (domain.Schedule, error) {
	sc, err := s.store.GetSchedule(ctx, id)
	if err != nil {
		return domain.Schedule{}, err
	}
	return sc, requireWorkspace(a, sc.WorkspaceID, "schedule")
}

// List pages through a workspace's schedules, oldest first.
func (s *Schedules) List(ctx context.Context, a domain.Actor, workspaceID domain.ID, limit int, after *ports.ScheduleCursor) ([]ScheduleView, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	scs, err := s.store.ListSchedules(ctx, workspaceID, limit, after)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleView, len(scs))
	for i, sc := range scs {
		out[i] = s.viewStored(sc)
	}
	return out, nil
}

// Update edits a schedule. A changed timetable is checked as on create and
// fires next at its first tick after now; the input is checked as on
// create whatever the edit changes, so no edit leaves a schedule whose
// ticks would all be refused.
func (s *Schedules) Update(ctx context.Context, a domain.Actor, id domain.ID, c ScheduleChanges) (ScheduleView, error) {
	if _, err := s.owned(ctx, a, id); err != nil {
		return ScheduleView{}, err
	}
	var tt domain.Timetable
	var at time.Time
	sc, err := s.store.UpdateSchedule(ctx, id, func(sc *domain.Schedule, now time.Time) error {
		before := *sc
		if err := c.apply(sc); err != nil {
			return err
		}
		if err := s.checkInput(ctx, *sc); err != nil {
			return err
		}
		var err error
		if tt, err = s.checkTimetable(ctx, *sc, now); err != nil {
			return err
		}
		if sc.Cron != before.Cron || sc.Interval != before.Interval || sc.TimeZone != before.TimeZone {
			sc.Retime(tt, now)
		}
		at = now
		return nil
	})
	if err != nil {
		return ScheduleView{}, err
	}
	return s.view(sc, tt, at), nil
}

// Pause stops a schedule firing; pausing a paused one wraps
// domain.ErrScheduleState.
func (s *Schedules) Pause(ctx context.Context, a domain.Actor, id domain.ID) (ScheduleView, error) {
	if _, err := s.owned(ctx, a, id); err != nil {
		return ScheduleView{}, err
	}
	sc, err := s.store.UpdateSchedule(ctx, id, func(sc *domain.Schedule, now time.Time) error { return sc.Pause(now) })
	if err != nil {
		return ScheduleView{}, err
	}
	return s.viewStored(sc), nil
}

// Resume starts a paused schedule firing again: the ticks it missed while
// paused fire once, as the latest of them (domain.Schedule.Resume).
func (s *Schedules) Resume(ctx context.Context, a domain.Actor, id domain.ID) (ScheduleView, error) {
	if _, err := s.owned(ctx, a, id); err != nil {
		return ScheduleView{}, err
	}
	sc, err := s.store.UpdateSchedule(ctx, id, func(sc *domain.Schedule, now time.Time) error {
		tt, err := queue.TimetableOf(s.parser, *sc)
		if err != nil {
			return err
		}
		return sc.Resume(tt, now)
	})
	if err != nil {
		return ScheduleView{}, err
	}
	return s.viewStored(sc), nil
}

// Delete deletes a schedule; the items it enqueued stay.
func (s *Schedules) Delete(ctx context.Context, a domain.Actor, id domain.ID) error {
	if _, err := s.owned(ctx, a, id); err != nil {
		return err
	}
	return s.store.DeleteSchedule(ctx, id)
}
