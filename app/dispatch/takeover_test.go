package dispatch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// startingDescribingEngine starts every workflow and describes from a map.
type startingDescribingEngine struct{ apptest.DescribingEngine }

func (startingDescribingEngine) StartWorkflow(context.Context, ports.WorkflowStart) error { return nil }

func TestTakeoverSettlesTheEndedTermsClaimsBeforeClaiming(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		started, unstarted, unknown := apptest.StaleItem(time.Second), apptest.StaleItem(time.Second), apptest.StaleItem(time.Second)
		store := &fakeStore{queued: 1, ended: []domain.QueueItem{started, unstarted, unknown}}
		engine := startingDescribingEngine{apptest.DescribingEngine{
			States: map[domain.ID]ports.WorkflowState{*started.ExecutionID: ports.WorkflowRunning},
			Errs:   map[domain.ID]error{*unknown.ExecutionID: errors.New("permission denied")},
		}}
		shed := apptest.NewLease()
		shed.SetOther(QueueLeaseName, true)
		lease := NewQueueLease(shed, QueueLeaseTTL, NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
		cfg := DefaultDispatcherConfig()
		cfg.PollInterval = time.Hour // only the lease's gain may wake the loop
		d := newTestDispatcher(store, engine, lease, nil, cfg)
		stop := runLoops(lease.Run, d.Run)
		defer stop()
		synctest.Wait()
		store.mu.Lock()
		reads := len(store.endedReadAfter)
		store.mu.Unlock()
		if reads != 0 {
			t.Fatalf("%d reads of ended terms' claims before holding the lease, want none", reads)
		}

		shed.SetOther(QueueLeaseName, false)
		time.Sleep(QueueLeaseTTL / 5)
		synctest.Wait()
		store.mu.Lock()
		defer store.mu.Unlock()
		if len(store.endedReadAfter) == 0 || store.endedReadAfter[0] != 0 {
			t.Fatalf("ended terms' claims read after %v claims, want the first read before any claim", store.endedReadAfter)
		}
		if len(store.dispatched) < 1 || store.dispatched[0].ID != started.ID || store.markFences[0].Fenced() {
			t.Errorf("first mark %+v fenced by %+v, want the started item marked DISPATCHED unfenced", store.dispatched, store.markFences)
		}
		i := slices.IndexFunc(store.released, func(tr ports.QueueTransition) bool { return tr.ID == unstarted.ID })
		if i < 0 {
			t.Fatalf("unstarted item not released: %+v", store.released)
		}
		if r := store.released[i]; r.To.Status != domain.QueuePending || r.DropExecution == nil || *r.DropExecution != *unstarted.ExecutionID || r.To.DispatchFailures != 0 {
			t.Errorf("unstarted item released as %+v, want PENDING with its execution dropped and no dispatch failure counted", r)
		}
		for _, r := range store.released {
			if r.ID == unknown.ID || r.ID == started.ID {
				t.Errorf("item %s released though its fate was unknown or it started", r.ID)
			}
		}
		if got := testutil.ToFloat64(d.metrics.TermClaimsSettled); got != 2 {
			t.Errorf("queue_term_claims_settled_total = %v, want 2", got)
		}
		if store.claims == 0 {
			t.Error("no claim after the takeover settled what it could")
		}
		store.mu.Unlock()
		time.Sleep(cfg.PollInterval) // the next cycle
		synctest.Wait()
		store.mu.Lock()
		if len(store.endedReadAfter) != 2 {
			t.Errorf("ended terms' claims read %d times, want once more on the cycle after one's fate was unknown", len(store.endedReadAfter))
		}
	})
}

func TestMarksOfAnEndedTermAreDroppedForTheNextHolder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &termEndedStore{fakeStore: &fakeStore{}}
		d := newTestDispatcher(store, okEngine{}, nil, nil, nonExclusive())
		claimer := ports.Fence{Lease: QueueLeaseName, Holder: "h", Term: time.Now()}
		item := ports.ClaimedItem{QueueItem: apptest.StaleItem(0), Claimer: claimer}
		item.ExecutionID = *item.QueueItem.ExecutionID
		n, err := d.markDispatched(context.Background(), []ports.ClaimedItem{item})
		if err != nil || n != 0 {
			t.Fatalf("marking under an ended term: %d, %v; want 0 and no error, so the items are not kept", n, err)
		}
		if len(store.markFences) != 1 || store.markFences[0] != claimer {
			t.Errorf("marks fenced by %+v, want the item's claimer %+v", store.markFences, claimer)
		}
	})
}

// termEndedStore refuses every fenced mark: the term has ended.
type termEndedStore struct{ *fakeStore }

func (s *termEndedStore) MarkDispatched(ctx context.Context, fence ports.Fence, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	s.mu.Lock()
	s.markFences = append(s.markFences, fence)
	s.mu.Unlock()
	if fence.Fenced() {
		return nil, ports.ErrLeaseLost
	}
	return s.fakeStore.MarkDispatched(ctx, fence, items)
}

func TestNoStartOnceTheLeaseTermHasRunOut(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		shed := apptest.NewLease()
		// The claim takes longer than the term, and the renewals fail
		// meanwhile: by the time it returns, another holder may have the
		// lease and be settling this claim.
		store := &slowClaimStore{fakeStore: &fakeStore{queued: 1}, during: func() { shed.SetFail(errors.New("connection refused")) }}
		lease := NewQueueLease(shed, QueueLeaseTTL, NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
		engine := &outageEngine{}
		cfg := DefaultDispatcherConfig()
		cfg.PollInterval = time.Hour
		d := newTestDispatcher(store, engine, lease, nil, cfg)
		stop := runLoops(lease.Run, d.Run)
		defer stop()
		time.Sleep(2 * QueueLeaseTTL)
		synctest.Wait()
		store.mu.Lock()
		defer store.mu.Unlock()
		engine.mu.Lock()
		defer engine.mu.Unlock()
		if store.claims != 1 || engine.starts != 0 {
			t.Fatalf("%d claims, %d starts; want the claim made and its start not made after the term", store.claims, engine.starts)
		}
		if len(store.dispatched) != 0 || len(store.released) != 0 {
			t.Errorf("marked %v, released %v; want the item left CLAIMED for the next holder", store.dispatched, store.released)
		}
	})
}

func TestNoStartOfAClaimWhoseTermEndedThoughTheLeaseWasRenewedAsANewTerm(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		shed := apptest.NewLease()
		// Between the claim and its start the lease runs out (the process
		// was paused past its term) and the heartbeat renews it: a new
		// term, in which a peer may already have released the claim.
		store := &pausedAfterClaimStore{fakeStore: &fakeStore{queued: 1}, pause: func() { shed.Table().Expire(QueueLeaseName) }}
		lease := NewQueueLease(shed, QueueLeaseTTL, NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
		engine := &outageEngine{}
		cfg := DefaultDispatcherConfig()
		cfg.PollInterval = time.Hour
		d := newTestDispatcher(store, engine, lease, nil, cfg)
		stop := runLoops(lease.Run, d.Run)
		defer stop()
		time.Sleep(2 * QueueLeaseTTL)
		synctest.Wait()
		store.mu.Lock()
		defer store.mu.Unlock()
		if lease.TermNumber() != 2 || store.claims < 1 || store.fences[0].Term.Equal(lease.Fence().Term) {
			t.Fatalf("term number %d, %d claims, first in term %s, lease now in %s; want the claim made and the lease renewed in a new term",
				lease.TermNumber(), store.claims, store.fences[0].Term, lease.Fence().Term)
		}
		if n := engine.startsNow(); n != 0 {
			t.Fatalf("%d starts of a claim whose term ended before them, want none", n)
		}
		if len(store.dispatched) != 0 || len(store.released) != 0 {
			t.Errorf("marked %v, released %v; want the item left CLAIMED for the ended term's settling", store.dispatched, store.released)
		}
	})
}

// pausedAfterClaimStore's claim returns once the lease it was made under
// has been renewed as a new term: pause runs after the claim, and the
// claim waits past a heartbeat.
type pausedAfterClaimStore struct {
	*fakeStore
	pause func()
	once  sync.Once
}

func (s *pausedAfterClaimStore) Claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	res, err := s.fakeStore.Claim(ctx, fence, budget, plan, reject)
	if len(res.Claimed) > 0 {
		s.once.Do(func() {
			s.pause()
			time.Sleep(QueueLeaseTTL + time.Second)
		})
	}
	return res, err
}

// slowClaimStore's claim outlasts the queue lease's term, calling during
// as it starts.
type slowClaimStore struct {
	*fakeStore
	during func()
}

func (s *slowClaimStore) Claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	s.during()
	time.Sleep(QueueLeaseTTL + time.Second)
	return s.fakeStore.Claim(ctx, fence, budget, plan, reject)
}

func TestItemsTheirRunsAdmittedBeforeTheMarkingCountAsDispatched(t *testing.T) {
	t.Parallel()
	admitted := apptest.StaleItem(0)
	store := &admittedFirstStore{fakeStore: &fakeStore{}, admitted: admitted.ID, execution: *admitted.ExecutionID}
	d := newTestDispatcher(store, okEngine{}, nil, nil, nonExclusive())
	item := ports.ClaimedItem{QueueItem: admitted, ExecutionID: *admitted.ExecutionID}
	n, err := d.markDispatched(context.Background(), []ports.ClaimedItem{item})
	if err != nil || n != 1 {
		t.Fatalf("marking an item its run already moved DISPATCHED: %d, %v; want it counted", n, err)
	}
	if got := testutil.ToFloat64(d.metrics.Dispatched); got != 1 {
		t.Errorf("queue_items_dispatched_total = %v, want 1", got)
	}
	// Its admission wait is the one its run's admission stored.
	want := `
		# HELP queue_admission_wait_seconds Time a started item waited while admissible, by plan: from the latest of its enqueue, its notBefore and the last moment its workspace's own running limit stopped holding it, to its start being recorded.
		# TYPE queue_admission_wait_seconds histogram
		queue_admission_wait_seconds_bucket{plan="PRO",le="0.005"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="0.01"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="0.025"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="0.05"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="0.1"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="0.25"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="0.5"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="1"} 0
		queue_admission_wait_seconds_bucket{plan="PRO",le="2.5"} 1
		queue_admission_wait_seconds_bucket{plan="PRO",le="5"} 1
		queue_admission_wait_seconds_bucket{plan="PRO",le="10"} 1
		queue_admission_wait_seconds_bucket{plan="PRO",le="30"} 1
		queue_admission_wait_seconds_bucket{plan="PRO",le="60"} 1
		queue_admission_wait_seconds_bucket{plan="PRO",le="+Inf"} 1
		queue_admission_wait_seconds_sum{plan="PRO"} 2
		queue_admission_wait_seconds_count{plan="PRO"} 1
	`
	if err := testutil.CollectAndCompare(onlyPlan{d.metrics.AdmissionWait, "PRO"}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// onlyPlan collects one plan's series of a per-plan histogram.
type onlyPlan struct {
	vec  *prometheus.HistogramVec
	plan string
}

func (o onlyPlan) Describe(ch chan<- *prometheus.Desc) { o.vec.Describe(ch) }

func (o onlyPlan) Collect(ch chan<- prometheus.Metric) {
	o.vec.WithLabelValues(o.plan).(prometheus.Histogram).Collect(ch)
}

// admittedFirstStore marks nothing: the run of item admitted has already
// moved it DISPATCHED (AdmitRun).
type admittedFirstStore struct {
	*fakeStore
	admitted  domain.ID
	execution domain.ID
}

func (s *admittedFirstStore) MarkDispatched(context.Context, ports.Fence, []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	return nil, nil
}

func (s *admittedFirstStore) AdmissionWaits(_ context.Context, executionIDs []domain.ID) (map[domain.ID]ports.AdmissionWait, error) {
	out := map[domain.ID]ports.AdmissionWait{}
	for _, id := range executionIDs {
		if id == s.execution {
			out[id] = ports.AdmissionWait{Plan: domain.PlanPro, Wait: 2 * time.Second}
		}
	}
	return out, nil
}

func (s *admittedFirstStore) QueueStatuses(context.Context, []domain.ID) (map[domain.ID]domain.QueueStatus, error) {
	return map[domain.ID]domain.QueueStatus{s.admitted: domain.QueueDispatched}, nil
}
