package domain

import (
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
// workspace's calls to its host.
type OutboundPauses struct {
	// Max is the longest Retry-After a node waits for: a 429 or 503 asking
	// for longer fails the node (naming this bound), as the answer would
	// without a Retry-After, and pauses nothing.
	Max time.Duration
	// HostsMax is how many hosts a workspace may have paused at once. A
	// Retry-After past it still holds the node that got it, on its own
	// timer, but not the workspace's other calls to that host.
	HostsMax int
}

// DefaultOutboundPauses waits at most 5 minutes per Retry-After, with at
// most 100 hosts paused per workspace.
func DefaultOutboundPauses() OutboundPauses {
	return OutboundPauses{Max: 5 * time.Minute, HostsMax: 100}
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
	return p
}
