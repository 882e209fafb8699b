package domain

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestStartRateNeverExceedsBurstInAnyWindow drives a bucket as greedy
// claims would, each taking some of what it allows, at its next due time
// or at irregular instants before it, and
// checks the burst's meaning exactly: no window of one period holds more
// than Burst starts, and over a long run the count is the rate's (the
// first window's extra Burst - Rate discounted).
func TestStartRateNeverExceedsBurstInAnyWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rate StartRate
	}{
		{"10/s burst 10", StartRate{Rate: 10, Per: PerSecond, Burst: 10}},
		{"10/s burst 15", StartRate{Rate: 10, Per: PerSecond, Burst: 15}},
		{"3/s burst 7 (an interval that is not whole microseconds)", StartRate{Rate: 3, Per: PerSecond, Burst: 7}},
		{"120/min burst 200", StartRate{Rate: 120, Per: PerMinute, Burst: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, 2))
			start := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
			var tat time.Time
			var starts []time.Time
			periods := 30
			end := start.Add(time.Duration(periods) * tc.rate.Per.Duration())
			for now := start; now.Before(end); {
				n, next := tc.rate.Allowed(tat, now, 1+rng.IntN(tc.rate.Burst))
				for range n {
					starts = append(starts, now)
				}
				tat = tc.rate.Take(tat, now, n)
				if m, _ := tc.rate.Allowed(tat, next, 1); m != 1 {
					t.Fatalf("at %v the bucket allows nothing at its next due time %v", now, next)
				}
				// The claim wakes at the next due time, or earlier (a
				// wake-up for other work), as the dispatcher does.
				if early := now.Add(time.Duration(rng.IntN(int(tc.rate.Interval()/time.Microsecond))) * time.Microsecond); rng.IntN(2) == 0 && early.Before(next) {
					now = early
				} else if next.After(now) {
					now = next
				}
			}
			per := tc.rate.Per.Duration()
			lo := 0
			for hi := range starts {
				for starts[hi].Sub(starts[lo]) >= per {
					lo++
				}
				if got := hi - lo + 1; got > tc.rate.Burst {
					t.Fatalf("%d starts in the window from %v: more than the burst %d", got, starts[lo], tc.rate.Burst)
				}
			}
			want := periods*tc.rate.Rate + tc.rate.Burst - tc.rate.Rate
			if got := len(starts); got > want || got < want-2 {
				t.Errorf("%d starts over %d periods, want %d (the rate's, plus burst - rate once)", got, periods, want)
			}
		})
	}
}

func TestStartRateAllowed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	r := StartRate{Rate: 10, Per: PerSecond, Burst: 15}
	for _, tc := range []struct {
		name     string
		tat      time.Time
		want     int
		wantN    int
		wantNext time.Time
	}{
		{"a bucket at rest allows burst - rate + 1 at once", time.Time{}, 100, 6, now.Add(100 * time.Millisecond)},
		{"capped at what is wanted", time.Time{}, 2, 2, now.Add(-300 * time.Millisecond)},
		{"a TAT in the past is a bucket at rest", now.Add(-time.Hour), 100, 6, now.Add(100 * time.Millisecond)},
		{"a TAT ahead by the tolerance allows one", now.Add(500 * time.Millisecond), 100, 1, now.Add(100 * time.Millisecond)},
		{"a TAT past the tolerance allows none until it is due", now.Add(550 * time.Millisecond), 100, 0, now.Add(50 * time.Millisecond)},
		{"a TAT a slower rate left an hour ahead counts as this rate's fullest bucket", now.Add(time.Hour), 100, 0, now.Add(100 * time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, next := r.Allowed(tc.tat, now, tc.want)
			if n != tc.wantN || !next.Equal(tc.wantNext) {
				t.Errorf("Allowed = %d, next %v; want %d, next %v", n, next.Sub(now), tc.wantN, tc.wantNext.Sub(now))
			}
		})
	}
}

func TestCheckStartRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rate  StartRate
		field string
	}{
		{"rate 0", StartRate{Rate: 0, Per: PerSecond, Burst: 1}, "/startRate/rate"},
		{"rate over the max", StartRate{Rate: StartRateMax + 1, Per: PerSecond, Burst: StartRateMax}, "/startRate/rate"},
		{"an hour", StartRate{Rate: 1, Per: "hour", Burst: 1}, "/startRate/per"},
		{"burst under the rate", StartRate{Rate: 10, Per: PerSecond, Burst: 9}, "/startRate/burst"},
		{"burst over the max", StartRate{Rate: 10, Per: PerSecond, Burst: StartRateMax + 1}, "/startRate/burst"},
		{"valid", StartRate{Rate: 10, Per: PerMinute, Burst: 10}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckStartRate(tc.rate, "/startRate")
			if tc.field == "" {
				if err != nil {
					t.Fatalf("CheckStartRate: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != tc.field {
				t.Fatalf("CheckStartRate = %v, want one problem at %s", err, tc.field)
			}
		})
	}
}
