package maintenance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// terminatedRuns are n RUNNING executions a second apart, an hour old,
// whose workflows engine says were terminated outside Sluice.
func terminatedRuns(engine *faultyTemporal, n int) []domain.Execution {
	old := time.Now().Add(-time.Hour)
	running := make([]domain.Execution, n)
	for i := range running {
		running[i] = domain.Execution{ID: domain.ID(uuid.New()), AdmittedAt: old.Add(time.Duration(i) * time.Second)}
		engine.states[running[i].ID] = ports.WorkflowTerminated
	}
	return running
}

// newWalkUnderTest is a reconciler over running in pages of pageSize,
// asking engine within askTimeout, logging to log.
func newWalkUnderTest(running []domain.Execution, engine *faultyTemporal, askTimeout time.Duration, pageSize int, log *bytes.Buffer) (*Reconciler, *pagedStore, *finishRecorder, *ReconcilerMetrics) {
	store := &pagedStore{running: running}
	rec := &finishRecorder{finished: map[domain.ID]domain.ExecutionStatus{}}
	metrics := NewReconcilerMetrics(prometheus.NewRegistry())
	b := dispatch.NewBreaker(dispatch.DefaultBreakerBackoff, dispatch.NewMetrics(prometheus.NewRegistry()))
	r := NewReconciler(store, rec, engine, b, apptest.NewLease(), 0, askTimeout, pageSize, testSchedule(), metrics,
		dispatch.NewLeaseMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(log, nil)))
	return r, store, rec, metrics
}

// TestTheWalkGoesPastAWorkflowTemporalNeverAnswersAbout gives the walk
// six executions whose workflows were terminated outside Sluice, in pages
// of four, and a Temporal that answers every question but the describe of
// the second (refusing it, or letting it hang), its health check
// included. It requires that the first walk (two pages) records the five
// others, those after the unanswered one on its page and on the next;
// that the unanswered one is never recorded or terminated but asked about
// again on every walk; that the reconciler warns about it once, naming it,
// and counts it once in reconciler_unanswered_workflows_total, at the
// third walk in a row, from which reconciler_unanswered_workflows reads 1;
// and that it is recorded at the first walk after Temporal answers about
// it, the gauge then reading 0. On the rule before passOver (stop at every
// unanswered question) the walk never left the first page.
func TestTheWalkGoesPastAWorkflowTemporalNeverAnswersAbout(t *testing.T) {
	t.Parallel()
	const askTimeout = 200 * time.Millisecond
	for _, fault := range []temporalFault{refuses, hangs} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			engine := newFaultyTemporal()
			running := terminatedRuns(engine, 6)
			stuck := running[1].ID
			engine.faults[question("DescribeWorkflow", stuck)] = fault
			var log bytes.Buffer
			r, store, rec, metrics := newWalkUnderTest(running, engine, askTimeout, 4, &log)
			// walk runs one walk, its two pages, and returns the questions
			// it asked about stuck.
			walk := func() []string {
				t.Helper()
				before := len(engine.questions())
				for range 2 {
					if _, err := r.Reconcile(context.Background()); err != nil {
						t.Fatalf("Reconcile = %v; want the walk to go past the unanswered workflow", err)
					}
				}
				var about []string
				for _, q := range engine.questions()[before:] {
					if strings.HasSuffix(q, stuck.String()) {
						about = append(about, q)
					}
				}
				return about
			}
			warnings := func() int { return strings.Count(log.String(), "Temporal keeps leaving a workflow unanswered") }

			walk()
			var others []domain.ID
			for _, e := range running {
				if e.ID != stuck {
					others = append(others, e.ID)
				}
			}
			if got := slices.Collect(maps.Keys(rec.finished)); len(got) != len(others) || slices.Contains(got, stuck) {
				t.Fatalf("the first walk recorded %v; want the five answered about (%v), not %s", rec.finished, others, stuck)
			}
			for walks := 2; walks <= unansweredRunsToReport+2; walks++ {
				if about := walk(); !slices.Equal(about, []string{question("DescribeWorkflow", stuck)}) {
					t.Fatalf("walk %d asked about the unanswered workflow %v; want its describe once", walks, about)
				}
				reported := 0
				if walks >= unansweredRunsToReport {
					reported = 1
				}
				if got := testutil.ToFloat64(metrics.UnansweredWorkflows); got != float64(reported) || warnings() != reported {
					t.Fatalf("after walk %d: reconciler_unanswered_workflows_total = %v, %d warnings; want %d of each", walks, got, warnings(), reported)
				}
				if now := testutil.ToFloat64(metrics.UnansweredWorkflowsNow); now != float64(reported) {
					t.Fatalf("after walk %d: reconciler_unanswered_workflows = %v; want %d", walks, now, reported)
				}
			}
			if _, ok := rec.finished[stuck]; ok || len(engine.terminated) != 0 {
				t.Fatalf("recorded %v, terminated %v; want the unanswered workflow left RUNNING", rec.finished, engine.terminated)
			}
			if !strings.Contains(log.String(), "execution_id="+stuck.String()) {
				t.Errorf("the warning does not name the execution %s:\n%s", stuck, log.String())
			}

			// Temporal answers about it again: the next walk records it.
			delete(engine.faults, question("DescribeWorkflow", stuck))
			walk()
			if rec.finished[stuck] != domain.ExecutionFailed {
				t.Errorf("after Temporal answered, recorded %v; want %s FAILED", rec.finished, stuck)
			}
			if now := testutil.ToFloat64(metrics.UnansweredWorkflowsNow); now != 0 {
				t.Errorf("after Temporal answered, reconciler_unanswered_workflows = %v; want 0", now)
			}
			t.Logf("%s: %d Reconcile calls, %d questions, %d warning", fault, len(store.cursors), len(engine.questions()), warnings())
		})
	}
}

// TestAnOutageStopsTheWalkWithoutGoingPastAnything gives the walk forty
// executions whose workflows were terminated outside Sluice, on one page,
// and a Temporal that answers no question about them: in one case its
// health check is not answered either (Temporal is away); in another the
// dispatcher's breaker is open (its health check is then not asked); in
// the last the health check is answered (the frontend serves, the service
// that keeps workflows does not). It requires that each of four runs
// stops with the outage as its error, having asked about the first
// execution only, or (health answered) having gone past those the runs
// before went past, known stuck, and at most passOverInARowMax new ones;
// that no run is recorded or terminated and no workflow counted or
// reported as unanswered; that every run starts at the same place, so
// that nothing is skipped; and that once Temporal answers the next run
// records all forty.
func TestAnOutageStopsTheWalkWithoutGoingPastAnything(t *testing.T) {
	t.Parallel()
	for _, outage := range []struct {
		name                       string
		healthAnswers, breakerOpen bool
	}{{"temporal away", false, false}, {"breaker open", true, true}, {"only the health check answers", true, false}} {
		t.Run(outage.name, func(t *testing.T) {
			t.Parallel()
			engine := newFaultyTemporal()
			running := terminatedRuns(engine, 40)
			d := func(i int) string { return question("DescribeWorkflow", running[i].ID) }
			for i := range running {
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
			r, store, rec, metrics := newWalkUnderTest(running, engine, time.Second, 50, &log)
			if outage.breakerOpen {
				r.breaker.Trip(time.Now(), ports.ErrEngineUnavailable)
			}

			for run := range 4 {
				before := len(engine.questions())
				n, err := r.Reconcile(context.Background())
				if !errors.Is(err, ports.ErrEngineUnavailable) || n != 0 {
					t.Fatalf("run %d: Reconcile = %d, %v; want nothing recorded and the outage as its error", run, n, err)
				}
				if asked := engine.questions()[before:]; !slices.Equal(asked, want(run)) {
					t.Fatalf("run %d asked Temporal\n%s\nwant\n%s", run, strings.Join(asked, "\n"), strings.Join(want(run), "\n"))
				}
			}
			if len(rec.finished) != 0 || len(engine.terminated) != 0 {
				t.Fatalf("recorded %v, terminated %v during the outage; want nothing", rec.finished, engine.terminated)
			}
			if got := testutil.ToFloat64(metrics.UnansweredWorkflows) + testutil.ToFloat64(metrics.UnansweredWorkflowsNow); got != 0 || strings.Contains(log.String(), "keeps leaving") {
				t.Fatalf("reconciler_unanswered_workflows_total = %v during the outage, log:\n%s\nwant none counted or reported", got, log.String())
			}

			clear(engine.faults)
			r.breaker.Reset()
			if n, err := r.Reconcile(context.Background()); err != nil || n != len(running) {
				t.Fatalf("after the outage Reconcile = %d, %v; want all %d recorded", n, err, len(running))
			}
			for i, c := range store.cursors {
				if c != (ports.ExecutionCursor{}) {
					t.Errorf("run %d began at %v; want every run at the start of the stopped page", i, c)
				}
			}
			t.Logf("%s: %s", outage.name, fmt.Sprint(len(engine.questions()), " questions in ", len(store.cursors), " runs"))
		})
	}
}

// TestTheWalkGoesPastAChildTemporalNeverAnswersAbout gives the walk a
// running execution with two TEMPORAL_WORKFLOW children no worker picked
// up, on queues no worker polls, and a Temporal that refuses every
// question about the first child (its health check answered). It requires
// that each walk ends the second child and goes past the first without
// ending it, and that the first is counted once, at the third walk.
func TestTheWalkGoesPastAChildTemporalNeverAnswersAbout(t *testing.T) {
	t.Parallel()
	engine := newFaultyTemporal()
	old := time.Now().Add(-time.Hour)
	run := domain.Execution{ID: domain.ID(uuid.New()), AdmittedAt: old}
	children := []ports.RunningChild{
		{ExecutionID: run.ID, NodeKey: "a", WorkflowID: "unanswered", RunID: "1", StartedAt: old},
		{ExecutionID: run.ID, NodeKey: "b", WorkflowID: "abandoned", RunID: "1", StartedAt: old},
	}
	for _, c := range children {
		engine.childPickups[c.WorkflowID] = ports.WorkflowPickup{TaskQueue: "nobody-polls"}
	}
	engine.faults[question("ChildPickup", "unanswered")] = refuses
	var log bytes.Buffer
	r, store, rec, metrics := newWalkUnderTest([]domain.Execution{run}, engine, time.Second, 10, &log)
	r.store = childStore{pagedStore: store, children: children}
	r.FailStuckStartsAfter(time.Minute).FailStuckChildren(engine)

	for walk := 1; walk <= unansweredRunsToReport+1; walk++ {
		if _, err := r.Reconcile(context.Background()); err != nil {
			t.Fatalf("walk %d: Reconcile = %v; want the walk to go past the unanswered child", walk, err)
		}
		if !slices.Equal(engine.ended, slices.Repeat([]string{"abandoned"}, walk)) {
			t.Fatalf("after walk %d ended %v; want the abandoned child ended on each walk, never the unanswered one", walk, engine.ended)
		}
		reported := 0
		if walk >= unansweredRunsToReport {
			reported = 1
		}
		if got := testutil.ToFloat64(metrics.UnansweredWorkflows); got != float64(reported) {
			t.Fatalf("after walk %d reconciler_unanswered_workflows_total = %v; want %d", walk, got, reported)
		}
	}
	if len(rec.finished) != 0 || !strings.Contains(log.String(), "node=a") {
		t.Errorf("recorded %v; want the run left RUNNING, and the warning naming the child's node:\n%s", rec.finished, log.String())
	}
}

// TestALoneRunTemporalNeverAnswersAboutIsReported gives the walk a single
// RUNNING execution, whose describe Temporal always refuses while its
// health check answers, and requires that each walk goes past it (no
// question about another is answered, but the page is walked to its end)
// and that it is reported once, at the third walk.
func TestALoneRunTemporalNeverAnswersAboutIsReported(t *testing.T) {
	t.Parallel()
	engine := newFaultyTemporal()
	running := terminatedRuns(engine, 1)
	engine.faults[question("DescribeWorkflow", running[0].ID)] = refuses
	var log bytes.Buffer
	r, _, rec, metrics := newWalkUnderTest(running, engine, time.Second, 10, &log)
	for walk := 1; walk <= unansweredRunsToReport+1; walk++ {
		if _, err := r.Reconcile(context.Background()); err != nil {
			t.Fatalf("walk %d: Reconcile = %v; want the walk to go past the run", walk, err)
		}
		reported := 0
		if walk >= unansweredRunsToReport {
			reported = 1
		}
		if got := testutil.ToFloat64(metrics.UnansweredWorkflows); got != float64(reported) {
			t.Fatalf("after walk %d reconciler_unanswered_workflows_total = %v; want %d", walk, got, reported)
		}
	}
	if len(rec.finished) != 0 || !strings.Contains(log.String(), "execution_id="+running[0].ID.String()) {
		t.Errorf("recorded %v; want the run left RUNNING and named in the warning:\n%s", rec.finished, log.String())
	}
}
