package domain

import (
	"bytes"
	"strconv"
	"time"
)

// RatePeriod is the period a start rate is counted over.
type RatePeriod string

const (
	// PerSecond counts starts per second.
	PerSecond RatePeriod = "second"
	// PerMinute counts starts per minute.
	PerMinute RatePeriod = "minute"
)

// Duration is the period's length.
func (p RatePeriod) Duration() time.Duration {
	if p == PerMinute {
		return time.Minute
	}
	return time.Second
}

// StartRateMax bounds a start rate's Rate and Burst: 10,000 starts per
// period is far above what one tenant's share of a Temporal cluster takes,
// and keeps a typo from reading as "unlimited".
const StartRateMax = 10_000

// StartRate is a limit on how often executions start, set by a plan, a
// workspace or a concurrency key, on top of the concurrency limits: at
// most Rate starts per Per in the long run, and at most Burst starts in
// any window of one Per (a second or a minute), sliding. Burst is at least
// Rate; Burst == Rate spaces the starts evenly, one every Per/Rate.
//
// It is enforced by the GCRA (GCRA) of Interval and Tolerance; a start is
// a cell.
//
// Its JSON names are the API's, which decodeStartRate reads: a graph's
// concurrency.startRate is written by EncodeGraph and read back strictly
// by DecodeGraph when a run loads its graph.
type StartRate struct {
	// Rate is the starts allowed per Per.
	Rate int `json:"rate"`
	// Per is the period.
	Per RatePeriod `json:"per"`
	// Burst is the most starts in any window of one Per.
	Burst int `json:"burst"`
}

// Interval is the emission interval Per/Rate, rounded up to the
// microsecond (the database's clock resolution), so that rounding can
// only make the rate slower, never faster.
func (r StartRate) Interval() time.Duration {
	d := r.Per.Duration() / time.Duration(r.Rate)
	if d%time.Microsecond != 0 {
		d = d.Truncate(time.Microsecond) + time.Microsecond
	}
	return d
}

// Tolerance is how far ahead of now TAT may be and a start still go:
// (Burst - Rate) intervals. Over any window of length Per, n starts need
// (n-1)·Interval - Tolerance < Per, so n ≤ Burst: that is the burst's
// meaning, exact.
func (r StartRate) Tolerance() time.Duration {
	return time.Duration(r.Burst-r.Rate) * r.Interval()
}

// gcra is the rate in the algorithm's terms.
func (r StartRate) gcra() GCRA {
	return GCRA{Interval: r.Interval(), Tolerance: r.Tolerance()}
}

// Allowed is how many starts the bucket whose theoretical arrival time is
// tat allows at now, capped at want, and when the next start after those
// is due (the time at which Allowed would return at least one again).
// A zero tat is a bucket at rest.
func (r StartRate) Allowed(tat, now time.Time, want int) (n int, next time.Time) {
	g := r.gcra()
	return g.Allowed(capped(g, tat, now), now, want)
}

// AllowedSince is when the bucket whose theoretical arrival time is tat,
// read at now, began to let the k-th start taken from it next go (k from
// 0): what a start held back by this rate waited for. A zero tat is a
// bucket at rest, which held nothing back: zero.
func (r StartRate) AllowedSince(tat, now time.Time, k int) time.Time {
	if tat.IsZero() {
		return time.Time{}
	}
	g := r.gcra()
	return g.ConformsAt(capped(g, tat, now), k)
}

// Take returns the bucket's TAT after n starts at now.
func (r StartRate) Take(tat, now time.Time, n int) time.Time {
	g := r.gcra()
	return g.Take(capped(g, tat, now), now, n)
}

// capped is tat, never further ahead than this rate lets a TAT get
// (GCRA.Ceiling). A TAT beyond that was left by a slower rate that has
// since been raised, and must not hold the new one back: a raised rate is
// used within one of its intervals, once the capped TAT is stored. Under
// an unchanged rate the cap never applies, since starts are taken only
// when they conform.
func capped(g GCRA, tat, now time.Time) time.Time {
	if ceiling := g.Ceiling(now); tat.After(ceiling) {
		return ceiling
	}
	return tat
}

// CheckStartRate refuses a rate outside 1 to StartRateMax, a period other
// than second or minute, and a burst outside Rate to StartRateMax, naming
// the field under path (such as /startRate).
func CheckStartRate(r StartRate, path string) error {
	ve := &ValidationError{}
	r.validate(path, ve)
	if len(ve.Problems) > 0 {
		return ve
	}
	return nil
}

func (r StartRate) validate(path string, ve *ValidationError) {
	if r.Rate < 1 || r.Rate > StartRateMax {
		ve.add(path+"/rate", "must be from 1 to %d, got %d", StartRateMax, r.Rate)
	}
	if r.Per != PerSecond && r.Per != PerMinute {
		ve.add(path+"/per", "must be second or minute, got %q", string(r.Per))
	}
	if lo := max(1, min(r.Rate, StartRateMax)); r.Burst < lo || r.Burst > StartRateMax {
		ve.add(path+"/burst", "must be from the rate (%d) to %d, got %d", r.Rate, StartRateMax, r.Burst)
	}
}

// decodeStartRate reads a graph's {"rate", "per", "burst"} strictly; an
// absent burst is the rate (evenly spaced starts).
func decodeStartRate(raw []byte, path string, ve *ValidationError) (*StartRate, bool) {
	f, ok := objectFields(raw, path, ve, []string{"rate", "per", "burst"})
	if f == nil {
		return nil, false
	}
	r := &StartRate{}
	integer := func(name string) int {
		v, present := f[name]
		if !present {
			return 0
		}
		v = bytes.TrimSpace(v)
		n, err := strconv.Atoi(string(v))
		if err != nil {
			ve.add(path+"/"+name, "must be an integer, not %s", rawKind(v))
			ok = false
		}
		return n
	}
	r.Rate, r.Burst = integer("rate"), integer("burst")
	if r.Burst == 0 {
		r.Burst = r.Rate
	}
	if v, present := f["per"]; present {
		s, good := stringField(v, path+"/per", ve)
		r.Per, ok = RatePeriod(s), ok && good
	}
	return r, ok
}
