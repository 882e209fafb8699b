package domain

import (
	"testing"
	"time"
)

// TestGCRA is the primitive's rule, case by case: how many cells conform
// at now for a bucket, when the next one would, what taking them leaves,
// and how far a bucket can get ahead.
func TestGCRA(t *testing.T) {
	t.Parallel()
	const i = 100 * time.Millisecond
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tc := range []struct {
		name     string
		g        GCRA
		tat      time.Time
		want     int
		n        int
		next     time.Time
		afterTat time.Time // the TAT once the n cells are taken
	}{
		{"at rest, no tolerance: one cell, the next an interval on", GCRA{Interval: i}, time.Time{}, 5, 1, at(i), at(i)},
		{"at rest, a tolerance of two intervals: three at once", GCRA{Interval: i, Tolerance: 2 * i}, time.Time{}, 5, 3, at(i), at(3 * i)},
		{"at rest, asked for fewer than conform", GCRA{Interval: i, Tolerance: 2 * i}, time.Time{}, 2, 2, at(0), at(2 * i)},
		{"asked for none: when the next is due", GCRA{Interval: i, Tolerance: 2 * i}, at(i), 0, 0, at(-i), at(i)},
		{"a TAT that has passed counts from now", GCRA{Interval: i}, at(-time.Hour), 5, 1, at(i), at(i)},
		{"a TAT on now: one cell", GCRA{Interval: i}, now, 5, 1, at(i), at(i)},
		{"ahead within the tolerance: what is left of it", GCRA{Interval: i, Tolerance: 2 * i}, at(i), 5, 2, at(i), at(3 * i)},
		{"ahead by exactly the tolerance: one", GCRA{Interval: i, Tolerance: 2 * i}, at(2 * i), 5, 1, at(i), at(3 * i)},
		{"ahead past the tolerance: none, due when it conforms", GCRA{Interval: i, Tolerance: i}, at(3 * i), 5, 0, at(2 * i), at(3 * i)},
		{"one nanosecond past: none", GCRA{Interval: i}, at(1), 1, 0, at(1), at(1)},
		{"a part of an interval of room is one cell", GCRA{Interval: i, Tolerance: i + i/2}, now, 5, 2, at(i / 2), at(2 * i)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n, next := tc.g.Allowed(tc.tat, now, tc.want)
			if n != tc.n || !next.Equal(tc.next) {
				t.Errorf("Allowed = %d, next %v; want %d, next %v", n, next.Sub(now), tc.n, tc.next.Sub(now))
			}
			if got := tc.g.Take(tc.tat, now, n); !got.Equal(tc.afterTat) {
				t.Errorf("Take(%d) = now%+v, want now%+v", n, got.Sub(now), tc.afterTat.Sub(now))
			}
			if n > 0 && tc.g.Take(tc.tat, now, n).After(tc.g.Ceiling(now)) {
				t.Errorf("taking %d conforming cells left the TAT past the ceiling now%+v", n, tc.g.Ceiling(now).Sub(now))
			}
		})
	}
}

// TestGCRAKeepsItsRateInAnyWindow takes every conforming cell, asked for
// at irregular instants, and checks the algorithm's promise: in any window
// of length w, at most Tolerance/Interval + 1 + w/Interval cells, and the
// next due time always lets one cell go.
func TestGCRAKeepsItsRateInAnyWindow(t *testing.T) {
	t.Parallel()
	for _, g := range []GCRA{
		{Interval: 100 * time.Millisecond},
		{Interval: 100 * time.Millisecond, Tolerance: 400 * time.Millisecond},
		{Interval: 333_334 * time.Microsecond, Tolerance: 1_333_336 * time.Microsecond},
	} {
		start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		var tat time.Time
		var cells []time.Time
		// Asks every 7/3 of an interval, then at the next due time, in turn.
		for now, k := start, 0; now.Before(start.Add(200 * g.Interval)); k++ {
			n, next := g.Allowed(tat, now, 1000)
			for range n {
				cells = append(cells, now)
			}
			tat = g.Take(tat, now, n)
			if m, _ := g.Allowed(tat, next, 1); m != 1 {
				t.Fatalf("%+v: nothing conforms at the next due time", g)
			}
			if k%2 == 0 {
				now = now.Add(g.Interval * 7 / 3)
			} else {
				now = next
			}
		}
		burst := int(g.Tolerance/g.Interval) + 1
		for _, w := range []time.Duration{0, g.Interval, 10 * g.Interval} {
			limit := burst + int(w/g.Interval)
			lo := 0
			for hi := range cells {
				for cells[hi].Sub(cells[lo]) > w {
					lo++
				}
				if got := hi - lo + 1; got > limit {
					t.Fatalf("%+v: %d cells within %v, over %d", g, got, w, limit)
				}
			}
		}
	}
}
