package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/examples/teamservice"
)

// The gated-workflow benchmark (issue 35): what Sluice's gate costs a team
// that starts its own workflow type through it rather than with Temporal's
// client.ExecuteWorkflow. Both paths start the example's ChargeCustomer on
// the team's own task queue, served by one worker in this process, on the
// same Temporal server, in the same run, interleaved:
//
//	(1) latency: from just before the enqueue (gated) or the ExecuteWorkflow
//	    call (direct) to the team workflow's first WorkflowTaskStarted, read
//	    from its history, at a steady pace; the p50 of the gated path may be
//	    at most 10 ms more than the direct one's;
//	(2) rate: N charges over 20 ENTERPRISE tenants from 32 callers, gated
//	    between two direct rounds, timed from the first call until every
//	    team workflow had started (direct: the last ExecuteWorkflow
//	    returned; gated: the server's WorkflowExecutionStarted of the last
//	    child, with the time Sluice's record of it was seen beside it),
//	    which must be at least 80 % of the direct rate, and until every
//	    one had completed (gated: every run, the parent's end being part
//	    of its price), printed beside it, with the CPU time each part of
//	    the stack spent per charge (stackCPU) and how busy the machine's
//	    cores were: on a machine whose cores are all busy, the rates'
//	    ratio is bounded by the ratio of those CPU costs.

var (
	gatedLatencyRuns = benchSize(40, 3)
	gatedRateRuns    = benchSize(400, 20)
)

const gatedLatencyPace = 100 * time.Millisecond

func BenchmarkGatedTemporalWorkflowAgainstDirect(b *testing.B) {
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if addr == "" {
		b.Skip("TEMPORAL_ADDRESS not set: run through `make bench`")
	}
	c, err := client.Dial(client.Options{HostPort: addr, Logger: harness.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	before, err := c.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Query: "ExecutionStatus = 'Running'"})
	if err != nil {
		b.Fatal(err)
	}
	quiet := before.GetCount()
	for range b.N {
		gatedBenchOnce(b, c, quiet)
	}
}

// gatedBench is one Sluice and one team worker, and the tenants whose
// gating definitions start ChargeCustomer on the team's queue.
type gatedBench struct {
	b       *testing.B
	c       client.Client
	base    string
	queue   string
	db      *pgx.Conn
	tenants []gatedBenchTenant
	// recordedAt is when the gated rate phase saw Sluice's record of its
	// last child's start, and rateEvents the mean length of its runs'
	// histories.
	recordedAt time.Time
	rateEvents float64
}

type gatedBenchTenant struct{ ws, def string }

func gatedBenchOnce(b *testing.B, c client.Client, quiet int64) {
	loadBefore := benchLoad()
	benchSettle(b, c, quiet, nil)
	g := &gatedBench{b: b, c: c, queue: "bench-team-" + uuid.NewString()[:8]}
	g.base = harness.StartSluice(b, nil)
	db, err := pgx.Connect(context.Background(), harness.AppsByBase[g.base].DBURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close(context.Background())
	g.db = db
	w := worker.New(c, g.queue, worker.Options{})
	teamservice.Register(w)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for range benchWorkspaces {
		var ws struct{ ID string }
		if code := harness.Call(b, "POST", g.base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "gated-bench", "plan": "ENTERPRISE"}, &ws); code != 201 {
			b.Fatalf("create workspace: %d", code)
		}
		harness.AllowTaskQueue(b, g.base, ws.ID, g.queue, teamservice.WorkflowType)
		var def struct{ ID string }
		if code := harness.Call(b, "POST", g.base+"/api/v1/workflow/definitions", harness.TestAdminToken,
			map[string]any{"workspaceId": ws.ID, "name": "charge", "graph": harness.ChargeGraph(g.queue, nil)}, &def); code != 201 {
			b.Fatalf("create the gating definition: %d", code)
		}
		g.tenants = append(g.tenants, gatedBenchTenant{ws.ID, def.ID})
	}

	// (1) latency, the two paths interleaved one start at a time.
	var gatedLat, directLat, directCall, directPickup []time.Duration
	var legs [5][]time.Duration // dispatch, parentPickup, parentTask, childStart, pickup
	var last gatedLegs
	var directEvents int
	for n := range gatedLatencyRuns {
		last = g.gatedLegs(g.gatedStart(n%benchWorkspaces, n))
		gatedLat = append(gatedLat, last.total)
		for i, d := range []time.Duration{last.dispatch, last.parentPickup, last.parentTask, last.childStart, last.pickup} {
			legs[i] = append(legs[i], d)
		}
		at, id := g.directStart(n)
		d := g.historyOf(id)
		directLat, directCall, directPickup = append(directLat, d.firstTask.Sub(at)), append(directCall, d.started.Sub(at)), append(directPickup, d.firstTask.Sub(d.started))
		directEvents = d.events
		time.Sleep(gatedLatencyPace) // paces the starts; not synchronisation
	}
	gp50, dp50 := p50(gatedLat), p50(directLat)
	added := gp50 - dp50

	// (2) rate, direct then gated then direct, the gated figure against
	// the mean of the two beside it, each phase's CPU read per part of
	// the stack.
	benchSettle(b, c, quiet, nil)
	direct1 := g.rate(g.directStartOnly, g.directWait)
	benchSettle(b, c, quiet, g.db)
	gated := g.rate(g.gatedEnqueue, g.gatedWait(g.childrenStarted(), g.completed()))
	recorded := benchRate(gatedRateRuns, g.recordedAt.Sub(gated.began))
	benchSettle(b, c, quiet, g.db)
	direct2 := g.rate(g.directStartOnly, g.directWait)
	ratio := 100 * gated.starts / ((direct1.starts + direct2.starts) / 2)
	doneRatio := 100 * gated.completions / ((direct1.completions + direct2.completions) / 2)

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== gated Temporal workflow: the example's ChargeCustomer started through Sluice (a one-node TEMPORAL_WORKFLOW definition) against a direct ExecuteWorkflow, same server, same worker, same run; load average %s before, %s after ==\n",
		loadBefore, benchLoad())
	fmt.Fprintf(&sb, "(1) call -> the team workflow's first workflow task, %d of each, interleaved every %v: gated p50 %v p99 %v, direct p50 %v p99 %v; added p50 %v [target <= 10 ms: %s]\n",
		gatedLatencyRuns, gatedLatencyPace, gp50.Round(100*time.Microsecond), benchPercentile(gatedLat, 99).Round(100*time.Microsecond),
		dp50.Round(100*time.Microsecond), benchPercentile(directLat, 99).Round(100*time.Microsecond), added.Round(100*time.Microsecond), benchVerdict(added <= 10*time.Millisecond))
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	fmt.Fprintf(&sb, "    gated legs, p50: enqueue -> the run's workflow started %v (Sluice: API, admission, claim, start call), -> its first workflow task started %v (the server hands it to Sluice's worker), -> completed %v (Sluice's worker: settings, admission, allow-list, start command), -> the child started %v (the server), -> the child's first workflow task %v (the team worker's pickup)\n",
		r(p50(legs[0])), r(p50(legs[1])), r(p50(legs[2])), r(p50(legs[3])), r(p50(legs[4])))
	fmt.Fprintf(&sb, "    direct legs, p50: call -> started %v, -> its first workflow task %v; events: the run %d + the child %d, direct %d\n",
		r(p50(directCall)), r(p50(directPickup)), last.parentEvents, last.childEvents, directEvents)
	fmt.Fprintf(&sb, "(2) %d charges over %d ENTERPRISE tenants from %d callers, starts per second until all had started (the server's WorkflowExecutionStarted of the last team workflow; direct: the last ExecuteWorkflow returned): gated %.1f/s, direct %.1f/s and %.1f/s (before and after): %.1f %% [target >= 80 %%: %s]\n",
		gatedRateRuns, benchWorkspaces, benchCallers, gated.starts, direct1.starts, direct2.starts, ratio, benchVerdict(ratio >= 80))
	fmt.Fprintf(&sb, "    gated, until Sluice's record of the last child's start was seen (after the run's next workflow task): %.1f/s; the runs' histories: %.1f events on average (%d in the latency phase's last)\n",
		recorded, g.rateEvents, last.parentEvents)
	fmt.Fprintf(&sb, "    completed per second until all had completed (gated: the run, the child's end and the parent's): gated %.1f/s, direct %.1f/s and %.1f/s: %.1f %%\n",
		gated.completions, direct1.completions, direct2.completions, doneRatio)
	for _, p := range []struct {
		name string
		f    rateFigures
	}{{"direct (before)", direct1}, {"gated", gated}, {"direct (after)", direct2}} {
		fmt.Fprintf(&sb, "    CPU per charge, started to completed, %s: %s; the machine's %d cores %.0f %% busy\n",
			p.name, p.f.cpu.perStart(gatedRateRuns), runtime.NumCPU(), 100*p.f.busy)
	}
	benchPrint(sb.String())
	benchMetric(b, float64(added.Microseconds())/1000, "gated_added_p50_ms")
	benchMetric(b, ratio, "gated_%_of_direct_starts")
	benchMetric(b, doneRatio, "gated_%_of_direct_completions")
}

// gatedStart enqueues charge n in tenant i and returns when it called and
// the run's execution id once Sluice has started it.
func (g *gatedBench) gatedStart(i, n int) (time.Time, string) {
	tn := g.tenants[i]
	input := teamservice.ChargeInput{Customer: fmt.Sprintf("c%d", n), AmountCents: 100}
	var started struct {
		QueueID string `json:"queueId"`
	}
	at := time.Now()
	if code := harness.Call(g.b, "POST", g.base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": tn.ws, "workflowDefinitionId": tn.def, "input": input}, &started); code != 202 {
		g.b.Fatalf("enqueue: %d", code)
	}
	return at, harness.ExecutionOf(g.b, g.base, tn.ws, started.QueueID)
}

// directStart starts charge n with ExecuteWorkflow, as the team would
// without Sluice.
func (g *gatedBench) directStart(n int) (time.Time, string) {
	id := fmt.Sprintf("direct-%s-%d", uuid.NewString()[:8], n)
	at := time.Now()
	if _, err := g.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: g.queue},
		teamservice.WorkflowType, teamservice.ChargeInput{Customer: fmt.Sprintf("c%d", n), AmountCents: 100}); err != nil {
		g.b.Fatal(err)
	}
	return at, id
}

// history is what the bench reads of one workflow's history: when it
// started, when its first workflow task was scheduled, started and
// completed, when it recorded its first child's start, and its length.
type history struct {
	started, firstTask          time.Time
	firstScheduled, firstClosed time.Time
	childStarted                time.Time
	events                      int
}

// historyOf waits for the workflow's first workflow task and reads its
// history to its end.
func (g *gatedBench) historyOf(workflowID string) history {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var h history
		it := g.c.GetWorkflowHistory(ctx, workflowID, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			h.events++
			at := ev.GetEventTime().AsTime()
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				h.started = at
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
				if h.firstScheduled.IsZero() {
					h.firstScheduled = at
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				if h.firstTask.IsZero() {
					h.firstTask = at
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				if h.firstClosed.IsZero() {
					h.firstClosed = at
				}
			case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
				if h.childStarted.IsZero() {
					h.childStarted = at
				}
			}
		}
		if !h.firstTask.IsZero() {
			return h
		}
		if ctx.Err() != nil {
			g.b.Fatalf("no workflow task started for %s within a minute", workflowID)
		}
		time.Sleep(20 * time.Millisecond) // a gated child's start is not announced; polled
	}
}

// gatedLegs is one gated start's time from the enqueue to the team
// workflow's first workflow task, in its legs, each read from the
// histories' event times (one clock: the server's):
//
//   - dispatch: the enqueue to the run's WorkflowExecutionStarted
//     (Sluice's API, admission, the dispatcher's claim and start call);
//   - parentPickup: that to the run's first WorkflowTaskStarted (the
//     server hands the task to Sluice's worker: the wait a direct start
//     pays before its first task too);
//   - parentTask: that task's start to its completion (Sluice's worker:
//     the settings, the admission check, the allow-list read, the start
//     command);
//   - childStart: the task's completion to the child's
//     WorkflowExecutionStarted (the server starts the child);
//   - pickup: that to the child's first workflow task (the team worker's
//     pickup, which a direct start pays as well).
type gatedLegs struct {
	total, dispatch, parentPickup, parentTask, childStart, pickup time.Duration
	parentEvents, childEvents                                     int
}

func (g *gatedBench) gatedLegs(at time.Time, execID string) gatedLegs {
	child := g.historyOf("execution-" + execID + "/charge")
	parent := g.historyOf("execution-" + execID)
	return gatedLegs{
		total: child.firstTask.Sub(at), dispatch: parent.started.Sub(at),
		parentPickup: parent.firstTask.Sub(parent.started), parentTask: parent.firstClosed.Sub(parent.firstTask),
		childStart: child.started.Sub(parent.firstClosed), pickup: child.firstTask.Sub(child.started),
		parentEvents: parent.events, childEvents: child.events,
	}
}

// p50 is the median of ds, which it sorts.
func p50(ds []time.Duration) time.Duration {
	benchSortDurations(ds)
	return benchPercentile(ds, 50)
}

// rateFigures are one rate phase's starts and completions per second,
// each from the phase's first call, the CPU each part of the stack spent
// meanwhile, and how busy the machine was.
type rateFigures struct {
	starts, completions float64
	cpu                 stackCPU
	busy                float64
	began               time.Time
}

// rate starts gatedRateRuns charges through start from benchCallers
// callers and waits with wait, which returns when all had started, until
// all have completed.
func (g *gatedBench) rate(start func(n int) string, wait func(ids []string, called time.Time) (started time.Time)) rateFigures {
	var next atomic.Int64
	var wg sync.WaitGroup
	ids := make([]string, gatedRateRuns)
	cpu := readStackCPU()
	began := time.Now()
	for range benchCallers {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= gatedRateRuns {
					return
				}
				ids[n] = start(n)
			}
		})
	}
	wg.Wait()
	started := wait(ids, time.Now())
	spent, busy := readStackCPU().since(cpu)
	return rateFigures{starts: benchRate(gatedRateRuns, started.Sub(began)), completions: benchRate(gatedRateRuns, time.Since(began)), cpu: spent, busy: busy, began: began}
}

// directStartOnly starts charge n with ExecuteWorkflow, as the team would
// without Sluice, and returns its workflow id.
func (g *gatedBench) directStartOnly(n int) string {
	id := fmt.Sprintf("direct-%s-%d", uuid.NewString()[:8], n)
	if _, err := g.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: g.queue},
		teamservice.WorkflowType, teamservice.ChargeInput{Customer: fmt.Sprintf("c%d", n), AmountCents: 100}); err != nil {
		g.b.Error(err)
	}
	return id
}

// directWait waits for every direct charge's result; they had all
// started when the last ExecuteWorkflow returned.
func (g *gatedBench) directWait(ids []string, called time.Time) time.Time {
	for _, id := range ids {
		if err := g.c.GetWorkflow(context.Background(), id, "").Get(context.Background(), nil); err != nil {
			g.b.Fatal(err)
		}
	}
	return called
}

// gatedEnqueue enqueues charge n in the next tenant, as a team calling
// Sluice would, and returns its queue item's id.
func (g *gatedBench) gatedEnqueue(n int) string {
	tn := g.tenants[n%len(g.tenants)]
	input := teamservice.ChargeInput{Customer: fmt.Sprintf("c%d", n), AmountCents: 100}
	var started struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(g.b, "POST", g.base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": tn.ws, "workflowDefinitionId": tn.def, "input": input}, &started); code != 202 {
		g.b.Errorf("enqueue: %d", code)
	}
	return started.QueueID
}

// gatedWait waits until every run of the phase has started its child
// (the database's count of node records naming a child has grown by the
// phase's) and then completed (its count of COMPLETED runs has). It
// returns when the last child started as the server recorded it (its
// WorkflowExecutionStarted, the event a direct start's return stands
// for), and notes in g.recordedAt when Sluice's record of it was seen,
// which comes after the run's next workflow task.
func (g *gatedBench) gatedWait(fromStarted, fromCompleted int) func([]string, time.Time) time.Time {
	return func(queueIDs []string, _ time.Time) time.Time {
		deadline := time.Now().Add(5 * time.Minute)
		for g.childrenStarted() < fromStarted+gatedRateRuns {
			if time.Now().After(deadline) {
				g.b.Fatalf("%d of %d gated children started within 5 minutes", g.childrenStarted()-fromStarted, gatedRateRuns)
			}
			time.Sleep(20 * time.Millisecond) // polled: Sluice's records are rows
		}
		g.recordedAt = time.Now()
		for g.completed() < fromCompleted+gatedRateRuns {
			if time.Now().After(deadline) {
				g.b.Fatalf("%d of %d gated runs completed within 5 minutes", g.completed()-fromCompleted, gatedRateRuns)
			}
			time.Sleep(20 * time.Millisecond) // polled: Sluice's completions are rows
		}
		return g.lastChildStarted(queueIDs)
	}
}

// lastChildStarted is when the last child of the queue items' runs
// started, as the server recorded it, and notes in g.rateEvents the
// mean length of those runs' histories: the server batches the events
// that arrive while a workflow task waits into that task, so a busy
// server can give a run fewer workflow tasks than an idle one.
func (g *gatedBench) lastChildStarted(queueIDs []string) time.Time {
	rows, err := g.db.Query(context.Background(), `SELECT n.execution_id::text, n.child_workflow_id FROM workflow_execution_nodes n
		JOIN workflow_executions e ON e.id = n.execution_id
		WHERE e.queue_id = ANY($1::uuid[]) AND n.child_workflow_id IS NOT NULL`, queueIDs)
	if err != nil {
		g.b.Fatal(err)
	}
	type run struct{ Execution, Child string }
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[run])
	if err != nil {
		g.b.Fatal(err)
	}
	if len(runs) != len(queueIDs) {
		g.b.Fatalf("%d children named for %d runs", len(runs), len(queueIDs))
	}
	var last time.Time
	events := 0
	for _, r := range runs {
		d, err := g.c.DescribeWorkflowExecution(context.Background(), r.Child, "")
		if err != nil {
			g.b.Fatal(err)
		}
		if at := d.GetWorkflowExecutionInfo().GetStartTime().AsTime(); at.After(last) {
			last = at
		}
		p, err := g.c.DescribeWorkflowExecution(context.Background(), "execution-"+r.Execution, "")
		if err != nil {
			g.b.Fatal(err)
		}
		events += int(p.GetWorkflowExecutionInfo().GetHistoryLength())
	}
	g.rateEvents = float64(events) / float64(len(runs))
	return last
}

func (g *gatedBench) childrenStarted() int {
	var n int
	if err := g.db.QueryRow(context.Background(), `SELECT count(*) FROM workflow_execution_nodes WHERE child_workflow_id IS NOT NULL`).Scan(&n); err != nil {
		g.b.Fatal(err)
	}
	return n
}

func (g *gatedBench) completed() int {
	var n int
	if err := g.db.QueryRow(context.Background(), `SELECT count(*) FROM workflow_executions WHERE status = 'COMPLETED'`).Scan(&n); err != nil {
		g.b.Fatal(err)
	}
	return n
}
