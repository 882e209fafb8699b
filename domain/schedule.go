package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Timetable gives a schedule's fire times ("ticks"). A cron expression's
// timetable comes from a parser adapter (the domain parses no cron);
// IntervalTimetable is the fixed-interval one.
type Timetable interface {
	// Next returns the first tick strictly after t, or the zero time when
	// there is none.
	Next(t time.Time) time.Time
}

// IntervalTimetable ticks every Every, on the multiples of Every since the
// Unix epoch: every 60 s is on the minute, every hour on the hour (UTC), so
// an edit or a restart never shifts the grid.
type IntervalTimetable struct {
	// Every is the time between ticks.
	Every time.Duration
}

// Next returns the first multiple of Every after t.
func (i IntervalTimetable) Next(t time.Time) time.Time {
	if i.Every <= 0 {
		return time.Time{}
	}
	return t.Truncate(i.Every).Add(i.Every)
}

// ErrBadCron and ErrBadTimeZone are wrapped by a timetable parser's errors
// about the cron expression and the time zone, so the caller can name the
// field at fault.
var (
	// ErrBadCron is wrapped by errors about the cron expression.
	ErrBadCron = errors.New("invalid cron expression")
	// ErrBadTimeZone is wrapped by errors about the time zone.
	ErrBadTimeZone = errors.New("invalid time zone")
)

// OverlapPolicy says what a tick does while the schedule's previous run is
// still queued or running.
type OverlapPolicy string

// The overlap policies.
const (
	// OverlapSkip fires nothing for the tick (it is recorded as skipped).
	OverlapSkip OverlapPolicy = "skip"
	// OverlapQueue enqueues the tick's item all the same.
	OverlapQueue OverlapPolicy = "queue"
)

// Valid reports whether p is one of the policies.
func (p OverlapPolicy) Valid() bool { return p == OverlapSkip || p == OverlapQueue }

// Schedule runs a workspace's definition on a timetable: a cron expression
// in a time zone, or a fixed interval. NextFireAt is the next tick to fire,
// nil while the schedule is paused.
type Schedule struct {
	// ID names the schedule.
	ID ID
	// WorkspaceID is the workspace whose quotas its items count against.
	WorkspaceID ID
	// DefinitionID is the definition each tick runs.
	DefinitionID ID
	// Name is the label its owners chose.
	Name string
	// Cron is the cron expression, "" for an interval schedule.
	Cron string
	// TimeZone is the IANA zone the cron expression is read in.
	TimeZone string
	// Interval is the fixed interval, 0 for a cron schedule.
	Interval time.Duration
	// Input is each item's input, kept byte for byte.
	Input json.RawMessage
	// Priority is each item's priority.
	Priority int
	// Overlap says what a tick does while the previous run is active.
	Overlap OverlapPolicy
	// PausedAt is when the schedule was paused; nil while it runs.
	PausedAt *time.Time
	// NextFireAt is the next tick to fire; nil while paused.
	NextFireAt *time.Time
	// LastTick is the last tick fired or skipped.
	LastTick *time.Time
	// LastQueueID is the item the last fired tick enqueued: the previous
	// run the overlap policy looks at.
	LastQueueID *ID
	// CreatedAt is when the schedule was created; it orders the list.
	CreatedAt time.Time
	// UpdatedAt is when it was last edited, paused or resumed.
	UpdatedAt time.Time
}

// ScheduleFutureTicks is how many ticks ahead ShortestGap looks, and how
// many next fire times the API shows at most.
const ScheduleFutureTicks = 1000

// ShortestGap returns the shortest time between two consecutive ones of
// the first ScheduleFutureTicks ticks after from, and false when the
// timetable has no tick after from. A timetable with a single tick has no
// gap: it returns the longest duration.
func ShortestGap(tt Timetable, from time.Time) (time.Duration, bool) {
	prev := tt.Next(from)
	if prev.IsZero() {
		return 0, false
	}
	shortest := time.Duration(math.MaxInt64)
	for range ScheduleFutureTicks - 1 {
		t := tt.Next(prev)
		if t.IsZero() {
			break
		}
		if gap := t.Sub(prev); gap < shortest {
			shortest = gap
		}
		prev = t
	}
	return shortest, true
}

// NextTicks returns up to n ticks after from.
func NextTicks(tt Timetable, from time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for t := tt.Next(from); !t.IsZero() && len(out) < n; t = tt.Next(t) {
		out = append(out, t)
	}
	return out
}

// latestTickSearch are the look-back windows latestTick tries, smallest
// first, so that the ticks it walks stay few: a window is tried only when
// the smaller ones held no tick.
var latestTickSearch = []time.Duration{
	time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 367 * 24 * time.Hour,
}

// latestTick returns the last tick in (after, upTo], and false when there
// is none (or none found within five years before upTo).
func latestTick(tt Timetable, after, upTo time.Time) (time.Time, bool) {
	for _, w := range latestTickSearch {
		start := upTo.Add(-w)
		if start.Before(after) {
			start = after
		}
		t := tt.Next(start)
		if t.IsZero() || t.After(upTo) {
			if !start.After(after) {
				return time.Time{}, false
			}
			continue
		}
		for {
			n := tt.Next(t)
			if n.IsZero() || n.After(upTo) {
				return t, true
			}
			t = n
		}
	}
	return time.Time{}, false
}

// Firing is what a due schedule does: fire (or skip) Tick, then wait for
// Next.
type Firing struct {
	// Tick is the tick the item is for.
	Tick time.Time
	// Next is the next tick to fire; zero when the timetable has no more.
	Next time.Time
	// Enqueue is false when the overlap policy skips the tick.
	Enqueue bool
	// Pause is true when the schedule can fire no more (its timetable has
	// no next tick, or its definition is gone): it is paused instead of
	// advanced.
	Pause bool
}

// Fire decides what the schedule, due at now (NextFireAt <= now), does.
// A tick overdue by at most catchUp fires on its own, and the next tick
// follows it, so a firing job that failed over or restarted within catchUp
// loses no tick. Ticks overdue by more (no dispatcher ran) were missed:
// they fire once, as the latest of them, and the schedule goes on from
// the first tick after now. previousActive says whether the last fired
// item is still queued or running, which the skip policy fires nothing
// for.
func (s Schedule) Fire(tt Timetable, now time.Time, catchUp time.Duration, previousActive bool) Firing {
	due := *s.NextFireAt
	f := Firing{Tick: due, Next: tt.Next(due), Enqueue: !(s.Overlap == OverlapSkip && previousActive)}
	if now.Sub(due) > catchUp {
		if latest, ok := latestTick(tt, due, now); ok {
			f.Tick = latest
		}
		f.Next = tt.Next(now)
	}
	f.Pause = f.Next.IsZero()
	return f
}

// ErrScheduleState is wrapped by a pause of a paused schedule and a resume
// of a running one.
var ErrScheduleState = errors.New("schedule state")

// Pause stops the schedule firing from now on.
func (s *Schedule) Pause(now time.Time) error {
	if s.PausedAt != nil {
		return fmt.Errorf("%w: the schedule is already paused", ErrScheduleState)
	}
	s.PausedAt, s.NextFireAt = &now, nil
	return nil
}

// Resume starts the schedule firing again. The ticks it missed while
// paused fire once, as the latest of them, at once; with none missed it
// goes on from the first tick after now.
func (s *Schedule) Resume(tt Timetable, now time.Time) error {
	if s.PausedAt == nil {
		return fmt.Errorf("%w: the schedule is not paused", ErrScheduleState)
	}
	next, ok := latestTick(tt, *s.PausedAt, now)
	if !ok {
		next = tt.Next(now)
	}
	s.PausedAt = nil
	s.NextFireAt = &next
	return nil
}

// Retime sets the next tick after a change of timetable: the first tick
// after now, unless the schedule is paused.
func (s *Schedule) Retime(tt Timetable, now time.Time) {
	if s.PausedAt != nil {
		return
	}
	next := tt.Next(now)
	s.NextFireAt = &next
}
