package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// newTestStaleRecoveryAsking is a stale recovery whose questions to
// Temporal are bounded by askTimeout.
func newTestStaleRecoveryAsking(store ports.DispatchStore, engine ports.WorkflowEngine, askTimeout time.Duration) *StaleRecovery {
	m := dispatch.NewMetrics(prometheus.NewRegistry())
	return NewStaleRecovery(store, engine, dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, m), apptest.NewLease(), 5*time.Minute, askTimeout,
		testSchedule(), m, dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
}

func newTestStaleRecovery(store ports.DispatchStore, engine ports.WorkflowEngine) (*StaleRecovery, *dispatch.Metrics, *dispatch.Breaker) {
	m := dispatch.NewMetrics(prometheus.NewRegistry())
	b := dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, m)
	r := NewStaleRecovery(store, engine, b, apptest.NewLease(), 5*time.Minute, dispatch.DefaultDispatcherConfig().StartTimeout, testSchedule(), m,
		dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
	return r, m, b
}

func TestStaleRecovery(t *testing.T) {
	t.Parallel()

	t.Run("StartedIsDispatchedAndUnstartedGoesBackWithItsSlotFreed", func(t *testing.T) {
		t.Parallel()
		started, unstarted, unknown := apptest.StaleItem(10*time.Minute), apptest.StaleItem(10*time.Minute), apptest.StaleItem(10*time.Minute)
		// Temporal refusing the question about one item (not an outage)
		// leaves that item alone and goes on to the next.
		store := &staleStore{stale: []domain.QueueItem{unknown, started, unstarted}}
		engine := apptest.DescribingEngine{
			States: map[domain.ID]ports.WorkflowState{*started.ExecutionID: ports.WorkflowRunning},
			Errs:   map[domain.ID]error{*unknown.ExecutionID: errors.New("permission denied")},
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
			tr.FromClaimedAt != unstarted.ClaimedAt || tr.DropExecution == nil || *tr.DropExecution != *unstarted.ExecutionID {
			t.Errorf("transition %+v, want PENDING guarded by the observed claim, dropping its execution", tr)
		}
		if got := testutil.ToFloat64(m.StaleRecovered); got != 2 {
			t.Errorf("queue_stale_recovery_count = %v, want 2", got)
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

// claimLoopStore hands one claimed item to the claim loop's next batch
// and records how the loop settled it.
type claimLoopStore struct {
	ports.DispatchStore
	mu         sync.Mutex
	item       ports.ClaimedItem
	dispatched []ports.DispatchedItem
	applied    []ports.QueueTransition
}

func (s *claimLoopStore) Claim(context.Context, ports.Fence, int, ports.PlanFunc, ports.RejectFunc) (ports.ClaimResult, error) {
	return ports.ClaimResult{Claimed: []ports.ClaimedItem{s.item}, Workspaces: 1}, nil
}

func (s *claimLoopStore) MarkDispatched(_ context.Context, _ ports.Fence, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dispatched = append(s.dispatched, items...)
	out := make([]ports.DispatchedRecord, len(items))
	for i, it := range items {
		out[i] = ports.DispatchedRecord{ID: it.ID, CreatedAt: time.Now(), DispatchedAt: time.Now()}
	}
	return out, nil
}

func (s *claimLoopStore) ApplyTransitions(_ context.Context, ts []ports.QueueTransition) ([]domain.ID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = append(s.applied, ts...)
	ids := make([]domain.ID, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids, nil
}

// unavailableStarts is a Temporal whose starts fail as unavailable, so
// each start is in doubt, and which describes from a map.
type unavailableStarts struct{ apptest.DescribingEngine }

func (unavailableStarts) StartWorkflow(context.Context, ports.WorkflowStart) error {
	return fmt.Errorf("%w: connection reset", ports.ErrEngineUnavailable)
}

// settled is what one caller did with a claim in doubt: its verdict, read
// from what it wrote, and the release it wrote, if any.
type settled struct {
	verdict dispatch.InDoubtVerdict
	release ports.QueueTransition
}

func settledFrom(t *testing.T, dispatched []ports.DispatchedItem, applied []ports.QueueTransition) settled {
	t.Helper()
	switch {
	case len(dispatched)+len(applied) > 1:
		t.Fatalf("one item settled twice: dispatched %+v, released %+v", dispatched, applied)
	case len(dispatched) == 1:
		return settled{verdict: dispatch.InDoubtStarted}
	case len(applied) == 1:
		return settled{verdict: dispatch.InDoubtNotStarted, release: applied[0]}
	}
	return settled{verdict: dispatch.InDoubtUnknown}
}

// TestStaleRecoveryAndTheClaimLoopSettleAClaimInDoubtAlike gives stale
// recovery and the claim loop (whose start found Temporal unavailable)
// the same CLAIMED item and the same answer from Temporal, and requires
// the same verdict of both (dispatch.SettleInDoubt, the one rule), and the
// same release: back to PENDING guarded by the observed claim, its
// execution dropped, an attempt but no dispatch failure counted, and a
// LastError that says why it waited (stale recovery's old transition,
// RecoverStale, kept the item's earlier error). The breaker is the claim
// loop's side effect alone.
func TestStaleRecoveryAndTheClaimLoopSettleAClaimInDoubtAlike(t *testing.T) {
	t.Parallel()
	unavailable := fmt.Errorf("%w: connection refused", ports.ErrEngineUnavailable)
	tests := []struct {
		name  string
		state ports.WorkflowState
		err   error
		want  dispatch.InDoubtVerdict
	}{
		{name: "running", state: ports.WorkflowRunning, want: dispatch.InDoubtStarted},
		{name: "completed", state: ports.WorkflowCompleted, want: dispatch.InDoubtStarted},
		{name: "failed", state: ports.WorkflowFailed, want: dispatch.InDoubtStarted},
		{name: "cancelled", state: ports.WorkflowCancelled, want: dispatch.InDoubtStarted},
		{name: "terminated", state: ports.WorkflowTerminated, want: dispatch.InDoubtStarted},
		{name: "timed out", state: ports.WorkflowTimedOut, want: dispatch.InDoubtStarted},
		{name: "never seen", state: ports.WorkflowNotFound, want: dispatch.InDoubtNotStarted},
		{name: "temporal unavailable", err: unavailable, want: dispatch.InDoubtUnknown},
		{name: "temporal refuses the question", err: errors.New("permission denied"), want: dispatch.InDoubtUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			item := apptest.StaleItem(10 * time.Minute)
			item.LastError = "an earlier dispatch error"
			exec := *item.ExecutionID
			answer := apptest.DescribingEngine{States: map[domain.ID]ports.WorkflowState{}, Errs: map[domain.ID]error{}}
			if tt.err != nil {
				answer.Errs[exec] = tt.err
			} else {
				answer.States[exec] = tt.state
			}

			staleStore := &staleStore{stale: []domain.QueueItem{item}}
			r, _, staleBreaker := newTestStaleRecovery(staleStore, answer)
			if _, err := r.Recover(context.Background()); err != nil && !errors.Is(err, ports.ErrEngineUnavailable) {
				t.Fatal(err)
			}
			byStale := settledFrom(t, staleStore.dispatched, staleStore.applied)
			if !staleBreaker.Closed() {
				t.Error("stale recovery tripped the breaker; tripping it is the claim loop's")
			}

			loopStore := &claimLoopStore{item: ports.ClaimedItem{QueueItem: item, ExecutionID: exec, Version: 1}}
			m := dispatch.NewMetrics(prometheus.NewRegistry())
			loopBreaker := dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, m)
			d := dispatch.NewDispatcher(dispatch.DispatcherDeps{
				Store: loopStore, Engine: unavailableStarts{answer}, Breaker: loopBreaker, Metrics: m, Log: discardLog(),
			}, dispatch.DefaultDispatcherConfig())
			if _, err := d.DispatchBatch(context.Background()); err != nil {
				t.Fatal(err)
			}
			byLoop := settledFrom(t, loopStore.dispatched, loopStore.applied)
			if loopBreaker.Closed() {
				t.Error("the claim loop's breaker stayed closed after Temporal was unavailable")
			}

			if byStale.verdict != tt.want || byLoop.verdict != tt.want {
				t.Fatalf("stale recovery: %s, the claim loop: %s; want %s from both", verdictNames[byStale.verdict], verdictNames[byLoop.verdict], verdictNames[tt.want])
			}
			if tt.want != dispatch.InDoubtNotStarted {
				return
			}
			for who, s := range map[string]settled{"stale recovery": byStale, "the claim loop": byLoop} {
				rel := s.release
				if rel.ID != item.ID || rel.FromStatus != domain.QueueClaimed || rel.FromClaimedAt == nil || !rel.FromClaimedAt.Equal(*item.ClaimedAt) ||
					rel.DropExecution == nil || *rel.DropExecution != exec {
					t.Errorf("%s's release %+v is not guarded by the observed claim, or keeps its execution", who, rel)
				}
				if to := rel.To; to.Status != domain.QueuePending || to.ClaimedAt != nil || to.AttemptCount != item.AttemptCount+1 ||
					to.DispatchFailures != item.DispatchFailures || !to.AvailableAt.Equal(item.AvailableAt) {
					t.Errorf("%s released the item as %+v; want PENDING at once, one more attempt and no dispatch failure", who, to)
				}
				if rel.To.LastError == item.LastError || !strings.HasPrefix(rel.To.LastError, "not started: ") {
					t.Errorf("%s released the item with LastError %q; want why it waited", who, rel.To.LastError)
				}
			}
		})
	}
}

// TestStaleRecoveryStopsAtAnOutageAndBoundsEachQuestion gives stale
// recovery a batch whose second question finds Temporal gone (refused at
// once, or hanging), and requires that each question is bounded by the
// dispatcher's start timeout, that the batch stops at the first
// unavailable answer (as the reconciler's walk does) instead of asking
// about every item left, and that what was settled before is written
// while the items after it are left CLAIMED, untouched, for the next run:
// nothing lost, nothing started twice.
func TestStaleRecoveryStopsAtAnOutageAndBoundsEachQuestion(t *testing.T) {
	t.Parallel()
	const askTimeout = 200 * time.Millisecond
	for _, outage := range []temporalFault{refuses, hangs} {
		t.Run(outage.String(), func(t *testing.T) {
			t.Parallel()
			items := []domain.QueueItem{apptest.StaleItem(10 * time.Minute), apptest.StaleItem(10 * time.Minute),
				apptest.StaleItem(10 * time.Minute), apptest.StaleItem(10 * time.Minute)}
			engine := newFaultyTemporal()
			engine.faults[question("DescribeWorkflow", *items[1].ExecutionID)] = outage
			store := &staleStore{stale: items}
			r := newTestStaleRecoveryAsking(store, engine, askTimeout)

			began := time.Now()
			n, err := r.Recover(context.Background())
			took := time.Since(began)

			if !errors.Is(err, ports.ErrEngineUnavailable) || n != 1 {
				t.Errorf("Recover = %d, %v; want the one item settled before the outage, and the outage as its error", n, err)
			}
			asked := engine.questions()
			want := []string{question("DescribeWorkflow", *items[0].ExecutionID), question("DescribeWorkflow", *items[1].ExecutionID)}
			if !slices.Equal(asked, want) {
				t.Errorf("asked Temporal %v; want %v, stopping at the first unavailable answer", asked, want)
			}
			engine.requireBounded(t, askTimeout)
			if len(store.dispatched) != 1 || store.dispatched[0].ID != items[0].ID {
				t.Errorf("marked dispatched %+v; want the first item, whose workflow started, alone", store.dispatched)
			}
			if len(store.applied) != 0 {
				t.Errorf("released %+v; want the items from the outage on left CLAIMED for the next run", store.applied)
			}
			t.Logf("%s outage: asked %d of %d, settled %d, returned after %v", outage, len(asked), len(items), n, took.Round(time.Millisecond))
		})
	}
}

// verdictNames names the verdicts in test failures.
var verdictNames = map[dispatch.InDoubtVerdict]string{
	dispatch.InDoubtUnknown:    "unknown",
	dispatch.InDoubtStarted:    "started",
	dispatch.InDoubtNotStarted: "not started",
}
