package app

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// breaker is the dispatcher's circuit breaker on Temporal. It opens when a
// start fails because Temporal is unavailable; while open, the dispatcher
// claims nothing, so queued items stay PENDING with no failure counted, and
// probes Temporal's health with a doubling backoff until it answers.
type breaker struct {
	backoff domain.DispatchBackoff
	metrics *DispatchMetrics

	mu      sync.Mutex
	open    bool
	probes  int
	probeAt time.Time
	since   time.Time
	cause   error
}

func newBreaker(backoff domain.DispatchBackoff, metrics *DispatchMetrics) *breaker {
	return &breaker{backoff: backoff, metrics: metrics}
}

// trip opens the breaker, or after a failed probe pushes the next probe
// further out.
func (b *breaker) trip(now time.Time, cause error) {
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

// reset closes the breaker after a successful probe.
func (b *breaker) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.probes, b.cause = false, 0, nil
	b.metrics.BreakerOpen.Set(0)
}

// nextProbe says whether the breaker is open and when to probe next.
func (b *breaker) nextProbe() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.probeAt, b.open
}

func (b *breaker) closed() bool {
	_, open := b.nextProbe()
	return !open
}

// err describes the open breaker for readiness, nil when closed.
func (b *breaker) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return nil
	}
	return fmt.Errorf("temporal unavailable since %s, dispatch paused: %w", b.since.Format(time.RFC3339), b.cause)
}
