package domain

import (
	"testing"
	"time"
)

func TestIntervalTimetableTicksOnTheEpochGrid(t *testing.T) {
	t.Parallel()
	tt := IntervalTimetable{Every: time.Minute}
	at := time.Date(2026, 11, 25, 10, 0, 30, 0, time.UTC)
	if got, want := tt.Next(at), time.Date(2026, 11, 25, 10, 1, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next %s, want %s", got, want)
	}
	if got, want := tt.Next(time.Date(2026, 11, 25, 10, 1, 0, 0, time.UTC)), time.Date(2026, 11, 25, 10, 2, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next after a tick %s, want the one after it %s", got, want)
	}
}

func TestFireCatchesUpTickByTickWithinTheWindowAndOnceBeyondIt(t *testing.T) {
	t.Parallel()
	tt := IntervalTimetable{Every: time.Second}
	base := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	due := base
	s := Schedule{NextFireAt: &due, Overlap: OverlapQueue}
	for _, tc := range []struct {
		name           string
		now            time.Time
		previousActive bool
		overlap        OverlapPolicy
		want           Firing
	}{
		{"on time", base.Add(100 * time.Millisecond), false, OverlapQueue,
			Firing{Tick: base, Next: base.Add(time.Second), Enqueue: true}},
		{"3 s late, within the catch-up: the due tick, then the next", base.Add(3 * time.Second), false, OverlapQueue,
			Firing{Tick: base, Next: base.Add(time.Second), Enqueue: true}},
		{"90 s late: once, for the latest tick", base.Add(90*time.Second + 500*time.Millisecond), false, OverlapQueue,
			Firing{Tick: base.Add(90 * time.Second), Next: base.Add(91 * time.Second), Enqueue: true}},
		{"skip while the previous run is active", base, true, OverlapSkip,
			Firing{Tick: base, Next: base.Add(time.Second), Enqueue: false}},
		{"queue while the previous run is active", base, true, OverlapQueue,
			Firing{Tick: base, Next: base.Add(time.Second), Enqueue: true}},
	} {
		s.Overlap = tc.overlap
		if got := s.Fire(tt, tc.now, time.Minute, tc.previousActive); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestResumeFiresTheMissedTicksOnceAsTheLatest(t *testing.T) {
	t.Parallel()
	tt := IntervalTimetable{Every: time.Second}
	paused := time.Date(2026, 11, 25, 10, 0, 0, 500_000_000, time.UTC)
	s := Schedule{PausedAt: &paused}
	now := paused.Add(10 * time.Second)
	if err := s.Resume(tt, now); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 25, 10, 0, 10, 0, time.UTC); s.NextFireAt == nil || !s.NextFireAt.Equal(want) || s.PausedAt != nil {
		t.Errorf("resumed: next %v paused %v, want the latest missed tick %s", s.NextFireAt, s.PausedAt, want)
	}
	if err := s.Resume(tt, now); err == nil {
		t.Error("resuming a running schedule succeeded")
	}
	// Paused and resumed between two ticks: nothing was missed.
	short := time.Date(2026, 11, 25, 10, 0, 0, 100_000_000, time.UTC)
	s = Schedule{PausedAt: &short}
	if err := s.Resume(tt, short.Add(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 25, 10, 0, 1, 0, time.UTC); !s.NextFireAt.Equal(want) {
		t.Errorf("resumed with no tick missed: next %s, want %s", s.NextFireAt, want)
	}
}

func TestShortestGapFindsTheClosestTicks(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if gap, ok := ShortestGap(IntervalTimetable{Every: 10 * time.Second}, from.Add(9500*time.Millisecond)); !ok || gap != 10*time.Second {
		t.Errorf("every 10 s: %s %v", gap, ok)
	}
	if _, ok := ShortestGap(IntervalTimetable{}, from); ok {
		t.Error("a timetable with no tick has a gap")
	}
}
