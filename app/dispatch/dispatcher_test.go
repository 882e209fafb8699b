package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// The loop's tests run in a synctest bubble: time is fake and advances only
// when every goroutine in the bubble is blocked, so a test's time.Sleep
// lets the loop run exactly that long, and synctest.Wait returns once it
// has settled.

func nonExclusive() DispatcherConfig {
	cfg := DefaultDispatcherConfig()
	cfg.Exclusive = false
	return cfg
}

// runLoops runs each loop until the returned stop is called.
func runLoops(loops ...func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(loops))
	for _, loop := range loops {
		go func() { loop(ctx); done <- struct{}{} }()
	}
	return func() {
		cancel()
		for range loops {
			<-done
		}
	}
}

func TestRunSurvivesDatabaseErrorsAndPanics(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{queued: 3, failClaims: 2, panicOnce: true}
		cfg := nonExclusive()
		cfg.PollInterval = 10 * time.Millisecond
		d := newTestDispatcher(store, okEngine{}, nil, nil, cfg)
		stop := runLoops(d.Run)
		time.Sleep(time.Second)
		synctest.Wait()
		stop()
		if _, n := store.counts(); n != 3 {
			t.Fatalf("%d items dispatched, want all 3 despite a panic and two failed claims", n)
		}
		if got := testutil.ToFloat64(d.metrics.Dispatched); got != 3 {
			t.Errorf("queue_items_dispatched_total = %v, want 3", got)
		}
	})
}

func TestWakeupDispatchesWithoutWaitingForThePoll(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{}
		cfg := nonExclusive()
		cfg.PollInterval = time.Hour
		wake := make(chanWakeups, 1)
		d := newTestDispatcher(store, okEngine{}, nil, wake, cfg)
		stop := runLoops(d.Run)
		defer stop()
		synctest.Wait()
		if claims, _ := store.counts(); claims != 1 {
			t.Fatalf("%d claims before any wake-up, want the first, empty one", claims)
		}
		store.mu.Lock()
		store.queued = 1
		store.mu.Unlock()
		wake <- struct{}{}
		synctest.Wait()
		if _, n := store.counts(); n != 1 {
			t.Fatalf("%d dispatched after the wake-up, want 1 with no time passing", n)
		}
	})
}

func TestExclusiveDispatcherClaimsOnlyWhileHoldingTheLeaseAndFencesTheClaim(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{queued: 1}
		shed := apptest.NewLease()
		shed.SetOther(QueueLeaseName, true)
		lm := NewLeaseMetrics(prometheus.NewRegistry())
		lease := NewQueueLease(shed, QueueLeaseTTL, lm, discardLog())
		cfg := DefaultDispatcherConfig()
		cfg.PollInterval = time.Hour // only the lease's gain may wake the loop
		d := newTestDispatcher(store, okEngine{}, lease, nil, cfg)
		stop := runLoops(lease.Run, d.Run)
		defer stop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if claims, _ := store.counts(); claims != 0 {
			t.Fatalf("%d claims while another dispatcher held the lease", claims)
		}
		shed.SetOther(QueueLeaseName, false)
		time.Sleep(QueueLeaseTTL / 5)
		synctest.Wait()
		if _, n := store.counts(); n != 1 {
			t.Fatalf("%d dispatched once the lease was gained, want 1 at once", n)
		}
		store.mu.Lock()
		fence := store.fences[0]
		store.mu.Unlock()
		if want := (ports.Fence{Lease: QueueLeaseName, Holder: shed.Holder(), Term: lease.Fence().Term}); fence != want || want.Term.IsZero() {
			t.Errorf("claim fenced by %+v, want %+v: the lease in the term the heartbeat holds it in", fence, want)
		}
	})
}

func TestClaimFindingTheLeaseLostStopsClaimingUntilRegained(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &lostLeaseStore{fakeStore: &fakeStore{queued: 1}}
		shed := apptest.NewLease()
		lm := NewLeaseMetrics(prometheus.NewRegistry())
		lease := NewQueueLease(shed, QueueLeaseTTL, lm, discardLog())
		cfg := DefaultDispatcherConfig()
		cfg.PollInterval = 10 * time.Millisecond
		d := newTestDispatcher(store, okEngine{}, lease, nil, cfg)
		stop := runLoops(lease.Run, d.Run)
		defer stop()
		synctest.Wait()
		if lease.Holding() {
			t.Fatal("still holding after the claim found the lease lost")
		}
		// Polls pass without claims until the heartbeat takes it again.
		time.Sleep(time.Second)
		synctest.Wait()
		if claims, _ := store.counts(); claims != 1 {
			t.Fatalf("%d claims before the heartbeat regained the lease, want 1", claims)
		}
		time.Sleep(QueueLeaseTTL / 5)
		synctest.Wait()
		if _, n := store.counts(); n != 1 {
			t.Fatalf("%d dispatched after the lease was regained, want 1", n)
		}
	})
}

// lostLeaseStore's first claim finds the queue lease taken over.
type lostLeaseStore struct {
	*fakeStore
	lost bool
}

func (s *lostLeaseStore) Claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	if !s.lost {
		s.lost = true
		s.mu.Lock()
		s.claims++
		s.mu.Unlock()
		return ports.ClaimResult{}, ports.ErrLeaseLost
	}
	return s.fakeStore.Claim(ctx, fence, budget, plan, reject)
}

func TestUnavailableTemporalOpensTheBreakerAndFailsNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{queued: 5}
		engine := &outageEngine{down: true}
		cfg := nonExclusive()
		cfg.PollInterval = 5 * time.Millisecond
		cfg.BreakerBackoff = domain.DispatchBackoff{Base: 20 * time.Millisecond, Max: 50 * time.Millisecond}
		d := newTestDispatcher(store, engine, nil, nil, cfg)
		stop := runLoops(d.Run)
		defer stop()
		time.Sleep(time.Second)
		synctest.Wait()
		if d.breaker.Err() == nil {
			t.Fatal("breaker closed while Temporal is down")
		}
		if got := testutil.ToFloat64(d.metrics.BreakerOpen); got != 1 {
			t.Errorf("dispatcher_temporal_breaker_open = %v while Temporal is down, want 1", got)
		}
		// While open, nothing more is claimed: only the first batch's item
		// was tried, and it was not counted as a failure.
		if claims, _ := store.counts(); claims != 1 || engine.startsNow() != 1 {
			t.Errorf("while the breaker is open: %d claims and %d starts, want 1 each", claims, engine.startsNow())
		}
		if got := testutil.ToFloat64(d.metrics.Failed.WithLabelValues("dispatch_attempts_exhausted")); got != 0 {
			t.Errorf("%v items failed during the outage, want 0", got)
		}
		if got := testutil.ToFloat64(d.metrics.DispatchFailures.WithLabelValues(ReasonTemporalUnavailable, OutcomeHeld)); got != 1 {
			t.Errorf("queue_dispatch_failures_total{temporal_unavailable,held} = %v during the outage, want the 1 start that met it", got)
		}
		engine.setDown(false)
		time.Sleep(time.Second)
		synctest.Wait()
		if _, n := store.counts(); n != 5 {
			t.Fatalf("%d dispatched once Temporal is back, want 5", n)
		}
		if err := d.breaker.Err(); err != nil {
			t.Errorf("breaker after recovery: %v", err)
		}
		store.mu.Lock()
		for _, r := range store.released {
			if r.To.DispatchFailures != 0 || r.To.Status != domain.QueuePending {
				t.Errorf("the item caught by the outage was released as %s with %d dispatch failures, want PENDING with 0", r.To.Status, r.To.DispatchFailures)
			}
		}
		store.mu.Unlock()
		if got := testutil.ToFloat64(d.metrics.BreakerOpen); got != 0 {
			t.Errorf("dispatcher_temporal_breaker_open = %v after recovery, want 0", got)
		}
	})
}

func TestBatchGrowsWhileFullAndShrinksWhenShallow(t *testing.T) {
	t.Parallel()
	cfg := nonExclusive()
	cfg.BatchSize, cfg.MaxBatchSize = 10, 50
	d := newTestDispatcher(&fakeStore{}, okEngine{}, nil, nil, cfg)
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

type timingOutEngine struct{ ports.WorkflowEngine }

func (timingOutEngine) StartWorkflow(context.Context, ports.WorkflowStart) error {
	return context.DeadlineExceeded
}

func TestFailedStartsAndRefusalsAreCounted(t *testing.T) {
	t.Parallel()
	store := &fakeStore{queued: 2, refused: map[domain.Plan]int{domain.PlanFree: 3, domain.PlanPro: 1}}
	d := newTestDispatcher(store, timingOutEngine{}, nil, nil, DefaultDispatcherConfig())
	res, err := d.DispatchBatch(context.Background())
	if err != nil || res.Released != 1 {
		t.Fatalf("batch = %+v, %v; want the item released for a retry", res, err)
	}
	if got := testutil.ToFloat64(d.metrics.DispatchFailures.WithLabelValues(ReasonStartTimeout, OutcomeReleased)); got != 1 {
		t.Errorf("queue_dispatch_failures_total{start_timeout,released} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(d.metrics.AdmissionRefusals.WithLabelValues("FREE")); got != 3 {
		t.Errorf("queue_admission_refusals_total{FREE} = %v, want the 3 the claim counted", got)
	}
	if got := testutil.ToFloat64(d.metrics.AdmissionRefusals.WithLabelValues("PRO")); got != 1 {
		t.Errorf("queue_admission_refusals_total{PRO} = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(d.metrics.FailuresPerItem); n != 1 {
		t.Errorf("%d failures-per-item series, want 1", n)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.released) != 1 || store.released[0].To.Status != domain.QueuePending || store.released[0].DropExecution == nil {
		t.Errorf("released %+v, want the item back to PENDING with its execution dropped", store.released)
	}
}

func TestCyclesAreCountedWhileTheQueueIsEmpty(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{}
		cfg := nonExclusive()
		cfg.PollInterval = 10 * time.Millisecond
		d := newTestDispatcher(store, okEngine{}, nil, nil, cfg)
		stop := runLoops(d.Run)
		time.Sleep(time.Second)
		synctest.Wait()
		stop()
		claims, dispatched := store.counts()
		if dispatched != 0 {
			t.Fatalf("%d dispatched from an empty queue", dispatched)
		}
		// One cycle at the start, then one per poll tick.
		if got := testutil.ToFloat64(d.metrics.Cycles); got < 100 || int(got) != claims {
			t.Errorf("queue_dispatch_cycles_total = %v after 1 s of 10 ms polls with %d empty claims, want every cycle (at least 100) counted", got, claims)
		}
	})
}

func TestStartFailuresAreCountedByBoundedReason(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: %w: deadline", ports.ErrEngineUnavailable, ports.ErrEngineTimeout), ReasonStartTimeout},
		{context.DeadlineExceeded, ReasonStartTimeout},
		{fmt.Errorf("%w: connection refused", ports.ErrEngineUnavailable), ReasonTemporalUnavailable},
		{errors.New("input too large"), ReasonStartError},
	}
	for _, c := range cases {
		if got := startFailureReason(c.err); got != c.want {
			t.Errorf("startFailureReason(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestDispatchedExecutionIsLoggedWithItsItem(t *testing.T) {
	t.Parallel()
	var logs porttest.JSONLog
	store := &fakeStore{queued: 1}
	d := newTestDispatcher(store, okEngine{}, nil, nil, DefaultDispatcherConfig())
	d.log = slog.New(slog.NewJSONHandler(&logs, nil))
	if _, err := d.DispatchBatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	item := store.dispatched[0]
	store.mu.Unlock()
	line := logs.Record(t, "dispatched execution")
	if line["level"] != "INFO" || line["queue_item_id"] != item.ID.String() || line["execution_id"] != item.ExecutionID.String() {
		t.Errorf("dispatched execution logged as %v, want INFO with queue item %s and execution %s", line, item.ID, item.ExecutionID)
	}
}

// gatedEngine holds every start until release lets it return, and keeps
// the most starts it saw in flight at once.
type gatedEngine struct {
	ports.WorkflowEngine
	release  chan struct{}
	mu       sync.Mutex
	inFlight int
	most     int
}

func (e *gatedEngine) StartWorkflow(ctx context.Context, _ ports.WorkflowStart) error {
	e.mu.Lock()
	e.inFlight++
	e.most = max(e.most, e.inFlight)
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.inFlight--; e.mu.Unlock() }()
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *gatedEngine) counts() (inFlight, most int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inFlight, e.most
}

// TestNextBatchIsClaimedWhileThePreviousStartsWithinTheStartConcurrency:
// while batches' starts are in flight the loop claims the next batch as
// soon as the last one's starts all hold a slot, so one batch at most
// waits for a slot, and the batches' starts share StartConcurrency (fixed
// here: floor and ceiling 2).
func TestNextBatchIsClaimedWhileThePreviousStartsWithinTheStartConcurrency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{queued: 5}
		cfg := nonExclusive()
		cfg.BatchSize, cfg.MaxBatchSize, cfg.StartConcurrency, cfg.MaxStartConcurrency = 1, 1, 2, 2
		engine := &gatedEngine{release: make(chan struct{})}
		d := newTestDispatcher(store, engine, nil, nil, cfg)
		stop := runLoops(d.Run)
		defer stop()
		synctest.Wait()
		claims, dispatched := store.counts()
		if inFlight, _ := engine.counts(); claims != 3 || inFlight != 2 || dispatched != 0 {
			t.Fatalf("with the first starts held: %d claims, %d starts in flight, %d dispatched; want 3 (the third waiting for a slot), 2, 0",
				claims, inFlight, dispatched)
		}
		for range 5 {
			engine.release <- struct{}{}
		}
		synctest.Wait()
		if _, n := store.counts(); n != 5 {
			t.Fatalf("%d dispatched, want all 5", n)
		}
		if _, most := engine.counts(); most != 2 {
			t.Errorf("at most %d starts in flight, want StartConcurrency 2", most)
		}
	})
}

// slowFirstEngine holds the first start until release is closed and
// answers every other start at once.
type slowFirstEngine struct {
	ports.WorkflowEngine
	release chan struct{}
	mu      sync.Mutex
	starts  int
}

func (e *slowFirstEngine) StartWorkflow(ctx context.Context, _ ports.WorkflowStart) error {
	e.mu.Lock()
	e.starts++
	first := e.starts == 1
	e.mu.Unlock()
	if !first {
		return nil
	}
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// An item enqueued while an earlier batch's start is slow is claimed,
// started and marked DISPATCHED without waiting for that start: the loop
// waits for no batch's starts to return before it sleeps or claims again.
func TestAnItemClaimedWhileAnotherBatchsStartIsSlowIsMarkedWithoutWaitingForIt(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{queued: 1}
		cfg := nonExclusive()
		cfg.PollInterval = time.Hour
		wake := make(chanWakeups, 1)
		engine := &slowFirstEngine{release: make(chan struct{})}
		d := newTestDispatcher(store, engine, nil, wake, cfg)
		stop := runLoops(d.Run)
		defer stop()
		synctest.Wait()
		if claims, n := store.counts(); claims != 1 || n != 0 {
			t.Fatalf("%d claims, %d dispatched with the first start held; want 1, 0", claims, n)
		}
		store.mu.Lock()
		store.queued = 1
		store.mu.Unlock()
		wake <- struct{}{}
		synctest.Wait()
		if claims, n := store.counts(); claims != 2 || n != 1 {
			t.Fatalf("after a wake-up with the first start still held: %d claims, %d dispatched; want 2, 1 (the second item, with no time passing)", claims, n)
		}
		close(engine.release)
		synctest.Wait()
		if _, n := store.counts(); n != 2 {
			t.Fatalf("%d dispatched once the slow start returned, want 2", n)
		}
	})
}

// An item is marked DISPATCHED without waiting for the slowest start of
// its batch: here, where markings take no time, as soon as its own start
// returns (TestASlowStartHoldsItsBatchsOtherMarkingsBackByOneMarkingsTimeAtMost
// shows the bound when they take some).
func TestAnItemIsMarkedWhenItsOwnStartReturnsNotItsBatchsSlowest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &fakeStore{queued: 2, batched: true}
		cfg := nonExclusive()
		cfg.PollInterval = time.Hour
		engine := &slowFirstEngine{release: make(chan struct{})}
		d := newTestDispatcher(store, engine, nil, nil, cfg)
		stop := runLoops(d.Run)
		defer stop()
		synctest.Wait()
		if claims, n := store.counts(); claims != 1 || n != 1 {
			t.Fatalf("one batch of 2 with its first start held: %d claims, %d dispatched; want 1, 1 (the item whose start returned)", claims, n)
		}
		close(engine.release)
		synctest.Wait()
		if _, n := store.counts(); n != 2 {
			t.Fatalf("%d dispatched once the slow start returned, want 2", n)
		}
	})
}

// blockingClaimStore holds its first claim, once it has read the queue,
// until release is closed: as a claim's commit takes time.
type blockingClaimStore struct {
	*fakeStore
	entered, release chan struct{}
	once             sync.Once
}

func (s *blockingClaimStore) Claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	res, err := s.fakeStore.Claim(ctx, fence, budget, plan, reject)
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	return res, err
}

// A wake-up that arrives while the loop is claiming, for an item that
// claim did not see, is not lost: the loop claims again as soon as that
// claim is done, with no time passing.
func TestAWakeupDuringAClaimStartsTheNextClaim(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &blockingClaimStore{fakeStore: &fakeStore{}, entered: make(chan struct{}), release: make(chan struct{})}
		cfg := nonExclusive()
		cfg.PollInterval = time.Hour
		wake := make(chanWakeups, 1)
		d := newTestDispatcher(store, okEngine{}, nil, wake, cfg)
		stop := runLoops(d.Run)
		defer stop()
		<-store.entered
		store.mu.Lock()
		store.queued = 1
		store.mu.Unlock()
		wake <- struct{}{}
		close(store.release)
		synctest.Wait()
		if claims, n := store.counts(); claims != 2 || n != 1 {
			t.Fatalf("%d claims, %d dispatched after a wake-up during the first claim; want 2, 1", claims, n)
		}
	})
}

// slowMarkStore's markings take markTook each.
type slowMarkStore struct {
	*fakeStore
	markTook time.Duration
}

func (s *slowMarkStore) MarkDispatched(ctx context.Context, fence ports.Fence, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	time.Sleep(s.markTook)
	return s.fakeStore.MarkDispatched(ctx, fence, items)
}

// heldStartEngine holds its held-th start (from 1) until release is
// closed and answers every other start at once.
type heldStartEngine struct {
	ports.WorkflowEngine
	held    int
	release chan struct{}
	mu      sync.Mutex
	starts  int
}

func (e *heldStartEngine) StartWorkflow(ctx context.Context, _ ports.WorkflowStart) error {
	e.mu.Lock()
	e.starts++
	held := e.starts == e.held
	e.mu.Unlock()
	if !held {
		return nil
	}
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The outcome of a start whose batch has others in flight waits for them
// to be written together, but no longer than the last marking took: a
// slow start holds its batch's other items back by one marking's time at
// most.
func TestASlowStartHoldsItsBatchsOtherMarkingsBackByOneMarkingsTimeAtMost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &slowMarkStore{fakeStore: &fakeStore{queued: 1, batched: true}, markTook: 10 * time.Millisecond}
		cfg := nonExclusive()
		cfg.PollInterval = time.Hour
		wake := make(chanWakeups, 1)
		engine := &heldStartEngine{held: 2, release: make(chan struct{})}
		d := newTestDispatcher(store, engine, nil, wake, cfg)
		stop := runLoops(d.Run)
		defer stop()
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if _, n := store.counts(); n != 1 {
			t.Fatalf("%d dispatched of a first batch of 1 whose marking takes 10 ms, want 1", n)
		}
		store.mu.Lock()
		store.queued = 2
		store.mu.Unlock()
		wake <- struct{}{}
		synctest.Wait()
		if _, n := store.counts(); n != 1 {
			t.Fatalf("%d dispatched as a batch of 2 starts with one start held: want still 1, its returned item waiting for the other", n)
		}
		time.Sleep(25 * time.Millisecond) // the last marking's 10 ms, then its own 10 ms
		synctest.Wait()
		if _, n := store.counts(); n != 2 {
			t.Fatalf("%d dispatched once a marking's time passed with a start still held, want 2", n)
		}
		close(engine.release)
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if _, n := store.counts(); n != 3 {
			t.Fatalf("%d dispatched once the held start returned, want 3", n)
		}
	})
}
