package maintenance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// StaleClaimed returns, oldest claim first, up to limit of the stale
// items recovery has not settled yet, as the store's query does.
func (s *staleStore) StaleClaimed(_ context.Context, _ time.Duration, limit int) ([]domain.QueueItem, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	settled := make(map[domain.ID]bool, len(s.dispatched)+len(s.applied))
	for _, d := range s.dispatched {
		settled[d.ID] = true
	}
	for _, t := range s.applied {
		settled[t.ID] = true
	}
	var out []domain.QueueItem
	for _, it := range s.stale {
		if len(out) == limit {
			break
		}
		if !settled[it.ID] {
			out = append(out, it)
		}
	}
	return out, nil
}

// settledIDs are the items recovery marked DISPATCHED or released, each
// as many times as it was.
func (s *staleStore) settledIDs() []domain.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []domain.ID
	for _, d := range s.dispatched {
		ids = append(ids, d.ID)
	}
	for _, t := range s.applied {
		ids = append(ids, t.ID)
	}
	return ids
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
// once, or hanging), its health check too, and requires that each
// question is bounded by the dispatcher's start timeout, that the batch
// stops at the first unavailable answer once the health check finds
// Temporal away (as the reconciler's walk does) instead of asking about
// every item left, and that what was settled before is written while the
// items after it are left CLAIMED, untouched, for the next run: nothing
// lost, nothing started twice.
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
			engine.faults[healthCheck] = outage
			store := &staleStore{stale: items}
			r := newTestStaleRecoveryAsking(store, engine, askTimeout)

			began := time.Now()
			n, err := r.Recover(context.Background())
			took := time.Since(began)

			if !errors.Is(err, ports.ErrEngineUnavailable) || n != 1 {
				t.Errorf("Recover = %d, %v; want the one item settled before the outage, and the outage as its error", n, err)
			}
			asked := engine.questions()
			want := []string{question("DescribeWorkflow", *items[0].ExecutionID), question("DescribeWorkflow", *items[1].ExecutionID), healthCheck}
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

// newStaleRecoveryUnderTest is a stale recovery of the items stale,
// asking engine within askTimeout, logging to log.
func newStaleRecoveryUnderTest(stale []domain.QueueItem, engine ports.WorkflowEngine, askTimeout time.Duration, log *bytes.Buffer) (*StaleRecovery, *staleStore, *dispatch.Metrics) {
	store := &staleStore{stale: stale}
	m := dispatch.NewMetrics(prometheus.NewRegistry())
	r := NewStaleRecovery(store, engine, dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, m), apptest.NewLease(), 5*time.Minute, askTimeout,
		testSchedule(), m, dispatch.NewLeaseMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(log, nil)))
	return r, store, m
}

// TestStaleRecoveryGoesPastAClaimTemporalNeverAnswersAbout gives stale
// recovery three more stale claims than fit its batch (staleBatch),
// every other one's workflow never started and the rest started, and a
// Temporal that answers every question but the describe of the second
// claim's workflow (refusing it, or letting it hang), its health check
// included. It requires that the first run settles every other claim of
// its batch, and the second the three left behind it; that the
// unanswered claim is never marked, released or failed (an unknown
// start is not a start that did not happen) but asked about again on
// every run; that stale recovery warns about it once, naming the queue
// item and its execution, and counts it once in
// queue_stale_recovery_unanswered_claims_total, at the third run in a
// row; and that it is settled at the first run after Temporal answers
// about it. On the rule before passOver (stop at every unanswered
// question) the first run settled the first claim alone and every later
// one nothing.
func TestStaleRecoveryGoesPastAClaimTemporalNeverAnswersAbout(t *testing.T) {
	t.Parallel()
	const askTimeout = 200 * time.Millisecond
	for _, fault := range []temporalFault{refuses, hangs} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			engine := newFaultyTemporal()
			items := make([]domain.QueueItem, staleBatch+3)
			for i := range items {
				items[i] = apptest.StaleItem(10 * time.Minute)
				if i%2 == 0 {
					engine.states[*items[i].ExecutionID] = ports.WorkflowNotFound
				}
			}
			stuck := items[1]
			describeStuck := question("DescribeWorkflow", *stuck.ExecutionID)
			engine.faults[describeStuck] = fault
			var log bytes.Buffer
			r, store, m := newStaleRecoveryUnderTest(items, engine, askTimeout, &log)
			warnings := func() int { return strings.Count(log.String(), "Temporal keeps leaving a workflow unanswered") }

			for run := 1; run <= unansweredRunsToReport+2; run++ {
				before := len(engine.questions())
				n, err := r.Recover(context.Background())
				if err != nil {
					t.Fatalf("run %d: Recover = %d, %v; want it to go past the unanswered claim", run, n, err)
				}
				want := 0
				switch run {
				case 1:
					want = staleBatch - 1
				case 2:
					want = 3
				}
				if n != want {
					t.Fatalf("run %d settled %d; want %d", run, n, want)
				}
				if asked := slices.Collect(func(yield func(string) bool) {
					for _, q := range engine.questions()[before:] {
						if q == describeStuck && !yield(q) {
							return
						}
					}
				}); len(asked) != 1 {
					t.Fatalf("run %d asked about the unanswered claim %d times; want once", run, len(asked))
				}
				reported := 0
				if run >= unansweredRunsToReport {
					reported = 1
				}
				if got := testutil.ToFloat64(m.StaleUnansweredClaims); got != float64(reported) || warnings() != reported {
					t.Fatalf("after run %d: queue_stale_recovery_unanswered_claims_total = %v, %d warnings; want %d of each", run, got, warnings(), reported)
				}
			}
			settled := store.settledIDs()
			if slices.Contains(settled, stuck.ID) {
				t.Fatalf("settled the unanswered claim %s; want it left CLAIMED, holding its slot", stuck.ID)
			}
			if distinct := len(slices.Compact(slices.SortedFunc(slices.Values(settled), func(a, b domain.ID) int {
				return strings.Compare(a.String(), b.String())
			}))); len(settled) != len(items)-1 || distinct != len(settled) {
				t.Fatalf("settled %d claims (%d distinct); want each of the %d answered about once", len(settled), distinct, len(items)-1)
			}
			for _, about := range []string{"queue_item_id=" + stuck.ID.String(), "execution_id=" + stuck.ExecutionID.String()} {
				if !strings.Contains(log.String(), about) {
					t.Errorf("the warning does not name %s:\n%s", about, log.String())
				}
			}

			// Temporal answers about it again (it started): the next run
			// marks it DISPATCHED.
			delete(engine.faults, describeStuck)
			if n, err := r.Recover(context.Background()); err != nil || n != 1 || !slices.ContainsFunc(store.dispatched, func(d ports.DispatchedItem) bool { return d.ID == stuck.ID }) {
				t.Errorf("after Temporal answered, Recover = %d, %v, dispatched %d; want the claim marked DISPATCHED", n, err, len(store.dispatched))
			}
			t.Logf("%s: %d claims, %d questions, %d warning", fault, len(items), len(engine.questions()), warnings())
		})
	}
}

// TestAnOutageStopsStaleRecoveryWithoutGoingPastAnything gives stale
// recovery forty stale claims whose workflows never started, and a
// Temporal that answers no question about them: in one case its health
// check is not answered either (Temporal is away); in another the
// dispatcher's breaker is open (its health check is then not asked); in
// the last the health check is answered (the frontend serves, the
// service that keeps workflows does not). It requires that each of four
// runs stops with the outage as its error, having asked about the first
// claim only, or (health answered) having gone past those the runs
// before went past, known stuck, and at most passOverInARowMax new ones;
// that no claim is marked, released or counted or reported as
// unanswered; and that once Temporal answers the next run settles all
// forty.
func TestAnOutageStopsStaleRecoveryWithoutGoingPastAnything(t *testing.T) {
	t.Parallel()
	for _, outage := range []struct {
		name                       string
		healthAnswers, breakerOpen bool
	}{{"temporal away", false, false}, {"breaker open", true, true}, {"only the health check answers", true, false}} {
		t.Run(outage.name, func(t *testing.T) {
			t.Parallel()
			engine := newFaultyTemporal()
			items := make([]domain.QueueItem, 40)
			d := func(i int) string { return question("DescribeWorkflow", *items[i].ExecutionID) }
			for i := range items {
				items[i] = apptest.StaleItem(10 * time.Minute)
				engine.states[*items[i].ExecutionID] = ports.WorkflowNotFound
				engine.faults[d(i)] = refuses
			}
			// want is what run asks Temporal: the first subject alone, or,
			// while the health check answers, those gone past by the runs
			// before (known stuck) and passOverInARowMax new ones, each with
			// a health check, then the next.
			want := func(int) []string { return []string{d(0), healthCheck} }
			switch {
			case outage.breakerOpen:
				want = func(int) []string { return []string{d(0)} }
			case outage.healthAnswers:
				want = func(run int) []string {
					var asked []string
					for i := range (run + 1) * passOverInARowMax {
						asked = append(asked, d(i), healthCheck)
					}
					return append(asked, d((run+1)*passOverInARowMax))
				}
			default:
				engine.faults[healthCheck] = refuses
			}
			var log bytes.Buffer
			r, store, m := newStaleRecoveryUnderTest(items, engine, time.Second, &log)
			if outage.breakerOpen {
				r.breaker.Trip(time.Now(), ports.ErrEngineUnavailable)
			}

			for run := range 4 {
				before := len(engine.questions())
				n, err := r.Recover(context.Background())
				if !errors.Is(err, ports.ErrEngineUnavailable) || n != 0 {
					t.Fatalf("run %d: Recover = %d, %v; want nothing settled and the outage as its error", run, n, err)
				}
				if asked := engine.questions()[before:]; !slices.Equal(asked, want(run)) {
					t.Fatalf("run %d asked Temporal\n%s\nwant\n%s", run, strings.Join(asked, "\n"), strings.Join(want(run), "\n"))
				}
			}
			if settled := store.settledIDs(); len(settled) != 0 {
				t.Fatalf("settled %v during the outage; want every claim left CLAIMED", settled)
			}
			if got := testutil.ToFloat64(m.StaleUnansweredClaims) + testutil.ToFloat64(m.StaleUnansweredClaimsNow); got != 0 || strings.Contains(log.String(), "keeps leaving") {
				t.Fatalf("queue_stale_recovery_unanswered_claims_total = %v during the outage, log:\n%s\nwant none counted or reported", got, log.String())
			}

			clear(engine.faults)
			r.breaker.Reset()
			if n, err := r.Recover(context.Background()); err != nil || n != len(items) || len(store.applied) != len(items) {
				t.Fatalf("after the outage Recover = %d, %v, released %d; want all %d released", n, err, len(store.applied), len(items))
			}
		})
	}
}

// TestStaleRecoverySettlesTheClaimsBehindManyKnownStuckOnes gives stale
// recovery twelve stale claims at the front of its batch (the oldest)
// whose workflows Temporal never answers about while its health check
// answers, and five behind them whose workflows never started. It
// requires that the claims behind are released within
// ceil(12/passOverInARowMax) runs, the first run stopping at the cap
// and the next going past the eight it went past (known stuck) and four
// new; that the twelve are never settled; that they are reported at the
// unansweredRunsToReport-th run to reach its end, each once, and read in
// queue_stale_recovery_unanswered_claims for as long as Temporal leaves
// them unanswered, by the process that runs the job (0 on a turn that
// finds its lease elsewhere); and that once Temporal answers the next run
// settles them and the gauge falls to 0. On the rule where every unanswered claim counted
// toward the cap, every run stopped at the ninth and the five were never
// settled, nor the twelve reported.
func TestStaleRecoverySettlesTheClaimsBehindManyKnownStuckOnes(t *testing.T) {
	t.Parallel()
	const stuckAtFront, behind = 12, 5
	engine := newFaultyTemporal()
	items := make([]domain.QueueItem, stuckAtFront+behind)
	for i := range items {
		items[i] = apptest.StaleItem(10 * time.Minute)
		engine.states[*items[i].ExecutionID] = ports.WorkflowNotFound
		if i < stuckAtFront {
			engine.faults[question("DescribeWorkflow", *items[i].ExecutionID)] = refuses
		}
	}
	var log bytes.Buffer
	r, store, m := newStaleRecoveryUnderTest(items, engine, time.Second, &log)
	runsToSettle := (stuckAtFront + passOverInARowMax - 1) / passOverInARowMax

	settledBehind, completed, reportedAt := 0, 0, 0
	for run := 1; run <= runsToSettle+unansweredRunsToReport; run++ {
		n, err := r.Recover(context.Background())
		switch {
		case err == nil:
			completed++
		case !errors.Is(err, ports.ErrEngineUnavailable):
			t.Fatalf("run %d: Recover = %d, %v", run, n, err)
		}
		settledBehind += n
		if run == runsToSettle && settledBehind != behind {
			t.Fatalf("after %d runs settled %d; want the %d claims behind the stuck ones", run, settledBehind, behind)
		}
		reported := 0.0
		if completed >= unansweredRunsToReport {
			reported = stuckAtFront
			reportedAt = cmp.Or(reportedAt, run)
		}
		if got, now := testutil.ToFloat64(m.StaleUnansweredClaims), testutil.ToFloat64(m.StaleUnansweredClaimsNow); got != reported || now != reported {
			t.Fatalf("after run %d (%d reached their end): queue_stale_recovery_unanswered_claims_total = %v, queue_stale_recovery_unanswered_claims = %v; want %v",
				run, completed, got, now, reported)
		}
	}
	if completed < unansweredRunsToReport {
		t.Fatalf("%d runs reached their end; want at least %d, to report the stuck claims", completed, unansweredRunsToReport)
	}
	if got := len(store.settledIDs()); got != behind {
		t.Fatalf("settled %d claims; want the %d behind, never the stuck ones", got, behind)
	}

	// Another process takes the job's lease: the stuck claims are its to
	// report, and this one's gauge falls to 0 until it runs the job again.
	shed := r.loop.lease.(*apptest.Lease)
	shed.SetOther(StaleRecoveryLeaseName, true)
	r.loop.turn(context.Background())
	if now := testutil.ToFloat64(m.StaleUnansweredClaimsNow); now != 0 {
		t.Errorf("queue_stale_recovery_unanswered_claims = %v on a turn without the lease; want 0", now)
	}
	shed.SetOther(StaleRecoveryLeaseName, false)
	r.loop.turn(context.Background())
	if now := testutil.ToFloat64(m.StaleUnansweredClaimsNow); now != stuckAtFront {
		t.Errorf("queue_stale_recovery_unanswered_claims = %v once this process runs the job again; want %d", now, stuckAtFront)
	}

	clear(engine.faults)
	if n, err := r.Recover(context.Background()); err != nil || n != stuckAtFront {
		t.Fatalf("after Temporal answered, Recover = %d, %v; want the %d stuck claims released", n, err, stuckAtFront)
	}
	if now := testutil.ToFloat64(m.StaleUnansweredClaimsNow); now != 0 {
		t.Errorf("queue_stale_recovery_unanswered_claims = %v after Temporal answered; want 0", now)
	}
	t.Logf("%d stuck claims at the front, %d behind: settled by run %d, reported at run %d, %d questions", stuckAtFront, behind, runsToSettle,
		reportedAt, len(engine.questions()))
}
