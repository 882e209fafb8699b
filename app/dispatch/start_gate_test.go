package dispatch

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/ports"
)

// latencyEngine is a Temporal whose starts take latency(in flight) each:
// a fixed round trip, or one that grows with the starts in flight, as a
// server whose matching or workers fall behind answers.
type latencyEngine struct {
	ports.WorkflowEngine
	latency  func(inFlight int) time.Duration
	mu       sync.Mutex
	inFlight int
	most     int
}

func (e *latencyEngine) StartWorkflow(ctx context.Context, _ ports.WorkflowStart) error {
	e.mu.Lock()
	e.inFlight++
	e.most = max(e.most, e.inFlight)
	took := e.latency(e.inFlight)
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.inFlight--; e.mu.Unlock() }()
	select {
	case <-time.After(took): // the server's answer, in the bubble's time
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestStartLimitAdaptsToTheServersLatency drains 3,000 items through the
// loop against a server 20 ms away. Whose latency stays put, the starts in
// flight rise from the floor (8) to the ceiling (64), and the gauge says
// so; whose latency grows by a millisecond per start in flight (a server
// falling behind), they stay well below the ceiling.
func TestStartLimitAdaptsToTheServersLatency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		latency func(int) time.Duration
		check   func(most, limit int) bool
		want    string
	}{
		{"steady 20 ms", func(int) time.Duration { return 20 * time.Millisecond },
			func(most, limit int) bool { return most == 64 && limit == 64 }, "64 in flight at most and a limit of 64"},
		{"20 ms plus 1 ms per start in flight", func(n int) time.Duration { return 20*time.Millisecond + time.Duration(n)*time.Millisecond },
			func(most, limit int) bool { return most > 8 && most < 48 && limit < 48 }, "more than the floor 8 in flight, and fewer than 48 with a limit below 48"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const items = 3000
				store := &fakeStore{queued: items, batched: true}
				cfg := nonExclusive()
				cfg.BatchSize, cfg.MaxBatchSize, cfg.StartConcurrency, cfg.MaxStartConcurrency = 10, 200, 8, 64
				engine := &latencyEngine{latency: tc.latency}
				d := newTestDispatcher(store, engine, nil, nil, cfg)
				stop := runLoops(d.Run)
				defer stop()
				for {
					synctest.Wait()
					if _, n := store.counts(); n == items {
						break
					}
					time.Sleep(10 * time.Millisecond) // the bubble's time: the loop runs this long
				}
				limit := int(testutil.ToFloat64(d.metrics.StartLimit))
				engine.mu.Lock()
				most := engine.most
				engine.mu.Unlock()
				if !tc.check(most, limit) {
					t.Errorf("%d starts in flight at most, limit %d at the end; want %s", most, limit, tc.want)
				}
			})
		})
	}
}
