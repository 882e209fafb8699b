package porttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Run is one execution seeded for a suite: RUNNING, with its queue item
// DISPATCHED, as the dispatcher leaves a started run.
type Run struct {
	ExecutionID  domain.ID
	QueueID      domain.ID
	DefinitionID domain.ID
	Version      int
}

// ExecutionStoreFixture is an implementation of ports.ExecutionStore under
// test, with what the suite needs to seed and inspect it.
type ExecutionStoreFixture struct {
	Store ports.ExecutionStore
	// NewRun stores graph as a definition version with a started run of it.
	NewRun func(t *testing.T, graph domain.Graph) Run
	// NewClaimedRun is NewRun with the run's item still CLAIMED: claimed,
	// its execution written, its dispatcher not yet heard from.
	NewClaimedRun func(t *testing.T, graph domain.Graph) Run
	// Release releases the claim of a NewClaimedRun as a peer settling it
	// does when Temporal has never heard of its workflow
	// (QueueState.ReleaseUnstarted, dropping the claim's execution).
	Release func(t *testing.T, run Run)
	// Cancel cancels the still CLAIMED item of a NewClaimedRun, as the
	// API's cancel does when it finds no workflow started yet
	// (QueueState.Cancel): the claim, its execution and its slot stay.
	Cancel func(t *testing.T, run Run)
	// QueueItem reads a queue item back; ok is false when it is gone.
	QueueItem func(t *testing.T, id domain.ID) (item domain.QueueItem, ok bool)
	// Execution reads an execution's row back.
	Execution func(t *testing.T, id domain.ID) domain.Execution
}

// ExecutionStore runs the contract of ports.ExecutionStore against the
// fixture newFixture builds, a fresh one per case.
func ExecutionStore(t *testing.T, newFixture func(t *testing.T) ExecutionStoreFixture) {
	graph, err := domain.DecodeGraph([]byte(`{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	setup := func(t *testing.T) (ExecutionStoreFixture, Run) {
		t.Helper()
		f := newFixture(t)
		return f, f.NewRun(t, graph)
	}
	keep := func(*domain.QueueItem) (ports.ItemAtEnd, error) { return ports.KeepItem, nil }

	t.Run("GetDefinitionVersionReturnsTheStoredGraph", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		v, err := f.Store.GetDefinitionVersion(ctx, run.DefinitionID, run.Version)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Graph.Nodes) != 1 || v.Graph.Nodes[0].Key != "a" {
			t.Errorf("graph = %+v, want the stored one", v.Graph)
		}
		if _, err := f.Store.GetDefinitionVersion(ctx, run.DefinitionID, run.Version+1); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("missing version: %v, want ErrNotFound", err)
		}
	})

	t.Run("FinishNodeEndsTheRecordStartNodeOpened", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		if err := f.Store.StartNode(ctx, run.ExecutionID, domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeRunning,
			Attempt: 1, Input: json.RawMessage(`{"in": 1}`), StartedAt: &at}); err != nil {
			t.Fatal(err)
		}
		opened := node(t, f.Store, run.ExecutionID, "a")
		if opened.Status != domain.NodeRunning || opened.StartedAt == nil {
			t.Fatalf("started record = %s, started at %v; want RUNNING with a start time", opened.Status, opened.StartedAt)
		}
		if err := f.Store.FinishNode(ctx, run.ExecutionID, domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeCompleted,
			Attempt: 1, Output: json.RawMessage(`2`)}); err != nil {
			t.Fatal(err)
		}
		n := node(t, f.Store, run.ExecutionID, "a")
		if n.Status != domain.NodeCompleted || string(n.Output) != "2" {
			t.Errorf("record = %s with output %s, want COMPLETED with 2", n.Status, n.Output)
		}
		if n.StartedAt == nil || !n.StartedAt.Equal(*opened.StartedAt) {
			t.Errorf("started at %v, want the start's %v", n.StartedAt, opened.StartedAt)
		}
		if n.CompletedAt == nil {
			t.Error("finished record has no end time")
		}
		if !jsonEqual(n.Input, `{"in": 1}`) {
			t.Errorf("input = %s, want the start's", n.Input)
		}
	})

	t.Run("ALateStartNeverReopensAnEndedNode", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		for _, status := range []domain.NodeStatus{domain.NodeCompleted, domain.NodeSkipped, domain.NodeCancelled} {
			key := string(status)
			if err := f.Store.FinishNode(ctx, run.ExecutionID, domain.NodeRecord{Key: key, Type: domain.NodeTransform, Status: status, Attempt: 1}); err != nil {
				t.Fatal(err)
			}
			if err := f.Store.StartNode(ctx, run.ExecutionID, domain.NodeRecord{Key: key, Type: domain.NodeTransform, Status: domain.NodeRunning, Attempt: 2, StartedAt: &at}); err != nil {
				t.Fatal(err)
			}
			if n := node(t, f.Store, run.ExecutionID, key); n.Status != status {
				t.Errorf("%s node after a late start: %s", status, n.Status)
			}
		}
	})

	t.Run("AZombieAttemptNeverOverwritesANewerOneOrTheWorkflowsEnd", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		start := func(key string, attempt int) {
			t.Helper()
			if err := f.Store.StartNode(ctx, run.ExecutionID, domain.NodeRecord{Key: key, Type: domain.NodeHTTPRequest, Status: domain.NodeRunning,
				Attempt: attempt, Input: json.RawMessage(fmt.Sprintf(`{"attempt": %d}`, attempt)), StartedAt: &at}); err != nil {
				t.Fatal(err)
			}
		}
		finish := func(key string, attempt int, output string) {
			t.Helper()
			if err := f.Store.FinishNode(ctx, run.ExecutionID, domain.NodeRecord{Key: key, Type: domain.NodeHTTPRequest, Status: domain.NodeCompleted,
				Attempt: attempt, Output: json.RawMessage(output)}); err != nil {
				t.Fatal(err)
			}
		}
		// Attempt 1 timed out and attempt 2 started; then attempt 1's
		// late start and late end arrive.
		start("a", 1)
		start("a", 2)
		start("a", 1)
		finish("a", 1, `"stale"`)
		if n := node(t, f.Store, run.ExecutionID, "a"); n.Status != domain.NodeRunning || n.Attempt != 2 || !jsonEqual(n.Input, `{"attempt": 2}`) {
			t.Errorf("after attempt 1's late start and end: %s attempt %d input %s, want RUNNING attempt 2 with its input", n.Status, n.Attempt, n.Input)
		}
		finish("a", 2, `"fresh"`)
		if n := node(t, f.Store, run.ExecutionID, "a"); n.Status != domain.NodeCompleted || n.Attempt != 2 || string(n.Output) != `"fresh"` {
			t.Errorf("after attempt 2 ends: %s attempt %d output %s, want COMPLETED attempt 2 with its output", n.Status, n.Attempt, n.Output)
		}
		// The workflow recorded the node FAILED (its retries over); the
		// last attempt's late success does not turn it COMPLETED.
		msg := "timed out"
		start("b", 3)
		if err := f.Store.RecordNodes(ctx, run.ExecutionID, []domain.NodeRecord{{Key: "b", Type: domain.NodeHTTPRequest, Status: domain.NodeFailed, Attempt: 3, Error: &msg}}); err != nil {
			t.Fatal(err)
		}
		finish("b", 3, `"late"`)
		if n := node(t, f.Store, run.ExecutionID, "b"); n.Status != domain.NodeFailed || n.Error == nil || *n.Error != msg {
			t.Errorf("after the workflow failed it and the attempt finished late: %+v, want FAILED with the workflow's error", n)
		}
	})

	t.Run("RecordNodesStartsRunningOnesAndEndsTheRest", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		msg := "boom"
		err := f.Store.RecordNodes(ctx, run.ExecutionID, []domain.NodeRecord{
			{Key: "running", Type: domain.NodeDelay, Status: domain.NodeRunning, Attempt: 1, StartedAt: &at},
			{Key: "failed", Type: domain.NodeTransform, Status: domain.NodeFailed, Attempt: 3, Error: &msg, StartedAt: &at},
			{Key: "skipped", Type: domain.NodeTransform, Status: domain.NodeSkipped},
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := node(t, f.Store, run.ExecutionID, "running"); n.Status != domain.NodeRunning {
			t.Errorf("running node recorded %s", n.Status)
		}
		if n := node(t, f.Store, run.ExecutionID, "failed"); n.Status != domain.NodeFailed || n.Attempt != 3 || n.Error == nil || *n.Error != msg {
			t.Errorf("failed node recorded %+v", n)
		}
		if n := node(t, f.Store, run.ExecutionID, "skipped"); n.Status != domain.NodeSkipped || n.Attempt != 1 {
			t.Errorf("skipped node recorded %s, attempt %d; want SKIPPED, 1", n.Status, n.Attempt)
		}
		if err := f.Store.RecordNodes(ctx, domain.ID(uuid.New()), []domain.NodeRecord{{Key: "x", Type: domain.NodeTransform, Status: domain.NodeSkipped}}); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("recording for a missing execution: %v, want ErrNotFound", err)
		}
	})

	t.Run("FinishExecutionEndsARunningExecutionOnce", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		found, err := f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionCompleted, nil, keep,
			domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeCompleted, Output: json.RawMessage(`1`)})
		if err != nil || !found {
			t.Fatalf("finishing: found %v, %v", found, err)
		}
		msg := "late"
		found, err = f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionFailed, &msg, keep,
			domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeFailed})
		if err != nil || found {
			t.Fatalf("repeating: found %v, %v; want not found", found, err)
		}
		e := f.Execution(t, run.ExecutionID)
		nodes, err := f.Store.ListNodes(ctx, run.ExecutionID, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != domain.ExecutionCompleted || e.Error != nil {
			t.Errorf("execution = %s (%v), want the first end, COMPLETED", e.Status, e.Error)
		}
		if len(nodes) != 1 || nodes[0].Status != domain.NodeCompleted {
			t.Errorf("nodes = %+v, want only the first end's record", nodes)
		}
	})

	t.Run("FinishExecutionEndsTheNodesItLeavesRunning", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		if err := f.Store.RecordNodes(ctx, run.ExecutionID, []domain.NodeRecord{
			{Key: "left", Type: domain.NodeHTTPRequest, Status: domain.NodeRunning, Attempt: 1, StartedAt: &at},
			{Key: "done", Type: domain.NodeTransform, Status: domain.NodeCompleted, Attempt: 1, Output: json.RawMessage(`1`)},
		}); err != nil {
			t.Fatal(err)
		}
		msg := "workflow terminated outside Sluice"
		if found, err := f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionFailed, &msg, keep); err != nil || !found {
			t.Fatalf("finishing: found %v, %v", found, err)
		}
		wantStatus, wantErr := domain.LeftRunning(domain.ExecutionFailed, msg)
		if n := node(t, f.Store, run.ExecutionID, "left"); n.Status != wantStatus || n.Error == nil || *n.Error != wantErr {
			t.Errorf("the node left RUNNING ended %s (%v), want %s (%q)", n.Status, n.Error, wantStatus, wantErr)
		}
		if n := node(t, f.Store, run.ExecutionID, "done"); n.Status != domain.NodeCompleted || n.Error != nil {
			t.Errorf("the completed node became %s (%v), want it kept COMPLETED", n.Status, n.Error)
		}
	})

	t.Run("FinishExecutionPersistsWhatItsItemAtEndDecides", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name     string
			decision ports.ItemAtEnd
			wantGone bool
			want     domain.QueueStatus
		}{
			{name: "keep", decision: ports.KeepItem, want: domain.QueueDispatched},
			{name: "write", decision: ports.WriteItem, want: domain.QueueFailed},
			{name: "delete", decision: ports.DeleteItem, wantGone: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				f, run := setup(t)
				var seen domain.QueueItem
				atEnd := func(item *domain.QueueItem) (ports.ItemAtEnd, error) {
					seen = *item
					if err := item.RecordOutcome(domain.ExecutionFailed, "node a failed"); err != nil {
						return 0, err
					}
					return tc.decision, nil
				}
				msg := "node a failed"
				if _, err := f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionFailed, &msg, atEnd); err != nil {
					t.Fatal(err)
				}
				if seen.ID != run.QueueID || seen.Status != domain.QueueDispatched {
					t.Errorf("atEnd saw item %s in %s, want %s DISPATCHED", seen.ID, seen.Status, run.QueueID)
				}
				item, ok := f.QueueItem(t, run.QueueID)
				if ok == tc.wantGone {
					t.Fatalf("item present = %v, want %v", ok, !tc.wantGone)
				}
				if ok && item.Status != tc.want {
					t.Errorf("item is %s, want %s", item.Status, tc.want)
				}
				if ok && tc.decision == ports.WriteItem && item.LastError != msg {
					t.Errorf("item's last error = %q, want %q", item.LastError, msg)
				}
			})
		}
	})

	t.Run("FinishExecutionDecidesTheItemOfAnEndedExecution", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		if _, err := f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionCompleted, nil, keep); err != nil {
			t.Fatal(err)
		}
		called := false
		found, err := f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionCompleted, nil, func(*domain.QueueItem) (ports.ItemAtEnd, error) {
			called = true
			return ports.DeleteItem, nil
		})
		if err != nil || found {
			t.Fatalf("repeat: found %v, %v", found, err)
		}
		if !called {
			t.Fatal("atEnd was not called for the item of an execution already ended")
		}
		if _, ok := f.QueueItem(t, run.QueueID); ok {
			t.Error("the item outlived its finished run")
		}
	})

	t.Run("AdmitRunAdmitsAStartedRunAndLeavesItsItemDispatched", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		if admitted, err := f.Store.AdmitRun(ctx, run.ExecutionID); err != nil || admitted != ports.AdmissionGranted {
			t.Fatalf("admitting a started run: %v, %v; want it admitted", admitted, err)
		}
		if item, ok := f.QueueItem(t, run.QueueID); !ok || item.Status != domain.QueueDispatched {
			t.Errorf("item %+v (present %v), want DISPATCHED", item.QueueState, ok)
		}
	})

	t.Run("AdmitRunMarksTheItemOfAClaimedRunDispatched", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		run := f.NewClaimedRun(t, graph)
		if admitted, err := f.Store.AdmitRun(ctx, run.ExecutionID); err != nil || admitted != ports.AdmissionGranted {
			t.Fatalf("admitting a claimed run: %v, %v; want it admitted", admitted, err)
		}
		if item, ok := f.QueueItem(t, run.QueueID); !ok || item.Status != domain.QueueDispatched || item.DispatchedAt == nil || item.ClaimedAt != nil {
			t.Errorf("item %+v (present %v), want DISPATCHED, so that no release can follow", item.QueueState, ok)
		}
	})

	t.Run("ARunWhoseClaimWasReleasedIsNotAdmittedAndItsEndLeavesTheItem", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		run := f.NewClaimedRun(t, graph)
		f.Release(t, run)
		// The start landed after the release: the run is refused, and
		// were it to end all the same, its end finds no item to change.
		if admitted, err := f.Store.AdmitRun(ctx, run.ExecutionID); err != nil || admitted != ports.AdmissionRefused {
			t.Fatalf("admitting a released claim's run: %v, %v; want it refused", admitted, err)
		}
		called := false
		found, err := f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionCompleted, nil, func(*domain.QueueItem) (ports.ItemAtEnd, error) {
			called = true
			return ports.DeleteItem, nil
		})
		if err != nil || found || called {
			t.Fatalf("ending the released claim's run: found %v, atEnd called %v, %v; want neither", found, called, err)
		}
		item, ok := f.QueueItem(t, run.QueueID)
		if !ok || item.Status != domain.QueuePending || item.ExecutionID != nil {
			t.Errorf("item %+v with execution %v (present %v), want PENDING with no execution, for a claim of its own", item.QueueState, item.ExecutionID, ok)
		}
	})

	t.Run("ARunWhoseItemWasCancelledWhileClaimedIsAdmittedAsCancelled", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		run := f.NewClaimedRun(t, graph)
		// The cancel found no workflow (the start was on the wire), ended
		// the item and answered CANCELLED; then the start landed.
		f.Cancel(t, run)
		if admitted, err := f.Store.AdmitRun(ctx, run.ExecutionID); err != nil || admitted != ports.AdmissionCancelled {
			t.Fatalf("admitting the run of a cancelled item: %v, %v; want it admitted as cancelled", admitted, err)
		}
		if item, ok := f.QueueItem(t, run.QueueID); !ok || item.Status != domain.QueueCancelled {
			t.Errorf("item %+v (present %v), want it still CANCELLED", item.QueueState, ok)
		}
	})

	t.Run("AnItemAtEndErrorWritesNothing", func(t *testing.T) {
		t.Parallel()
		f, run := setup(t)
		refused := errors.New("refused")
		_, err := f.Store.FinishExecution(ctx, run.ExecutionID, domain.ExecutionCompleted, nil, func(*domain.QueueItem) (ports.ItemAtEnd, error) {
			return ports.DeleteItem, refused
		}, domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeCompleted})
		if !errors.Is(err, refused) {
			t.Fatalf("finishing: %v, want the atEnd error", err)
		}
		e := f.Execution(t, run.ExecutionID)
		nodes, err := f.Store.ListNodes(ctx, run.ExecutionID, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != domain.ExecutionRunning || len(nodes) != 0 {
			t.Errorf("after a refused atEnd: %s with %d nodes, want RUNNING with none", e.Status, len(nodes))
		}
		if item, ok := f.QueueItem(t, run.QueueID); !ok || item.Status != domain.QueueDispatched {
			t.Errorf("after a refused atEnd the item is %+v (present %v), want DISPATCHED", item.QueueState, ok)
		}
	})
}

// node reads one node record of an execution, failing when there is none.
func node(t *testing.T, store ports.ExecutionStore, executionID domain.ID, key string) domain.NodeRecord {
	t.Helper()
	nodes, err := store.ListNodes(context.Background(), executionID, 10_000, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Key == key {
			return n
		}
	}
	t.Fatalf("no record of node %s", key)
	return domain.NodeRecord{}
}

// jsonEqual reports whether raw is the JSON value want, whatever its
// spacing (Postgres's jsonb normalises it).
func jsonEqual(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
