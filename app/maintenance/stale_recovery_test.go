package maintenance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// staleStore serves fixed stale items and records what recovery wrote.
type staleStore struct {
	ports.DispatchStore
	mu         sync.Mutex
	stale      []domain.QueueItem
	dispatched []ports.DispatchedItem
	applied    []ports.QueueTransition
	// forgotten are the prefixes of the expired leases deleted.
	forgotten []string
}

func (s *staleStore) ForgetExpiredLeases(_ context.Context, prefix string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten = append(s.forgotten, prefix)
	return 0, nil
}

func (s *staleStore) StaleClaimed(context.Context, time.Duration, int) ([]domain.QueueItem, error) {
	return s.stale, nil
}

func (s *staleStore) MarkDispatched(_ context.Context, _ ports.Fence, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dispatched = append(s.dispatched, items...)
	out := make([]ports.DispatchedRecord, len(items))
	for i, it := range items {
		out[i] = ports.DispatchedRecord{ID: it.ID}
	}
	return out, nil
}

func (s *staleStore) ApplyTransitions(_ context.Context, ts []ports.QueueTransition) ([]domain.ID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = append(s.applied, ts...)
	ids := make([]domain.ID, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids, nil
}

func newTestStaleRecovery(store ports.DispatchStore, engine ports.WorkflowEngine) (*StaleRecovery, *dispatch.Metrics, *dispatch.Breaker) {
	m := dispatch.NewMetrics(prometheus.NewRegistry())
	b := dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, m)
	r := NewStaleRecovery(store, engine, b, apptest.NewLease(), 5*time.Minute, testSchedule(), m,
		dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
	return r, m, b
}

func TestStaleRecovery(t *testing.T) {
	t.Parallel()

	t.Run("StartedIsDispatchedAndUnstartedGoesBackWithItsSlotFreed", func(t *testing.T) {
		t.Parallel()
		started, unstarted, unknown := apptest.StaleItem(10*time.Minute), apptest.StaleItem(10*time.Minute), apptest.StaleItem(10*time.Minute)
		store := &staleStore{stale: []domain.QueueItem{started, unstarted, unknown}}
		engine := apptest.DescribingEngine{
			States: map[domain.ID]ports.WorkflowState{*started.ExecutionID: ports.WorkflowRunning},
			Errs:   map[domain.ID]error{*unknown.ExecutionID: ports.ErrEngineUnavailable},
		}
		r, m, _ := newTestStaleRecovery(store, engine)
		n, err := r.Recover(context.Background())
		if err != nil || n != 2 {
			t.Fatalf("Recover = %d, %v; want 2", n, err)
		}
		if len(store.dispatched) != 1 || store.dispatched[0].ID != started.ID {
			t.Errorf("marked dispatched %+v, want only the item whose workflow started (never started twice)", store.dispatched)
		}
		if len(store.applied) != 1 {
			t.Fatalf("transitions %+v, want the unstarted item's alone", store.applied)
		}
		tr := store.applied[0]
		if tr.ID != unstarted.ID || tr.To.Status != domain.QueuePending || tr.FromStatus != domain.QueueClaimed ||
			tr.FromClaimedAt != unstarted.ClaimedAt || tr.DropExecution != unstarted.ExecutionID {
			t.Errorf("transition %+v, want PENDING guarded by the observed claim, dropping its execution", tr)
		}
		if got := testutil.ToFloat64(m.StaleRecovered); got != 2 {
			t.Errorf("queue_stale_recovery_count = %v, want 2", got)
		}
	})

	t.Run("AClaimYoungerThanTheThresholdIsLeft", func(t *testing.T) {
		t.Parallel()
		store := &staleStore{stale: []domain.QueueItem{apptest.StaleItem(time.Minute)}}
		r, _, _ := newTestStaleRecovery(store, apptest.DescribingEngine{})
		if n, err := r.Recover(context.Background()); err != nil || n != 0 || len(store.applied) != 0 {
			t.Fatalf("Recover = %d, %v, wrote %+v; want nothing for a fresh claim", n, err, store.applied)
		}
	})

	t.Run("WaitsWhileTheBreakerIsOpen", func(t *testing.T) {
		t.Parallel()
		store := &staleStore{stale: []domain.QueueItem{apptest.StaleItem(10 * time.Minute)}}
		r, _, b := newTestStaleRecovery(store, apptest.DescribingEngine{})
		b.Trip(time.Now(), ports.ErrEngineUnavailable)
		r.run(context.Background())
		if len(store.applied)+len(store.dispatched) != 0 {
			t.Fatal("recovered while Temporal was unavailable")
		}
		if len(store.forgotten) != 1 || store.forgotten[0] != dispatch.RegistrationLeasePrefix {
			t.Errorf("forgot leases by %q, want the expired registrations (%q) forgotten, which needs no Temporal", store.forgotten, dispatch.RegistrationLeasePrefix)
		}
		b.Reset()
		r.run(context.Background())
		if len(store.applied) != 1 {
			t.Fatalf("transitions %+v once the breaker closed, want 1", store.applied)
		}
	})
}
