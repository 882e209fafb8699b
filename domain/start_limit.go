package domain

import "time"

// StartLimit is how many Temporal starts one dispatcher lets be in flight:
// an AIMD limit between a floor and a ceiling, as Netflix's
// concurrency-limits (AIMDLimit) and TCP's congestion window are. Every
// start that returns is a sample. One answered within StartLatencyTolerance
// times the baseline, while the limit was at least half used, raises the
// limit by one, so the limit doubles about once per round trip until the
// server pushes back: against a server 20 ms away it climbs from 8 to 128
// in under a tenth of a second. One that timed out, found Temporal
// unavailable, or took longer than the tolerance cuts it by
// StartLimitBackoff, at most once per round of starts, since the starts of
// one round meet the same overload and one cut answers them all.
//
// The baseline is the latency of an unloaded start: it follows a faster
// sample at once, and a slower one only while the limit is at its floor,
// by a 1/StartBaselineMemory share. Latency that grows with the starts in
// flight (the server or its workers falling behind) is then met by cuts,
// which bring it back, and never becomes the baseline; a server that
// stays slower at the floor (a new region, a loaded cluster) becomes the
// new baseline after some hundred samples, and the limit rises from
// there.
//
// A StartLimit is not safe for concurrent use; its owner serialises
// Observe and Limit.
type StartLimit struct {
	floor, ceiling float64
	limit          float64
	baseline       time.Duration
	// calm counts the samples still to come before another cut, so that
	// the starts of one round, all meeting the same overload, cut once.
	calm int
}

const (
	// StartLatencyTolerance is how many times the baseline a start may take
	// before it counts as the server falling behind.
	StartLatencyTolerance = 2
	// StartLimitBackoff is what a cut leaves of the limit.
	StartLimitBackoff = 0.75
	// StartBaselineMemory is over how many samples at the floor the
	// baseline forgets a faster past: each moves it by 1/StartBaselineMemory
	// of the difference.
	StartBaselineMemory = 100
)

// StartSample is one start as the limit learns from it.
type StartSample struct {
	// Latency is how long the start took, from its call to its answer.
	Latency time.Duration
	// Overloaded is true when the start timed out or found Temporal
	// unavailable: a sign of overload, whatever its latency.
	Overloaded bool
	// InFlight is how many starts were in flight when it began, itself
	// included.
	InFlight int
}

// NewStartLimit returns a limit that starts at floor and moves between
// floor and ceiling (at least 1; a ceiling below the floor is the floor,
// which fixes the limit).
func NewStartLimit(floor, ceiling int) *StartLimit {
	floor = max(1, floor)
	ceiling = max(floor, ceiling)
	return &StartLimit{floor: float64(floor), ceiling: float64(ceiling), limit: float64(floor)}
}

// Limit is the number of starts that may be in flight now.
func (l *StartLimit) Limit() int { return int(l.limit) }

// Observe moves the limit after one start returned.
func (l *StartLimit) Observe(s StartSample) {
	if l.calm > 0 {
		l.calm--
	}
	slow := false
	if !s.Overloaded && s.Latency > 0 {
		switch {
		case l.baseline == 0 || s.Latency < l.baseline:
			l.baseline = s.Latency
		default:
			slow = s.Latency > StartLatencyTolerance*l.baseline
			if l.limit <= l.floor {
				l.baseline += (s.Latency - l.baseline) / StartBaselineMemory
			}
		}
	}
	switch {
	case s.Overloaded || slow:
		if l.calm == 0 {
			l.limit = max(l.floor, l.limit*StartLimitBackoff)
			l.calm = int(l.limit)
		}
	case 2*s.InFlight >= int(l.limit):
		// Only a limit in use shows that more would be answered as fast: a
		// dispatcher with little to start learns nothing about its ceiling.
		l.limit = min(l.ceiling, l.limit+1)
	}
}
