package domain

import "time"

// GCRA is the generic cell rate algorithm (ITU-T I.371's virtual
// scheduling), the one rate rule behind every rate Sluice keeps: start
// rates (StartRate) and outbound limits (OutboundLimit). Each states its
// own units (starts per second or minute with a burst per window; calls a
// second with a burst at once) and turns them into these two figures.
//
// A bucket is one instant, its theoretical arrival time (TAT): when the
// next cell (a start, a call) would be on time if cells came at exactly
// one per Interval. A cell conforms at now when TAT - Tolerance <= now,
// and taking it moves TAT to max(TAT, now) + Interval. A zero TAT, or one
// that has passed, is a bucket at rest, so a bucket nobody used need not
// be stored. From rest, Tolerance/Interval + 1 cells conform at once;
// after that, one per Interval.
//
// The methods are pure: the bucket lives where its callers keep it (a row
// of Postgres), and they pass it in with the time to decide at.
type GCRA struct {
	// Interval is the emission interval: the time one cell takes at the
	// rate. It is positive.
	Interval time.Duration
	// Tolerance is how far ahead of now TAT may be and a cell still
	// conform; zero spaces every cell one Interval apart.
	Tolerance time.Duration
}

// Allowed is how many cells conform at now for the bucket at tat, capped
// at want, and when the next cell after those would conform (the time at
// which Allowed would return at least one again).
func (g GCRA) Allowed(tat, now time.Time, want int) (n int, next time.Time) {
	base := latest(tat, now)
	// The k-th cell (k from 0) conforms while base + k·I - τ <= now.
	if room := now.Add(g.Tolerance).Sub(base); room >= 0 {
		n = int(room/g.Interval) + 1
	}
	n = max(0, min(n, want))
	return n, base.Add(time.Duration(n) * g.Interval).Add(-g.Tolerance)
}

// ConformsAt is when the k-th cell (k from 0) after the bucket at tat
// first conformed, had no cell been taken since: tat + k·Interval -
// Tolerance. A bucket that holds cells back lets each go at that moment,
// so it is what a wait for the rate ends at.
func (g GCRA) ConformsAt(tat time.Time, k int) time.Time {
	return tat.Add(time.Duration(k)*g.Interval - g.Tolerance)
}

// Take is the bucket's TAT after n cells at now. It does not ask whether
// they conform: a caller that reserves cells ahead of time (a turn to
// wait for) takes them anyway and waits until each conforms.
func (g GCRA) Take(tat, now time.Time, n int) time.Time {
	return latest(tat, now).Add(time.Duration(n) * g.Interval)
}

// Ceiling is the furthest ahead of now a TAT gets while cells are taken
// only when they conform: now + Tolerance + Interval. A TAT beyond it was
// left by reservations or by a slower rate since raised.
func (g GCRA) Ceiling(now time.Time) time.Time {
	return now.Add(g.Tolerance + g.Interval)
}

// latest is the later of tat and now: the time the next cell is counted
// from.
func latest(tat, now time.Time) time.Time {
	if tat.After(now) {
		return tat
	}
	return now
}
