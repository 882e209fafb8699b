package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// startGate holds the dispatcher's Temporal starts in flight to the
// adaptive limit (domain.StartLimit), which every returning start moves:
// the batch being started and the one claimed behind it share it.
type startGate struct {
	mu       sync.Mutex
	limit    *domain.StartLimit
	inFlight int
	// freed is closed, and replaced, whenever a start returns, so that a
	// start waiting for a slot looks again.
	freed chan struct{}
	gauge prometheus.Gauge
}

func newStartGate(floor, ceiling int, gauge prometheus.Gauge) *startGate {
	g := &startGate{limit: domain.NewStartLimit(floor, ceiling), freed: make(chan struct{}), gauge: gauge}
	g.gauge.Set(float64(g.limit.Limit()))
	return g
}

// acquire waits for a slot and returns how many starts are in flight with
// this one.
func (g *startGate) acquire() int {
	for {
		g.mu.Lock()
		if g.inFlight < g.limit.Limit() {
			g.inFlight++
			n := g.inFlight
			g.mu.Unlock()
			return n
		}
		freed := g.freed
		g.mu.Unlock()
		<-freed
	}
}

// release frees the slot of a start that began with inFlight starts in
// flight and returned err after took; the limit learns from it, unless no
// call was made or the dispatcher itself cancelled it.
func (g *startGate) release(inFlight int, took time.Duration, err error, called bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	if called && !errors.Is(err, context.Canceled) {
		g.limit.Observe(domain.StartSample{Latency: took, Overloaded: startOverloaded(err), InFlight: inFlight})
		g.gauge.Set(float64(g.limit.Limit()))
	}
	close(g.freed)
	g.freed = make(chan struct{})
}

// startOverloaded says whether a start's error is Temporal falling behind
// or away (a timeout, an unavailable server) rather than a refusal of the
// start itself.
func startOverloaded(err error) bool {
	return errors.Is(err, ports.ErrEngineTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ports.ErrEngineUnavailable)
}
