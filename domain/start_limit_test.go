package domain

import (
	"testing"
	"time"
)

// busy feeds the limit n samples of the given latency, each begun with
// the limit in use, as a dispatcher with a backlog starts them.
func busy(l *StartLimit, n int, latency time.Duration, overloaded bool) {
	for range n {
		l.Observe(StartSample{Latency: latency, Overloaded: overloaded, InFlight: l.Limit()})
	}
}

// TestStartLimitRisesUnderSteadyLatencyToItsCeiling: starts answered as
// fast as ever, with the limit in use, raise it one a sample (a doubling
// per round of starts) up to the ceiling and never past it.
func TestStartLimitRisesUnderSteadyLatencyToItsCeiling(t *testing.T) {
	t.Parallel()
	l := NewStartLimit(8, 128)
	if got := l.Limit(); got != 8 {
		t.Fatalf("a new limit is %d, want its floor 8", got)
	}
	busy(l, 8, 20*time.Millisecond, false)
	if got := l.Limit(); got != 16 {
		t.Errorf("after one round of 8 steady starts the limit is %d, want 16", got)
	}
	busy(l, 1000, 20*time.Millisecond, false)
	if got := l.Limit(); got != 128 {
		t.Errorf("after a thousand steady starts the limit is %d, want its ceiling 128", got)
	}
}

// TestStartLimitUnusedDoesNotRise: starts that never fill half the limit
// say nothing about whether more would be answered as fast.
func TestStartLimitUnusedDoesNotRise(t *testing.T) {
	t.Parallel()
	l := NewStartLimit(8, 128)
	for range 1000 {
		l.Observe(StartSample{Latency: 20 * time.Millisecond, InFlight: 3})
	}
	if got := l.Limit(); got != 8 {
		t.Errorf("after a thousand starts with 3 in flight the limit is %d, want 8", got)
	}
}

// TestStartLimitFallsOnOverloadOncePerRoundToItsFloor: timeouts and an
// unavailable Temporal cut the limit by StartLimitBackoff, once per round
// of starts, and never below the floor.
func TestStartLimitFallsOnOverloadOncePerRoundToItsFloor(t *testing.T) {
	t.Parallel()
	l := NewStartLimit(8, 128)
	busy(l, 1000, 20*time.Millisecond, false)
	l.Observe(StartSample{Latency: 10 * time.Second, Overloaded: true, InFlight: 128})
	if got := l.Limit(); got != 96 {
		t.Fatalf("after one timed-out start the limit is %d, want 128 * 0.75 = 96", got)
	}
	busy(l, 95, 10*time.Second, true)
	if got := l.Limit(); got != 96 {
		t.Errorf("after the rest of the round timed out too the limit is %d, want still 96: one cut per round", got)
	}
	busy(l, 1000, 10*time.Second, true)
	if got := l.Limit(); got != 8 {
		t.Errorf("after a thousand timed-out starts the limit is %d, want its floor 8", got)
	}
}

// TestStartLimitFallsWhenLatencyGrows: starts that take more than
// StartLatencyTolerance times the baseline, a server or its workers
// falling behind, cut the limit though none failed; within the tolerance
// they do not.
func TestStartLimitFallsWhenLatencyGrows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		latency time.Duration
		want    func(got int) bool
		says    string
	}{
		{"1.5 times the baseline: still rising", 30 * time.Millisecond, func(got int) bool { return got == 128 }, "128"},
		{"3 times the baseline: falling", 60 * time.Millisecond, func(got int) bool { return got < 48 }, "below the 48 it had"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := NewStartLimit(8, 128)
			busy(l, 40, 20*time.Millisecond, false)
			if l.Limit() != 48 {
				t.Fatalf("setup: limit %d after 40 steady starts, want 48", l.Limit())
			}
			busy(l, 100, tc.latency, false)
			if got := l.Limit(); !tc.want(got) {
				t.Errorf("after 100 starts at %v (baseline 20ms) the limit is %d, want %s", tc.latency, got, tc.says)
			}
		})
	}
}

// TestStartLimitTakesALastingSlowdownAsTheNewBaseline: a server that
// stays slower is met with cuts down to the floor, where the baseline
// follows it; then the limit rises again.
func TestStartLimitTakesALastingSlowdownAsTheNewBaseline(t *testing.T) {
	t.Parallel()
	l := NewStartLimit(8, 128)
	busy(l, 1000, 10*time.Millisecond, false)
	busy(l, 50, 50*time.Millisecond, false)
	if got := l.Limit(); got >= 128 {
		t.Fatalf("after 50 starts at five times the baseline the limit is %d, want it cut below 128", got)
	}
	busy(l, 5*StartBaselineMemory, 50*time.Millisecond, false)
	if got := l.Limit(); got != 128 {
		t.Errorf("after %d starts at the new latency the limit is %d, want back at its ceiling 128", 5*StartBaselineMemory, got)
	}
}

// TestStartLimitBounds: the floor is at least one, and a ceiling below
// the floor fixes the limit there.
func TestStartLimitBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		floor, ceiling int
		want           int
	}{
		{"a floor of 0 is 1", 0, 0, 1},
		{"a ceiling below the floor is the floor", 8, 4, 8},
		{"floor and ceiling equal: fixed", 8, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := NewStartLimit(tc.floor, tc.ceiling)
			busy(l, 1000, time.Millisecond, false)
			if got := l.Limit(); got != tc.want {
				t.Errorf("limit %d after steady starts, want %d", got, tc.want)
			}
			busy(l, 1000, time.Millisecond, true)
			if got := l.Limit(); got != tc.want {
				t.Errorf("limit %d after failing starts, want %d", got, tc.want)
			}
		})
	}
}
