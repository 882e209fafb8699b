package dispatch

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// DefaultBreakerBackoff spaces the probes of an unavailable Temporal: the
// first after a second, doubling to 30 s.
var DefaultBreakerBackoff = domain.DispatchBackoff{Base: time.Second, Max: 30 * time.Second}

// Breaker is the dispatcher role's circuit breaker on Temporal. It opens
// when a start fails because Temporal is unavailable; while it is open the
// claim loop claims nothing, so queued items stay PENDING with no failure
// counted, and probes Temporal's health with a doubling backoff until it
// answers. Stale recovery and the reconciler, which ask Temporal too, wait
// for the probe that closes it.
type Breaker struct {
	backoff domain.DispatchBackoff
	metrics *Metrics

	mu      sync.Mutex
	open    bool
	probes  int
	probeAt time.Time
	since   time.Time
	cause   error
}

// NewBreaker builds a closed breaker whose probes follow backoff
// (DefaultBreakerBackoff when its Base is not positive).
func NewBreaker(backoff domain.DispatchBackoff, metrics *Metrics) *Breaker {
	if backoff.Base <= 0 {
		backoff = DefaultBreakerBackoff
	}
	return &Breaker{backoff: backoff, metrics: metrics}
}

// Err describes the open breaker, for readiness; nil while it is closed.
func (b *Breaker) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return nil
	}
	return fmt.Errorf("temporal unavailable since %s, dispatch paused: %w", b.since.Format(time.RFC3339), b.cause)
}

// Trip opens the breaker, or after a failed probe pushes the next probe
// further out.
func (b *Breaker) Trip(now time.Time, cause error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		b.open, b.since, b.probes = true, now, 0
		b.metrics.BreakerOpen.Set(1)
		b.metrics.BreakerTrips.Inc()
	} else if now.Before(b.probeAt) {
		// Another failure of the same outage, not a failed probe.
		b.cause = cause
		return
	}
	b.probes++
	b.cause = cause
	b.probeAt = now.Add(b.backoff.Delay(b.probes))
}

// Reset closes the breaker after a successful probe.
func (b *Breaker) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.probes, b.cause = false, 0, nil
	b.metrics.BreakerOpen.Set(0)
}

// nextProbe says whether the breaker is open and when to probe next.
func (b *Breaker) nextProbe() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.probeAt, b.open
}

// Closed reports whether Temporal may be called: the dispatcher and the
// maintenance jobs that ask Temporal (stale recovery, the reconciler) read
// the one breaker.
func (b *Breaker) Closed() bool {
	_, open := b.nextProbe()
	return !open
}
