package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeStore is an in-memory DispatchStore for the claim loop's tests: it
// hands out one queued item per Claim until it has none, and can be told
// to fail.
type fakeStore struct {
	ports.DispatchStore
	mu         sync.Mutex
	queued     int
	failClaims int
	claims     int
	fences     []ports.Fence
	dispatched []ports.DispatchedItem
	released   []ports.QueueTransition
	panicOnce  bool
	// refused is what every claim reports the prefilter refused.
	refused map[domain.Plan]int
	// ended are the CLAIMED items of ended lease terms, handed out by the
	// next read of them.
	ended []domain.QueueItem
	// endedReadAfter is, for each read of ended terms' claims, how many
	// claims came before it.
	endedReadAfter []int
	// markFences are the fences of the marks, in order.
	markFences []ports.Fence
	// batched makes a claim take up to its budget, not one item.
	batched bool
}

func (f *fakeStore) ClaimsOfEndedTerms(context.Context, int) ([]domain.QueueItem, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endedReadAfter = append(f.endedReadAfter, f.claims)
	ended := f.ended
	f.ended = nil
	return ended, nil
}

func (f *fakeStore) Claim(_ context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, _ ports.RejectFunc) (ports.ClaimResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	f.fences = append(f.fences, fence)
	if f.panicOnce {
		f.panicOnce = false
		panic("boom")
	}
	if f.failClaims > 0 {
		f.failClaims--
		return ports.ClaimResult{}, errors.New("connection refused")
	}
	if f.queued == 0 {
		return ports.ClaimResult{Refused: f.refused}, nil
	}
	n := 1
	if f.batched {
		n = min(budget, f.queued)
	}
	ws := domain.ID(uuid.New())
	candidates := make([]domain.KeyedCandidate, n)
	for i := range candidates {
		candidates[i] = domain.KeyedCandidate{ID: domain.ID(uuid.New())}
	}
	p, err := plan(time.Now(), domain.PoolFigures{}, []ports.ClaimableWorkspace{{ID: ws, Plan: domain.PlanFree, Limit: n}}, budget,
		func(map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
			return map[domain.ID][]domain.KeyedCandidate{ws: candidates}, nil
		})
	if err != nil || len(p.Chosen) == 0 {
		return ports.ClaimResult{Refused: f.refused}, err
	}
	f.queued -= len(p.Chosen)
	now := time.Now()
	res := ports.ClaimResult{Workspaces: 1, Refused: f.refused}
	for _, id := range p.Chosen {
		res.Claimed = append(res.Claimed, ports.ClaimedItem{
			QueueItem:   domain.QueueItem{ID: id, WorkspaceID: ws, QueueState: domain.QueueState{Status: domain.QueueClaimed, ClaimedAt: &now}},
			ExecutionID: domain.ID(uuid.New()), Version: 1, Claimer: fence,
		})
	}
	return res, nil
}

func (f *fakeStore) MarkDispatched(_ context.Context, fence ports.Fence, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.markFences = append(f.markFences, fence)
	f.dispatched = append(f.dispatched, items...)
	out := make([]ports.DispatchedRecord, len(items))
	for i, it := range items {
		out[i] = ports.DispatchedRecord{ID: it.ID, CreatedAt: time.Now(), DispatchedAt: time.Now()}
	}
	return out, nil
}

// ApplyTransitions puts items released to PENDING back in the pile.
func (f *fakeStore) ApplyTransitions(_ context.Context, ts []ports.QueueTransition) ([]domain.ID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]domain.ID, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
		if t.To.Status == domain.QueuePending {
			f.queued++
		}
		f.released = append(f.released, t)
	}
	return ids, nil
}

func (f *fakeStore) counts() (claims, dispatched int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.claims, len(f.dispatched)
}

type okEngine struct{ ports.WorkflowEngine }

func (okEngine) StartWorkflow(context.Context, ports.WorkflowStart) error { return nil }

// outageEngine is a Temporal that is down until brought back: starts,
// describes and health checks fail as unavailable.
type outageEngine struct {
	ports.WorkflowEngine
	mu     sync.Mutex
	down   bool
	starts int
}

func (e *outageEngine) setDown(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down = down
}

func (e *outageEngine) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down {
		return fmt.Errorf("%w: connection refused", ports.ErrEngineUnavailable)
	}
	return nil
}

func (e *outageEngine) StartWorkflow(context.Context, ports.WorkflowStart) error {
	e.mu.Lock()
	e.starts++
	e.mu.Unlock()
	return e.err()
}

func (e *outageEngine) DescribeWorkflow(context.Context, domain.ID) (ports.WorkflowState, error) {
	if err := e.err(); err != nil {
		return "", err
	}
	return ports.WorkflowNotFound, nil
}

func (e *outageEngine) CheckHealth(context.Context) error { return e.err() }

func (e *outageEngine) startsNow() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.starts
}

type chanWakeups chan struct{}

func (c chanWakeups) C() <-chan struct{} { return c }

// testDispatcher is a claim loop on fakes with what a test inspects.
type testDispatcher struct {
	*Dispatcher
	metrics *Metrics
	breaker *Breaker
}

// newTestDispatcher builds a claim loop on store and engine; lease, when
// not nil, makes it exclusive.
func newTestDispatcher(store ports.DispatchStore, engine ports.WorkflowEngine, lease *QueueLease, wake ports.Wakeups, cfg DispatcherConfig) testDispatcher {
	m := NewMetrics(prometheus.NewRegistry())
	b := NewBreaker(cfg.BreakerBackoff, m)
	if wake == nil {
		wake = chanWakeups(nil)
	}
	d := NewDispatcher(DispatcherDeps{
		Store: store, Engine: engine, Wakeups: wake, Lease: lease, Breaker: b, Metrics: m, Log: discardLog(),
	}, cfg)
	return testDispatcher{Dispatcher: d, metrics: m, breaker: b}
}
