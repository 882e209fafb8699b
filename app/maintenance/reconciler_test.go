package maintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

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
	ports.DispatchStore
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

func (f *finishRecorder) FinishExecution(_ context.Context, id domain.ID, status domain.ExecutionStatus, _ *string, _ ports.ItemAtEndFunc, _ ...domain.NodeRecord) (bool, error) {
	f.finished[id] = status
	return true, nil
}

func newTestReconciler(store ports.DispatchStore, rec ports.ExecutionStore, engine ports.WorkflowEngine, pageSize int) (*Reconciler, *dispatch.Breaker) {
	b := dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, dispatch.NewMetrics(prometheus.NewRegistry()))
	r := NewReconciler(store, rec, engine, b, apptest.NewLease(), 0, dispatch.DefaultDispatcherConfig().StartTimeout, pageSize, testSchedule(),
		NewReconcilerMetrics(prometheus.NewRegistry()), dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog())
	return r, b
}

func TestReconcileWalksEveryPageAndRecordsTheWorkflowsResult(t *testing.T) {
	t.Parallel()
	store := &pagedStore{}
	t0 := time.Now().Add(-time.Hour)
	for i := range 5 {
		store.running = append(store.running, domain.Execution{ID: domain.ID(uuid.New()), AdmittedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	rec := &finishRecorder{finished: map[domain.ID]domain.ExecutionStatus{}}
	// The workflow completed normally, but the DAG it ran failed.
	r, _ := newTestReconciler(store, rec, closedEngine{status: domain.ExecutionFailed, msg: "node a failed"}, 2)
	for range 3 {
		if _, err := r.Reconcile(context.Background()); err != nil {
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
	if _, err := r.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if last := store.cursors[len(store.cursors)-1]; last != (ports.ExecutionCursor{}) {
		t.Errorf("after the last page the walk resumed at %v, want the start", last)
	}
}

func TestReconcilerLeavesRunningWorkflowsAndWaitsForTheBreaker(t *testing.T) {
	t.Parallel()
	store := &pagedStore{running: []domain.Execution{{ID: domain.ID(uuid.New()), AdmittedAt: time.Now().Add(-time.Hour)}}}
	rec := &finishRecorder{finished: map[domain.ID]domain.ExecutionStatus{}}
	running := apptest.DescribingEngine{States: map[domain.ID]ports.WorkflowState{store.running[0].ID: ports.WorkflowRunning}}
	r, b := newTestReconciler(store, rec, running, 10)
	if n, err := r.Reconcile(context.Background()); err != nil || n != 0 || len(rec.finished) != 0 {
		t.Fatalf("Reconcile = %d, %v, finished %v; want a running workflow left alone", n, err, rec.finished)
	}
	b.Trip(time.Now(), ports.ErrEngineUnavailable)
	r.run(context.Background())
	if len(store.cursors) != 1 {
		t.Errorf("the reconciler read a page while the breaker was open")
	}
}

// pickupEngine says every workflow runs and answers WorkflowPickup from a
// map, counting the questions and the terminations.
type pickupEngine struct {
	ports.WorkflowEngine
	pickups    map[domain.ID]ports.WorkflowPickup
	asked      map[domain.ID]int
	terminated map[domain.ID]string
}

func (e *pickupEngine) DescribeWorkflow(context.Context, domain.ID) (ports.WorkflowState, error) {
	return ports.WorkflowRunning, nil
}

func (e *pickupEngine) WorkflowPickup(_ context.Context, id domain.ID) (ports.WorkflowPickup, error) {
	e.asked[id]++
	return e.pickups[id], nil
}

func (e *pickupEngine) TerminateWorkflow(_ context.Context, id domain.ID, reason string) error {
	e.terminated[id] = reason
	return nil
}

func TestReconcilerFailsOnlyStartsNoWorkerWillPickUp(t *testing.T) {
	t.Parallel()
	old, young := time.Now().Add(-time.Hour), time.Now()
	abandoned, backlog, running, fresh := domain.ID(uuid.New()), domain.ID(uuid.New()), domain.ID(uuid.New()), domain.ID(uuid.New())
	store := &pagedStore{running: []domain.Execution{
		{ID: abandoned, AdmittedAt: old}, {ID: backlog, AdmittedAt: old.Add(time.Second)},
		{ID: running, AdmittedAt: old.Add(2 * time.Second)}, {ID: fresh, AdmittedAt: young},
	}}
	engine := &pickupEngine{asked: map[domain.ID]int{}, terminated: map[domain.ID]string{}, pickups: map[domain.ID]ports.WorkflowPickup{
		abandoned: {TaskQueue: "x.workflows"},
		backlog:   {TaskQueue: "x.workflows", Polled: true},
		running:   {TaskQueue: "x.workflows", PickedUp: true},
		fresh:     {TaskQueue: "x.workflows"},
	}}
	rec := &finishRecorder{finished: map[domain.ID]domain.ExecutionStatus{}}
	r, _ := newTestReconciler(store, rec, engine, 10)
	r.FailStuckStartsAfter(time.Minute)
	for range 2 {
		if _, err := r.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.finished) != 1 || rec.finished[abandoned] != domain.ExecutionFailed {
		t.Fatalf("finished %v; want only the abandoned start FAILED", rec.finished)
	}
	if reason := engine.terminated[abandoned]; len(engine.terminated) != 1 || !strings.Contains(reason, `"x.workflows"`) {
		t.Fatalf("terminated %v; want the abandoned start's workflow, naming its queue", engine.terminated)
	}
	if engine.asked[running] != 1 || engine.asked[backlog] != 2 || engine.asked[fresh] != 0 {
		t.Errorf("asked %v; want a picked-up run asked once, a backlogged one each walk, a young one never", engine.asked)
	}
}

// childStore is pagedStore whose executions' children are given.
type childStore struct {
	*pagedStore
	children []ports.RunningChild
}

func (s childStore) RunningChildren(_ context.Context, ids []domain.ID) ([]ports.RunningChild, error) {
	var out []ports.RunningChild
	for _, c := range s.children {
		if slices.Contains(ids, c.ExecutionID) {
			out = append(out, c)
		}
	}
	return out, nil
}

// childEngine answers ChildPickup from a map by child workflow id,
// counting the questions and the ends.
type childEngine struct {
	pickups map[string]ports.WorkflowPickup
	asked   map[string]int
	ended   map[string]string
}

func (e *childEngine) ChildPickup(_ context.Context, c ports.RunningChild) (ports.WorkflowPickup, error) {
	e.asked[c.WorkflowID]++
	return e.pickups[c.WorkflowID], nil
}

func (e *childEngine) EndAbandonedChild(_ context.Context, c ports.RunningChild, reason string) error {
	e.ended[c.WorkflowID] = reason
	return nil
}

// TestReconcilerEndsOnlyChildrenNoWorkerWillPickUpNamingTheirQueue: of
// four TEMPORAL_WORKFLOW children of running runs, only the one that has
// waited past the stuck-start time on a queue no worker polls is ended,
// with a reason naming its queue and the rule. One whose queue a worker
// polls (a backlog, or a worker restarting, which Temporal still lists) is
// asked again each walk; one picked up is asked once; a young one never.
func TestReconcilerEndsOnlyChildrenNoWorkerWillPickUpNamingTheirQueue(t *testing.T) {
	t.Parallel()
	old, young := time.Now().Add(-time.Hour), time.Now()
	run := domain.ID(uuid.New())
	store := childStore{pagedStore: &pagedStore{running: []domain.Execution{{ID: run, AdmittedAt: old}}}, children: []ports.RunningChild{
		{ExecutionID: run, NodeKey: "a", WorkflowID: "abandoned", RunID: "1", StartedAt: old},
		{ExecutionID: run, NodeKey: "b", WorkflowID: "restarting", RunID: "1", StartedAt: old},
		{ExecutionID: run, NodeKey: "c", WorkflowID: "running", RunID: "1", StartedAt: old},
		{ExecutionID: run, NodeKey: "d", WorkflowID: "young", RunID: "1", StartedAt: young},
	}}
	engine := &pickupEngine{asked: map[domain.ID]int{}, terminated: map[domain.ID]string{}, pickups: map[domain.ID]ports.WorkflowPickup{
		run: {TaskQueue: "x.workflows", PickedUp: true},
	}}
	children := &childEngine{asked: map[string]int{}, ended: map[string]string{}, pickups: map[string]ports.WorkflowPickup{
		"abandoned":  {TaskQueue: "team-a"},
		"restarting": {TaskQueue: "team-b", Polled: true},
		"running":    {TaskQueue: "team-c", PickedUp: true},
		"young":      {TaskQueue: "team-d"},
	}}
	rec := &finishRecorder{finished: map[domain.ID]domain.ExecutionStatus{}}
	r, _ := newTestReconciler(store, rec, engine, 10)
	r.FailStuckStartsAfter(time.Minute).FailStuckChildren(children)
	for range 2 {
		if _, err := r.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.finished) != 0 || len(engine.terminated) != 0 {
		t.Fatalf("finished %v, terminated %v; want the run left to fail its node itself", rec.finished, engine.terminated)
	}
	reason := children.ended["abandoned"]
	if len(children.ended) != 1 || !strings.Contains(reason, `task queue "team-a"`) || !strings.Contains(reason, "stuck-start rule, SLUICE_STUCK_START_AFTER") {
		t.Fatalf("ended %v; want only the abandoned child, naming its queue and the rule", children.ended)
	}
	if children.asked["running"] != 1 || children.asked["restarting"] != 2 || children.asked["young"] != 0 {
		t.Errorf("asked %v; want a picked-up child asked once, a polled queue's each walk, a young one never", children.asked)
	}
}

// closedWatch lists the same closed workflows at every look.
type closedWatch struct{ closed []ports.ClosedWorkflow }

func (w closedWatch) ClosedOutsideSluice(context.Context, time.Time, int) ([]ports.ClosedWorkflow, error) {
	return w.closed, nil
}

// messageRecorder records FinishExecution calls with their messages.
type messageRecorder struct {
	ports.ExecutionStore
	calls []string
}

func (m *messageRecorder) FinishExecution(_ context.Context, id domain.ID, status domain.ExecutionStatus, msg *string, _ ports.ItemAtEndFunc, _ ...domain.NodeRecord) (bool, error) {
	m.calls = append(m.calls, id.String()+" "+string(status)+" "+*msg)
	return true, nil
}

func TestTheCloseWatchRecordsEachRunClosedOutsideSluiceOnceNamingWhy(t *testing.T) {
	t.Parallel()
	terminated, timedOut := domain.ID(uuid.New()), domain.ID(uuid.New())
	watch := closedWatch{closed: []ports.ClosedWorkflow{
		{ExecutionID: terminated, State: ports.WorkflowTerminated, Reason: "Workflow history count exceeds limit."},
		{ExecutionID: timedOut, State: ports.WorkflowTimedOut},
	}}
	rec := &messageRecorder{}
	r, _ := newTestReconciler(&pagedStore{}, rec, closedEngine{}, 10)
	r.WatchClosed(watch, DefaultJobSchedule())
	for range 2 {
		if _, err := r.RecordClosed(context.Background(), time.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		terminated.String() + " FAILED workflow terminated outside Sluice: Workflow history count exceeds limit.",
		timedOut.String() + " FAILED workflow timed out",
	}
	if strings.Join(rec.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("completions:\n%s\nwant (once each, the second look overlapping the first):\n%s", strings.Join(rec.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestReconcilerStopsAtAnOutageAndBoundsEachQuestion gives each pass of
// the reconciler's walk (the describe, a completed workflow's result, the
// stuck-start rule's pickup check and termination, and the same for a
// TEMPORAL_WORKFLOW child) a Temporal that goes away at its second
// question, refusing it at once or hanging (its health check too), and
// requires that every question waits at most the start timeout, that the
// walk stops at that answer, once the health check is not answered either,
// instead of asking about every execution and child left, that
// what was recorded before it is written, and that what the walk did not
// reach is untouched (not recorded, not terminated, not ended: an outage
// is no verdict) and walked again by the next run, from the same place.
func TestReconcilerStopsAtAnOutageAndBoundsEachQuestion(t *testing.T) {
	t.Parallel()
	const askTimeout = 200 * time.Millisecond
	old := time.Now().Add(-time.Hour)
	// A page of three executions, a fourth on the next page, and a
	// TEMPORAL_WORKFLOW child of each of the first three.
	var e [4]domain.ID
	var running []domain.Execution
	var children []ports.RunningChild
	for i := range e {
		e[i] = domain.ID(uuid.New())
		running = append(running, domain.Execution{ID: e[i], AdmittedAt: old.Add(time.Duration(i) * time.Second)})
		if i < 3 {
			children = append(children, ports.RunningChild{ExecutionID: e[i], NodeKey: "team", WorkflowID: fmt.Sprint("child-", i), RunID: "1", StartedAt: old})
		}
	}
	abandoned := ports.WorkflowPickup{TaskQueue: "nobody-polls"}
	d := func(i int) string { return question("DescribeWorkflow", e[i]) }
	result := func(i int) string { return question("WorkflowResult", e[i]) }
	pickup := func(i int) string { return question("WorkflowPickup", e[i]) }
	terminate := func(i int) string { return question("TerminateWorkflow", e[i]) }
	childPickup := func(i int) string { return question("ChildPickup", children[i].WorkflowID) }
	endChild := func(i int) string { return question("EndAbandonedChild", children[i].WorkflowID) }
	walked := []string{d(0), pickup(0), d(1), pickup(1), d(2), pickup(2)}

	for _, pass := range []struct {
		name  string
		setUp func(*faultyTemporal)
		// failing is the question Temporal fails; asked, what the walk
		// asks, up to and including it.
		failing    string
		asked      []string
		finished   map[domain.ID]domain.ExecutionStatus
		terminated []domain.ID
		ended      []string
	}{{
		name:     "describe",
		setUp:    func(f *faultyTemporal) { f.states[e[0]] = ports.WorkflowCompleted },
		failing:  d(1),
		asked:    []string{d(0), result(0), d(1)},
		finished: map[domain.ID]domain.ExecutionStatus{e[0]: domain.ExecutionCompleted},
	}, {
		name: "result",
		setUp: func(f *faultyTemporal) {
			f.states[e[0]], f.states[e[1]], f.states[e[2]] = ports.WorkflowCompleted, ports.WorkflowCompleted, ports.WorkflowCompleted
		},
		failing:  result(1),
		asked:    []string{d(0), result(0), d(1), result(1)},
		finished: map[domain.ID]domain.ExecutionStatus{e[0]: domain.ExecutionCompleted},
	}, {
		name:       "stuck start's pickup",
		setUp:      func(f *faultyTemporal) { f.pickups[e[0]], f.pickups[e[2]] = abandoned, abandoned },
		failing:    pickup(1),
		asked:      []string{d(0), pickup(0), terminate(0), d(1), pickup(1)},
		finished:   map[domain.ID]domain.ExecutionStatus{e[0]: domain.ExecutionFailed},
		terminated: []domain.ID{e[0]},
	}, {
		name: "stuck start's termination",
		setUp: func(f *faultyTemporal) {
			f.pickups[e[0]], f.pickups[e[1]], f.pickups[e[2]] = abandoned, abandoned, abandoned
		},
		failing:    terminate(1),
		asked:      []string{d(0), pickup(0), terminate(0), d(1), pickup(1), terminate(1)},
		finished:   map[domain.ID]domain.ExecutionStatus{e[0]: domain.ExecutionFailed},
		terminated: []domain.ID{e[0]},
	}, {
		name: "child's pickup",
		setUp: func(f *faultyTemporal) {
			f.childPickups[children[0].WorkflowID], f.childPickups[children[2].WorkflowID] = abandoned, abandoned
		},
		failing: childPickup(1),
		asked:   append(slices.Clone(walked), childPickup(0), endChild(0), childPickup(1)),
		ended:   []string{children[0].WorkflowID},
	}, {
		name: "child's end",
		setUp: func(f *faultyTemporal) {
			for _, c := range children {
				f.childPickups[c.WorkflowID] = abandoned
			}
		},
		failing: endChild(1),
		asked:   append(slices.Clone(walked), childPickup(0), endChild(0), childPickup(1), endChild(1)),
		ended:   []string{children[0].WorkflowID},
	}} {
		for _, outage := range []temporalFault{refuses, hangs} {
			t.Run(pass.name+"/"+outage.String(), func(t *testing.T) {
				t.Parallel()
				engine := newFaultyTemporal()
				pass.setUp(engine)
				engine.faults[pass.failing], engine.faults[healthCheck] = outage, outage
				store := childStore{pagedStore: &pagedStore{running: running}, children: children}
				rec := &finishRecorder{finished: map[domain.ID]domain.ExecutionStatus{}}
				b := dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, dispatch.NewMetrics(prometheus.NewRegistry()))
				r := NewReconciler(store, rec, engine, b, apptest.NewLease(), 0, askTimeout, 3, testSchedule(), NewReconcilerMetrics(prometheus.NewRegistry()),
					dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog()).FailStuckStartsAfter(time.Minute).FailStuckChildren(engine)

				began := time.Now()
				n, err := r.Reconcile(context.Background())
				took := time.Since(began)

				if !errors.Is(err, ports.ErrEngineUnavailable) || n != len(pass.finished) {
					t.Errorf("Reconcile = %d, %v; want the %d recorded before the outage, and the outage as its error", n, err, len(pass.finished))
				}
				asked := engine.questions()
				if want := append(slices.Clone(pass.asked), healthCheck); !slices.Equal(asked, want) {
					t.Errorf("asked Temporal\n%s\nwant, stopping at the first unavailable answer:\n%s", strings.Join(asked, "\n"), strings.Join(want, "\n"))
				}
				engine.requireBounded(t, askTimeout)
				if fmt.Sprint(rec.finished) != fmt.Sprint(pass.finished) {
					t.Errorf("recorded %v; want %v, the rest untouched", rec.finished, pass.finished)
				}
				if !slices.Equal(engine.terminated, pass.terminated) || !slices.Equal(engine.ended, pass.ended) {
					t.Errorf("terminated %v, ended children %v; want %v, %v", engine.terminated, engine.ended, pass.terminated, pass.ended)
				}

				// Temporal is back: the next run walks the same page again,
				// from where the stopped one began, and reaches what it
				// did not.
				delete(engine.faults, pass.failing)
				delete(engine.faults, healthCheck)
				if _, err := r.Reconcile(context.Background()); err != nil {
					t.Fatal(err)
				}
				if store.cursors[1] != store.cursors[0] {
					t.Errorf("the run after the outage resumed at %v; want where the stopped run began, %v", store.cursors[1], store.cursors[0])
				}
				if again := engine.questions()[len(asked):]; !slices.Contains(again, pass.failing) {
					t.Errorf("the run after the outage asked %v; want %q among them", again, pass.failing)
				}
				t.Logf("%s, %s: asked %d questions, recorded %d, returned after %v", pass.name, outage, len(asked), n, took.Round(time.Millisecond))
			})
		}
	}
}

// TestTheCloseWatchRecordsWhatItListedBeforeAnOutageAndBoundsItsQuestion
// gives the close watch a Temporal that goes away while it reads the
// second of three closed workflows' reasons (refused at once, or
// hanging), and requires that the listing waits at most the start
// timeout, that it stops there, and that the workflow read before is
// recorded while the rest are not.
func TestTheCloseWatchRecordsWhatItListedBeforeAnOutageAndBoundsItsQuestion(t *testing.T) {
	t.Parallel()
	const askTimeout = 200 * time.Millisecond
	for _, outage := range []temporalFault{refuses, hangs} {
		t.Run(outage.String(), func(t *testing.T) {
			t.Parallel()
			engine := newFaultyTemporal()
			for range 3 {
				engine.closed = append(engine.closed, ports.ClosedWorkflow{ExecutionID: domain.ID(uuid.New()), State: ports.WorkflowTerminated, Reason: "by hand"})
			}
			first, failing := question("ClosedOutsideSluice", engine.closed[0].ExecutionID), question("ClosedOutsideSluice", engine.closed[1].ExecutionID)
			engine.faults[failing] = outage
			rec := &messageRecorder{}
			b := dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, dispatch.NewMetrics(prometheus.NewRegistry()))
			r := NewReconciler(&pagedStore{}, rec, engine, b, apptest.NewLease(), 0, askTimeout, 10, testSchedule(), NewReconcilerMetrics(prometheus.NewRegistry()),
				dispatch.NewLeaseMetrics(prometheus.NewRegistry()), discardLog()).WatchClosed(engine, DefaultJobSchedule())

			n, err := r.RecordClosed(context.Background(), time.Now().Add(-time.Minute))

			if !errors.Is(err, ports.ErrEngineUnavailable) || n != 1 {
				t.Errorf("RecordClosed = %d, %v; want the one listed before the outage, and the outage as its error", n, err)
			}
			if asked := engine.questions(); !slices.Equal(asked, []string{first, failing}) {
				t.Errorf("asked Temporal %v; want %v, stopping at the first unavailable answer", asked, []string{first, failing})
			}
			engine.requireBounded(t, askTimeout)
			want := engine.closed[0].ExecutionID.String() + " FAILED workflow terminated outside Sluice: by hand"
			if len(rec.calls) != 1 || rec.calls[0] != want {
				t.Errorf("recorded %q; want [%q] alone", rec.calls, want)
			}
		})
	}
}
