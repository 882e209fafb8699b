package domain

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"
)

// Bounds of a workspace's outbound limits. A workspace keeps at most
// OutboundLimits.HostsMax of them (configured); each names one host.
const (
	// OutboundHostMaxLen is the longest host name a limit may name: DNS's
	// own limit.
	OutboundHostMaxLen = 253
	// OutboundRateMin is the slowest rate a limit may set: one call in
	// 1,000 s.
	OutboundRateMin = 0.001
	// OutboundRateMax is the fastest: 1,000 calls a second (past it the
	// limit is no limit, and the one shared row would be the bottleneck).
	OutboundRateMax = 1000
	// OutboundBurstMax bounds how many calls may go at once from a full
	// bucket.
	OutboundBurstMax = 1000
)

// OutboundLimit is a workspace's rate for one target host of its
// HTTP_REQUEST nodes: at most Burst calls at once, then RatePerSecond.
type OutboundLimit struct {
	// Host is the host in canonical form (ParseOutboundHost).
	Host string
	// RatePerSecond is the calls a second once the burst is spent.
	RatePerSecond float64
	// Burst is how many calls may go at once from a full bucket.
	Burst int
}

// NewOutboundLimit checks a limit as a caller gives it, naming the field
// at fault under the given paths, and returns it with its host in the
// canonical form calls are matched by (OutboundHostOf).
func NewOutboundLimit(host string, rate float64, burst int, hostPath, ratePath, burstPath string) (OutboundLimit, error) {
	ve := &ValidationError{}
	canonical, err := ParseOutboundHost(host)
	if err != nil {
		ve.add(hostPath, "%s", err.Error())
	}
	if math.IsNaN(rate) || rate < OutboundRateMin || rate > OutboundRateMax {
		ve.add(ratePath, "must be between %g and %g requests per second", float64(OutboundRateMin), float64(OutboundRateMax))
	}
	if burst < 1 || burst > OutboundBurstMax {
		ve.add(burstPath, "must be between 1 and %d", OutboundBurstMax)
	}
	if err := ve.errOrNil(); err != nil {
		return OutboundLimit{}, err
	}
	return OutboundLimit{Host: canonical, RatePerSecond: rate, Burst: burst}, nil
}

// ParseOutboundHost checks a host name as a limit names it and returns its
// canonical form: lower case, without a trailing dot, an IP address in its
// canonical text. A port is not part of it: a limit holds for every port
// of the host.
func ParseOutboundHost(host string) (string, error) {
	if host == "" {
		return "", fmt.Errorf("is empty")
	}
	if len(host) > OutboundHostMaxLen {
		return "", fmt.Errorf("is %d bytes, over the limit of %d", len(host), OutboundHostMaxLen)
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if addr, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		if addr.Zone() != "" {
			return "", fmt.Errorf("%q: an address with a zone is not a host of the internet", host)
		}
		return addr.String(), nil
	}
	if AmbiguousIPv4Host(h) {
		return "", fmt.Errorf("%s", AmbiguousIPv4Problem(h))
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%q is not a host name: each dot-separated label has 1 to 63 characters", host)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("%q is not a host name: a label neither starts nor ends with '-'", host)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q is not a host name: only letters, digits, '-' and '_' (IDNs in their xn-- form)", host)
			}
		}
	}
	return h, nil
}

// OutboundHostOf is the host a call to a URL's hostname (as url.URL's
// Hostname gives it) counts against: its canonical form, or the name
// lower-cased when it is no valid host (such a call fails in the client
// anyway).
func OutboundHostOf(hostname string) string {
	if h, err := ParseOutboundHost(hostname); err == nil {
		return h
	}
	return strings.ToLower(hostname)
}

// Interval is the time between two calls at the limit's rate.
func (l OutboundLimit) Interval() time.Duration {
	return time.Duration(float64(time.Second) / l.RatePerSecond)
}

// gcra is the limit in the algorithm's terms (GCRA): a call is a cell,
// and Burst calls conform at once from rest, so the tolerance is Burst-1
// intervals.
func (l OutboundLimit) gcra() GCRA {
	interval := l.Interval()
	return GCRA{Interval: interval, Tolerance: time.Duration(l.Burst-1) * interval}
}

// Turn is the limit's rule, a GCRA with reservations: the bucket is one
// instant, next, at which the host's next call would be on time if calls
// went at exactly the rate. A call asking at now reserves the slot at next
// (or now, if next has passed), which moves next one interval on, and must
// wait until that slot conforms, at most Burst-1 intervals ahead: wait is
// zero for a call within the burst. Reserving rather than asking again
// means waiting calls go in turn, each at its slot, and a herd of them
// never loses the rate's slots to the time their asking takes. So N calls
// take at least (N-Burst)/RatePerSecond from the first to the last.
func (l OutboundLimit) Turn(next, now time.Time) (newNext time.Time, wait time.Duration) {
	g := l.gcra()
	_, due := g.Allowed(next, now, 0)
	return g.Take(next, now, 1), max(due.Sub(now), 0)
}

// Admit is the limit's rule at the moment a call is sent, without a
// reservation: sent is the bucket of calls actually sent (as next in
// Turn). A call may go when it conforms (sent is at most Burst-1
// intervals ahead of now), and then moves it one interval on; otherwise it
// waits the given time and sent is left as it is. Slots reserved by Turn
// are reached when a timer fires and a worker polls, later for some calls
// than for others; Admit, checked just before each call goes, keeps the
// calls as they arrive upstream within the rate too.
func (l OutboundLimit) Admit(sent, now time.Time) (newSent time.Time, wait time.Duration) {
	g := l.gcra()
	if n, due := g.Allowed(sent, now, 1); n == 0 {
		return sent, due.Sub(now)
	}
	return g.Take(sent, now, 1), 0
}

// OutboundPauses bound how long an upstream's Retry-After holds a
// workspace's calls to its host, and how often it may send a node back.
type OutboundPauses struct {
	// Max is the longest a node waits for Retry-Afters, all its rounds
	// together: a 429 or 503 asking for more fails the node (naming this
	// bound), as the answer would without a Retry-After, and pauses
	// nothing.
	Max time.Duration
	// HostsMax is how many hosts a workspace may have paused at once. A
	// Retry-After past it still holds the node that got it, on its own
	// timer, but not the workspace's other calls to that host.
	HostsMax int
	// Floor is the shortest wait a Retry-After buys: one of zero, a date
	// already past or less than Floor waits Floor, so that an upstream
	// answering "Retry-After: 0" cannot have a node call it as fast as the
	// workflow can loop.
	Floor time.Duration
	// Rounds is how many Retry-After answers one node run (each FOR_EACH
	// iteration is one) waits out; the next fails it. Each round is a call
	// to the host and about a dozen events of the run's history. The
	// worker's figure (SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS) is the ceiling;
	// ForQuota lowers it to a workspace's retryAfterRounds.
	Rounds int
	// RoundsBound names the bound Rounds is, for the error that fails a
	// node past it; empty is the worker's variable.
	RoundsBound string
}

// roundsVariable names the worker's ceiling on Retry-After rounds.
const roundsVariable = "SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS"

// ForQuota is p for a workspace whose retryAfterRounds quota is rounds:
// its rounds are the quota's, or the worker's ceiling when that is lower
// (or the quota unset, zero), each named as the bound.
func (p OutboundPauses) ForQuota(rounds int) OutboundPauses {
	p = p.WithDefaults()
	if rounds > 0 && rounds <= p.Rounds {
		p.Rounds, p.RoundsBound = rounds, "the workspace's retryAfterRounds quota"
	}
	return p
}

// DefaultOutboundPauses waits at most 5 minutes in all per node, at least
// 1 s per Retry-After and at most 10 rounds, with at most 100 hosts paused
// per workspace: a host answering "Retry-After: 0" for ever sees 11 calls
// a node, and the node fails after about 10 s.
func DefaultOutboundPauses() OutboundPauses {
	return OutboundPauses{Max: 5 * time.Minute, HostsMax: 100, Floor: time.Second, Rounds: 10}
}

// RetryAfterRound is one Retry-After answer as the rule reads it.
type RetryAfterRound struct {
	// Host is the host that answered.
	Host string
	// Status is its answer's status code.
	Status int
	// Asked is the wait its Retry-After asked for (zero for a date
	// already past).
	Asked time.Duration
	// Round is the answer's number for the node run, from 1.
	Round int
	// Waited is what the run's earlier rounds waited in all.
	Waited time.Duration
}

// RetryAfterExhaustedError is a node run's Retry-After round past one of
// OutboundPauses' bounds: the node fails with it.
type RetryAfterExhaustedError struct {
	RetryAfterRound
	// Bound names the bound passed, with its variable.
	Bound string
	// Wait is what this round would have waited.
	Wait time.Duration
}

// Error names the host, its status, the round and the bound passed.
func (e *RetryAfterExhaustedError) Error() string {
	return fmt.Sprintf("%s answered %d with a Retry-After for the %s time (asking for %s, a wait of %s): %s",
		e.Host, e.Status, ordinal(e.Round), e.Asked, e.Wait, e.Bound)
}

// Wait is OutboundPauses' rule for one Retry-After round: how long the
// node waits before it calls again (the wait asked for, at least Floor),
// or a RetryAfterExhaustedError when the round is past Rounds or the wait
// would take the run's waits past Max.
func (p OutboundPauses) Wait(r RetryAfterRound) (time.Duration, error) {
	wait := max(r.Asked, p.Floor)
	switch {
	case r.Round > p.Rounds:
		return 0, &RetryAfterExhaustedError{RetryAfterRound: r, Wait: wait,
			Bound: fmt.Sprintf("Retry-After rounds exhausted, over the maximum of %d a node (%s)", p.Rounds, cmp.Or(p.RoundsBound, roundsVariable))}
	case r.Waited+wait > p.Max:
		return 0, &RetryAfterExhaustedError{RetryAfterRound: r, Wait: wait,
			Bound: fmt.Sprintf("Retry-After waits too long: waiting would take the node's Retry-After waits to %s, over the maximum of %s (SLUICE_OUTBOUND_PAUSE_MAX)", r.Waited+wait, p.Max)}
	}
	return wait, nil
}

// CheckOutboundLimits refuses one more host limit when the workspace
// already keeps max of them.
func CheckOutboundLimits(stored, maxLimits int) error {
	if stored >= maxLimits {
		return &QuotaError{Quota: "outbound host limits", Limit: maxLimits}
	}
	return nil
}

// WithDefaults fills unset bounds with DefaultOutboundPauses'.
func (p OutboundPauses) WithDefaults() OutboundPauses {
	d := DefaultOutboundPauses()
	if p.Max <= 0 {
		p.Max = d.Max
	}
	if p.HostsMax <= 0 {
		p.HostsMax = d.HostsMax
	}
	if p.Floor <= 0 {
		p.Floor = d.Floor
	}
	if p.Rounds <= 0 {
		p.Rounds = d.Rounds
	}
	return p
}

// ordinal spells n as "1st", "2nd", "3rd", "11th".
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
