package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// benchDistantEngine is a Temporal a network away: every start is answered
// after latency, whatever else is in flight (a server with room to
// spare), and the most starts in flight at once are kept.
type benchDistantEngine struct {
	benchEngine
	latency  time.Duration
	mu       sync.Mutex
	inFlight int
	most     int
}

func (e *benchDistantEngine) StartWorkflow(ctx context.Context, _ ports.WorkflowStart) error {
	e.mu.Lock()
	e.inFlight++
	e.most = max(e.most, e.inFlight)
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.inFlight--; e.mu.Unlock() }()
	t := time.NewTimer(e.latency)
	defer t.Stop()
	select {
	case <-t.C: // the network and the server, not synchronisation
		e.starts.Add(1)
		return nil
	case <-ctx.Done():
		return ports.ErrEngineTimeout
	}
}

func (e *benchDistantEngine) mostInFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.most
}

// benchBareStarts is the bare client: callers goroutines call the engine's
// StartWorkflow back to back until n starts have returned, as a client of
// Temporal that starts workflows itself would. It returns the time taken.
func benchBareStarts(b *testing.B, e ports.WorkflowEngine, callers, n int) time.Duration {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := e.StartWorkflow(context.Background(), ports.WorkflowStart{}); err != nil {
					b.Errorf("bare start: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkDispatchDistantTemporal measures what the adaptive start limit
// buys against a Temporal 20 ms away (Temporal Cloud's StartWorkflow p50
// is 14-20 ms), played by a fake of the dispatcher's Temporal port
// (ports.WorkflowEngine) whose every start takes 20 ms. Four contenders
// start against the same fake, interleaved in five rounds, each round a
// fifth of each one's items:
//
//   - bare: 64 callers call StartWorkflow back to back, nothing else;
//   - adaptive: the dispatcher's Run loop, default configuration (starts in
//     flight from 8, adapting up to 128), drains 10,000 PENDING items of 50
//     ENTERPRISE workspaces from the real Postgres store, claim, start and
//     mark, until every one is DISPATCHED;
//   - fixed 8: the same with the limit fixed at 8 (the floor), as the
//     dispatcher was before, on 2,000 items;
//   - at once: the adaptive dispatcher again, on 10,000 items, against a
//     fake that answers at once: the loop with no start latency at all,
//     the store's rate on this machine now.
//
// ENTERPRISE's limit is raised so that no workspace fills: the fake runs
// no workflow, so every dispatched execution stays RUNNING. The target:
// the adaptive dispatcher at 80 % of the bare client or more. The bare
// client spends no Postgres and almost no CPU, so on a loaded machine the
// store binds the dispatcher first: the distant ÷ at-once ratio then says
// what the 20 ms cost the dispatcher (at 100 % or more, nothing: with
// instant starts the marking of one batch meets the next claim head on,
// where 20 ms of starts stagger the two).
func BenchmarkDispatchDistantTemporal(b *testing.B) {
	benchRequireDB(b)
	const (
		latency = 20 * time.Millisecond
		callers = 64
	)
	const rounds = 5
	items, fixedItems := benchSize(10_000, 300), benchSize(2_000, 100)
	bareItems := items

	// A dispatching contender has a database of its own, seeded with the
	// workspaces and their history; each of its rounds adds its share of
	// items and runs the loop until every item so far is DISPATCHED, so
	// that no start is in flight when the loop stops.
	type contender struct {
		db      *benchDB
		ws      []domain.ID
		defs    []domain.ID
		d       *dispatch.Dispatcher
		metrics *dispatch.Metrics
		engine  *benchDistantEngine
		phases  *benchPhases
		total   int
		m       benchMeter
	}
	open := func(cfg dispatch.DispatcherConfig, n int, latency time.Duration) *contender {
		c := &contender{db: benchOpenDB(b), engine: &benchDistantEngine{latency: latency}, phases: &benchPhases{}}
		c.ws, c.defs = c.db.workspaces(b, domain.PlanEnterprise, benchWorkspaceCount)
		c.db.history(b, c.ws, c.defs, benchHistory)
		if _, err := c.db.aux.Exec(context.Background(), "UPDATE plans SET max_running = $1 WHERE name = 'ENTERPRISE'", n); err != nil {
			b.Fatal(err)
		}
		c.db.vacuumAnalyze(b)
		c.d, c.metrics = c.db.dispatcherOn(b, cfg, nil, c.phases, c.engine)
		return c
	}
	drain := func(c *contender, share int) {
		c.db.items(b, c.ws, c.defs, share, 2, time.Minute)
		c.total += share
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		start := time.Now()
		go func() { defer close(ran); c.d.Run(ctx) }()
		porttest.Eventually(b, 5*time.Minute, porttest.Holds(fmt.Sprintf("all %d items to be DISPATCHED", c.total), func() bool {
			return c.engine.starts.Load() == int64(c.total) && c.db.countStatus(b, "DISPATCHED") == c.total
		}))
		c.m.add(share, time.Since(start))
		cancel()
		<-ran
	}

	var bareM benchMeter
	bareEngine := &benchDistantEngine{latency: latency}
	adaptiveC := open(dispatch.DefaultDispatcherConfig(), items, latency)
	fixedCfg := dispatch.DefaultDispatcherConfig()
	fixedCfg.MaxStartConcurrency = fixedCfg.StartConcurrency
	fixedC := open(fixedCfg, fixedItems, latency)
	atOnceC := open(dispatch.DefaultDispatcherConfig(), items, 0)
	benchInterleave(rounds, []func(){
		func() { bareM.add(bareItems/rounds, benchBareStarts(b, bareEngine, callers, bareItems/rounds)) },
		func() { drain(adaptiveC, items/rounds) },
		func() { drain(fixedC, fixedItems/rounds) },
		func() { drain(atOnceC, items/rounds) },
	})
	if b.Failed() {
		return
	}
	bare, adaptive, fixed, atOnce := bareM.rate(), adaptiveC.m.rate(), fixedC.m.rate(), atOnceC.m.rate()
	adaptiveMost, adaptiveLimit := adaptiveC.engine.mostInFlight(), int(testutil.ToFloat64(adaptiveC.metrics.StartLimit))
	fixedMost := fixedC.engine.mostInFlight()
	adaptivePhases, adaptiveStmts := adaptiveC.phases, adaptiveC.db.tracer.report(adaptiveC.phases.batches.Load())
	atOncePhases, atOnceStmts := atOnceC.phases, atOnceC.db.tracer.report(atOnceC.phases.batches.Load())
	for _, c := range []*contender{adaptiveC, fixedC, atOnceC} {
		c.db.close()
	}
	bareTook := bareM.took

	defaults := dispatch.DefaultDispatcherConfig()
	ratio := 100 * adaptive / bare
	benchMetric(b, bare, "bare_starts/s")
	benchMetric(b, adaptive, "adaptive_items/s")
	benchMetric(b, fixed, "fixed_items/s")
	benchMetric(b, ratio, "adaptive/bare_%")
	benchMetric(b, atOnce, "at_once_items/s")
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== dispatch against a distant Temporal: a fake start port answering every start after %v; contenders interleaved in %d rounds ==\n", latency, rounds)
	fmt.Fprintf(&sb, "bare client, %d callers:                      %7.0f starts/s (%d starts in %v)\n", callers, bare, bareItems, bareTook.Round(time.Millisecond))
	fmt.Fprintf(&sb, "dispatcher, adaptive limit %d to %d:          %7.0f items/s (%d items; %d starts in flight at most, limit %d at the end)  adaptive/bare %5.1f %%  [target >= 80 %%: %s]\n",
		defaults.StartConcurrency, defaults.MaxStartConcurrency, adaptive, items, adaptiveMost, adaptiveLimit, ratio, benchVerdict(ratio >= 80))
	fmt.Fprintf(&sb, "    adaptive %s\n    adaptive %s\n", adaptivePhases, adaptiveStmts)
	fmt.Fprintf(&sb, "dispatcher, limit fixed at %d:                 %7.0f items/s (%d items; %d starts in flight at most)  fixed/bare %5.1f %%\n",
		fixedCfg.StartConcurrency, fixed, fixedItems, fixedMost, 100*fixed/bare)
	fmt.Fprintf(&sb, "dispatcher, adaptive, a Temporal that answers at once: %7.0f items/s (%d items; no start latency at all)  distant/at once %5.1f %%\n",
		atOnce, items, 100*adaptive/atOnce)
	fmt.Fprintf(&sb, "    at once %s\n    at once %s\n", atOncePhases, atOnceStmts)
	benchPrint(sb.String())
}
