package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// fakeStore is an in-memory DispatchStore for the loop's unit tests: it
// hands out one pending item per Claim until it has none, and can be told
// to fail.
type fakeStore struct {
	ports.DispatchStore
	mu         sync.Mutex
	pending    int
	failClaims int
	claims     int
	dispatched []ports.DispatchedItem
	released   []ports.QueueTransition
	panicOnce  bool
}

func (f *fakeStore) Claim(_ context.Context, _ ports.Fence, _ map[domain.Plan]int, admit ports.AdmitFunc, _ ports.RejectFunc) (ports.ClaimResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	if f.panicOnce {
		f.panicOnce = false
		panic("boom")
	}
	if f.failClaims > 0 {
		f.failClaims--
		return ports.ClaimResult{}, errors.New("connection refused")
	}
	if f.pending == 0 {
		return ports.ClaimResult{}, nil
	}
	ws := domain.ID(uuid.New())
	if admit([]ports.PendingWorkspace{{ID: ws, Plan: domain.PlanFree, Running: map[domain.ID]bool{}}})[ws] == 0 {
		return ports.ClaimResult{}, nil
	}
	f.pending--
	now := time.Now()
	item := ports.ClaimedItem{
		QueueItem:   domain.QueueItem{ID: domain.ID(uuid.New()), WorkspaceID: ws, QueueState: domain.QueueState{Status: domain.QueueClaimed, ClaimedAt: &now}},
		ExecutionID: domain.ID(uuid.New()), Version: 1,
	}
	return ports.ClaimResult{Claimed: []ports.ClaimedItem{item}, Workspaces: 1}, nil
}

func (f *fakeStore) MarkDispatched(_ context.Context, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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
			f.pending++
		}
		f.released = append(f.released, t)
	}
	return ids, nil
}

func (f *fakeStore) StaleClaimed(context.Context, time.Duration, int) ([]domain.QueueItem, error) {
	return nil, nil
}

func (f *fakeStore) RunningAdmittedBefore(context.Context, time.Duration, ports.ExecutionCursor, int) ([]domain.Execution, error) {
	return nil, nil
}

func (f *fakeStore) PurgeIdempotencyKeys(context.Context) (int64, error) { return 0, nil }

func (f *fakeStore) dispatchedNow() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dispatched)
}

type okEngine struct{ ports.WorkflowEngine }

func (okEngine) StartWorkflow(context.Context, ports.WorkflowStart) error { return nil }

// fakeLease is held by someone else until released.
type fakeLease struct {
	mu   sync.Mutex
	held bool
}

func (l *fakeLease) TryAcquire(context.Context, string, time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.held, nil
}

func (l *fakeLease) Release(context.Context, string, time.Duration) error { return nil }

func (l *fakeLease) Holder() string { return "test" }

type chanWakeups chan struct{}

func (c chanWakeups) C() <-chan struct{} { return c }

func newTestDispatcher(store *fakeStore, lease ports.Lease, wake ports.Wakeups, cfg DispatcherConfig) (*Dispatcher, *DispatchMetrics) {
	return newTestDispatcherWith(store, okEngine{}, lease, wake, cfg)
}

func newTestDispatcherWith(store *fakeStore, engine ports.WorkflowEngine, lease ports.Lease, wake ports.Wakeups, cfg DispatcherConfig) (*Dispatcher, *DispatchMetrics) {
	m := NewDispatchMetrics(prometheus.NewRegistry())
	return NewDispatcher(store, nil, engine, lease, wake, domain.DefaultTierPolicy(), cfg,
		m, slog.New(slog.NewTextHandler(io.Discard, nil))), m
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunSurvivesDatabaseErrorsAndPanics(t *testing.T) {
	t.Parallel()
	store := &fakeStore{pending: 3, failClaims: 2, panicOnce: true}
	cfg := DefaultDispatcherConfig()
	cfg.PollInterval = 10 * time.Millisecond
	cfg.Exclusive = false
	d, m := newTestDispatcher(store, &fakeLease{}, chanWakeups(make(chan struct{})), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	waitUntil(t, "all items dispatched despite the errors", func() bool { return store.dispatchedNow() == 3 })
	cancel()
	<-done
	if got := testutil.ToFloat64(m.Dispatched); got != 3 {
		t.Errorf("queue_items_dispatched_total = %v, want 3", got)
	}
}

func TestWakeupDispatchesWithoutWaitingForThePoll(t *testing.T) {
	t.Parallel()
	store := &fakeStore{}
	cfg := DefaultDispatcherConfig()
	cfg.PollInterval = time.Hour
	cfg.Exclusive = false
	wake := make(chanWakeups, 1)
	d, _ := newTestDispatcher(store, &fakeLease{}, wake, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	waitUntil(t, "the first, empty cycle", func() bool { store.mu.Lock(); defer store.mu.Unlock(); return store.claims >= 1 })
	store.mu.Lock()
	store.pending = 1
	store.mu.Unlock()
	wake <- struct{}{}
	waitUntil(t, "the woken dispatch", func() bool { return store.dispatchedNow() == 1 })
}

func TestExclusiveDispatcherWaitsForTheLease(t *testing.T) {
	t.Parallel()
	store := &fakeStore{pending: 1}
	lease := &fakeLease{held: true}
	cfg := DefaultDispatcherConfig()
	cfg.PollInterval = 10 * time.Millisecond
	d, m := newTestDispatcher(store, lease, chanWakeups(make(chan struct{})), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	waitUntil(t, "failed lease attempts", func() bool { return testutil.ToFloat64(m.LeaseFailures) >= 3 })
	if store.dispatchedNow() != 0 {
		t.Fatal("dispatched without the lease")
	}
	lease.mu.Lock()
	lease.held = false
	lease.mu.Unlock()
	waitUntil(t, "dispatch once the lease is free", func() bool { return store.dispatchedNow() == 1 })
}

func TestAdmitIsRoundRobinWithinFreeSlots(t *testing.T) {
	t.Parallel()
	cfg := DefaultDispatcherConfig()
	cfg.BatchSize = 7
	d, _ := newTestDispatcher(&fakeStore{}, &fakeLease{}, nil, cfg)
	full := ports.PendingWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanFree, Running: map[domain.ID]bool{domain.ID(uuid.New()): true}}
	pro := ports.PendingWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanPro, Running: map[domain.ID]bool{domain.ID(uuid.New()): true, domain.ID(uuid.New()): true}}
	ent := ports.PendingWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanEnterprise, Running: map[domain.ID]bool{}}
	free := ports.PendingWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanFree, Running: map[domain.ID]bool{}}
	q := d.admit([]ports.PendingWorkspace{full, pro, ent, free})
	if q[full.ID] != 0 {
		t.Errorf("a full workspace got %d", q[full.ID])
	}
	if q[free.ID] != 1 {
		t.Errorf("an idle FREE workspace got %d, want its 1 slot", q[free.ID])
	}
	if q[pro.ID] != 3 {
		t.Errorf("PRO with 2 running got %d, want its 3 free slots", q[pro.ID])
	}
	if q[ent.ID] != 3 {
		t.Errorf("ENTERPRISE got %d, want the rest of the batch (3)", q[ent.ID])
	}
	total := 0
	for _, n := range q {
		total += n
	}
	if total != cfg.BatchSize {
		t.Errorf("quotas sum to %d, want the batch size %d", total, cfg.BatchSize)
	}
	// The next batch starts after the workspace served first this time.
	first := d.lastServed
	d.admit([]ports.PendingWorkspace{full, pro, ent, free})
	if d.lastServed == first {
		t.Error("round-robin did not move on")
	}
}

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

func TestUnavailableTemporalOpensTheBreakerAndFailsNothing(t *testing.T) {
	t.Parallel()
	store := &fakeStore{pending: 5}
	engine := &outageEngine{down: true}
	cfg := DefaultDispatcherConfig()
	cfg.PollInterval = 5 * time.Millisecond
	cfg.Exclusive = false
	cfg.BreakerBackoff = domain.DispatchBackoff{Base: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	d, m := newTestDispatcherWith(store, engine, &fakeLease{}, chanWakeups(make(chan struct{})), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	waitUntil(t, "the breaker to open", func() bool { return d.Ready() != nil })
	if got := testutil.ToFloat64(m.BreakerOpen); got != 1 {
		t.Errorf("dispatcher_temporal_breaker_open = %v while Temporal is down, want 1", got)
	}
	// While open, nothing more is claimed: only the first batch's item
	// was tried, and it was not counted as a failure.
	time.Sleep(100 * time.Millisecond) // several probe periods, to show no claims happen; not synchronisation
	store.mu.Lock()
	claims := store.claims
	store.mu.Unlock()
	if claims != 1 || engine.startsNow() != 1 {
		t.Errorf("while the breaker is open: %d claims and %d starts, want 1 each", claims, engine.startsNow())
	}
	if got := testutil.ToFloat64(m.Failed.WithLabelValues("dispatch_attempts_exhausted")); got != 0 {
		t.Errorf("%v items failed during the outage, want 0", got)
	}
	engine.setDown(false)
	waitUntil(t, "all items dispatched once Temporal is back", func() bool { return store.dispatchedNow() == 5 })
	if err := d.Ready(); err != nil {
		t.Errorf("Ready after recovery: %v", err)
	}
	store.mu.Lock()
	for _, r := range store.released {
		if r.To.DispatchFailures != 0 || r.To.Status != domain.QueuePending {
			t.Errorf("the item caught by the outage was released as %s with %d dispatch failures, want PENDING with 0", r.To.Status, r.To.DispatchFailures)
		}
	}
	store.mu.Unlock()
	if got := testutil.ToFloat64(m.BreakerOpen); got != 0 {
		t.Errorf("dispatcher_temporal_breaker_open = %v after recovery, want 0", got)
	}
	cancel()
	<-done
}

func TestBatchGrowsWhileFullAndShrinksWhenShallow(t *testing.T) {
	t.Parallel()
	cfg := DefaultDispatcherConfig()
	cfg.BatchSize, cfg.MaxBatchSize = 10, 50
	cfg.Exclusive = false
	store := &fakeStore{}
	d, _ := newTestDispatcher(store, &fakeLease{}, nil, cfg)
	if d.batchSize != 10 {
		t.Fatalf("first batch %d, want BatchSize 10", d.batchSize)
	}
	var sizes []int
	for _, full := range []bool{true, true, true, true, false} {
		d.adaptBatch(full)
		sizes = append(sizes, d.batchSize)
	}
	want := []int{20, 40, 50, 50, 10}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("batch sizes %v, want %v", sizes, want)
		}
	}
}

// closedEngine says every workflow completed, with the given result.
type closedEngine struct {
	ports.WorkflowEngine
	status domain.ExecutionStatus
	msg    string
}

func (e closedEngine) DescribeWorkflow(context.Context, domain.ID) (ports.WorkflowState, error) {
	return ports.WorkflowCompleted, nil
}

func (e closedEngine) WorkflowResult(context.Context, domain.ID) (domain.ExecutionStatus, string, error) {
	return e.status, e.msg, nil
}

// pagedStore serves RUNNING executions in pages after a cursor.
type pagedStore struct {
	fakeStore
	running []domain.Execution
	cursors []ports.ExecutionCursor
}

func (s *pagedStore) RunningAdmittedBefore(_ context.Context, _ time.Duration, after ports.ExecutionCursor, limit int) ([]domain.Execution, error) {
	s.cursors = append(s.cursors, after)
	var out []domain.Execution
	for _, e := range s.running {
		if e.AdmittedAt.After(after.AdmittedAt) && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

// finishRecorder records FinishExecution calls.
type finishRecorder struct {
	ports.ExecutionStore
	finished map[domain.ID]domain.ExecutionStatus
}

func (f *finishRecorder) FinishExecution(_ context.Context, id domain.ID, status domain.ExecutionStatus, _ *string, _ ports.SettleFunc, _ ...domain.NodeRecord) (bool, error) {
	f.finished[id] = status
	return true, nil
}

func TestReconcileWalksEveryPageAndRecordsTheWorkflowsResult(t *testing.T) {
	t.Parallel()
	store := &pagedStore{}
	t0 := time.Now().Add(-time.Hour)
	for i := range 5 {
		store.running = append(store.running, domain.Execution{ID: domain.ID(uuid.New()), AdmittedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	rec := &finishRecorder{finished: map[domain.ID]domain.ExecutionStatus{}}
	cfg := DefaultDispatcherConfig()
	cfg.ReconcilePageSize = 2
	// The workflow completed normally, but the DAG it ran failed.
	d := NewDispatcher(store, rec, closedEngine{status: domain.ExecutionFailed, msg: "node a failed"}, &fakeLease{}, nil,
		domain.DefaultTierPolicy(), cfg, NewDispatchMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	for range 3 {
		if _, err := d.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.finished) != 5 {
		t.Fatalf("reconciled %d of 5 executions in 3 pages of 2", len(rec.finished))
	}
	for id, st := range rec.finished {
		if st != domain.ExecutionFailed {
			t.Errorf("execution %s recorded %s, want FAILED from the workflow's result", id, st)
		}
	}
	// The walk wraps around after a short page.
	if _, err := d.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if last := store.cursors[len(store.cursors)-1]; last != (ports.ExecutionCursor{}) {
		t.Errorf("after the last page the walk resumed at %v, want the start", last)
	}
}

// failingStarts is a store whose claims come back with the refusals the
// prefilter counted and whose released items are accepted.
type failingStarts struct {
	*fakeStore
	refused map[domain.Plan]int
	applied []ports.QueueTransition
}

func (f *failingStarts) Claim(ctx context.Context, fence ports.Fence, limits map[domain.Plan]int, admit ports.AdmitFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	res, err := f.fakeStore.Claim(ctx, fence, limits, admit, reject)
	res.Refused = f.refused
	return res, err
}

func (f *failingStarts) ApplyTransitions(_ context.Context, ts []ports.QueueTransition) ([]domain.ID, error) {
	f.applied = append(f.applied, ts...)
	ids := make([]domain.ID, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids, nil
}

type timingOutEngine struct{ ports.WorkflowEngine }

func (timingOutEngine) StartWorkflow(context.Context, ports.WorkflowStart) error {
	return context.DeadlineExceeded
}

func TestFailedStartsAndRefusalsAreCounted(t *testing.T) {
	t.Parallel()
	store := &failingStarts{fakeStore: &fakeStore{pending: 2}, refused: map[domain.Plan]int{domain.PlanFree: 3, domain.PlanPro: 1}}
	m := NewDispatchMetrics(prometheus.NewRegistry())
	d := NewDispatcher(store, nil, timingOutEngine{}, &fakeLease{}, chanWakeups(nil), domain.DefaultTierPolicy(),
		DefaultDispatcherConfig(), m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	res, err := d.DispatchBatch(context.Background())
	if err != nil || res.Released != 1 {
		t.Fatalf("batch = %+v, %v; want the item released for a retry", res, err)
	}
	if got := testutil.ToFloat64(m.DispatchFailures.WithLabelValues(ReasonStartTimeout, OutcomeReleased)); got != 1 {
		t.Errorf("queue_dispatch_failures_total{start_timeout,released} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.AdmissionRefusals.WithLabelValues("FREE")); got != 3 {
		t.Errorf("queue_admission_refusals_total{FREE} = %v, want the 3 the claim counted", got)
	}
	if got := testutil.ToFloat64(m.AdmissionRefusals.WithLabelValues("PRO")); got != 1 {
		t.Errorf("queue_admission_refusals_total{PRO} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.FailuresPerItem); n != 1 {
		t.Errorf("%d failures-per-item series, want 1", n)
	}
}

func TestLeaseReadinessFollowsTheLastAttempt(t *testing.T) {
	t.Parallel()
	cfg := DefaultDispatcherConfig()
	d, m := newTestDispatcher(&fakeStore{}, &fakeLease{held: true}, chanWakeups(nil), cfg)
	if err := d.LeaseReady(); !errors.Is(err, ErrLeaseNotTried) {
		t.Errorf("before any attempt: %v, want ErrLeaseNotTried", err)
	}
	d.beatLease(context.Background())
	if err := d.LeaseReady(); err != nil {
		t.Errorf("a standby whose lease is held elsewhere is not ready: %v", err)
	}
	if got := testutil.ToFloat64(m.LeaseHeld.WithLabelValues(QueueLeaseName)); got != 0 {
		t.Errorf("dispatcher_lease_held = %v for a standby, want 0", got)
	}
	d.lease = brokenLease{}
	d.beatLease(context.Background())
	if err := d.LeaseReady(); err == nil {
		t.Error("ready although the lease query failed")
	}
	d.lease = &fakeLease{}
	d.beatLease(context.Background())
	if err := d.LeaseReady(); err != nil {
		t.Errorf("holder not ready: %v", err)
	}
	if got := testutil.ToFloat64(m.LeaseHeld.WithLabelValues(QueueLeaseName)); got != 1 {
		t.Errorf("dispatcher_lease_held = %v for the holder, want 1", got)
	}
}

type brokenLease struct{}

func (brokenLease) TryAcquire(context.Context, string, time.Duration) (bool, error) {
	return false, errors.New("connection refused")
}

func (brokenLease) Release(context.Context, string, time.Duration) error { return nil }

func (brokenLease) Holder() string { return "broken" }
