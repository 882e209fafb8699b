package bench

import (
	"context"
	"fmt"
	"os"
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
//	    returned; gated: Sluice recorded the last child's start on its
//	    node), which must be at least 80 % of the direct rate, and until
//	    every one had completed (gated: every run, the parent's end being
//	    part of its price), printed beside it.

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
	var gatedLat, directLat, dispatch, parent, pickup, directPickup []time.Duration
	var last gatedLegs
	var directEvents int
	for n := range gatedLatencyRuns {
		last = g.gatedLegs(g.gatedStart(n%benchWorkspaces, n))
		gatedLat, dispatch, parent, pickup = append(gatedLat, last.total), append(dispatch, last.dispatch), append(parent, last.parent), append(pickup, last.pickup)
		at, id := g.directStart(n)
		d := g.historyOf(id)
		directLat, directPickup = append(directLat, d.firstTask.Sub(at)), append(directPickup, d.firstTask.Sub(d.started))
		directEvents = d.events
		time.Sleep(gatedLatencyPace) // paces the starts; not synchronisation
	}
	gp50, dp50 := p50(gatedLat), p50(directLat)
	added := gp50 - dp50

	// (2) rate, direct then gated then direct, the gated figure against
	// the mean of the two beside it.
	benchSettle(b, c, quiet, nil)
	direct1 := g.rate(g.directStartOnly, g.directWait)
	benchSettle(b, c, quiet, g.db)
	gated := g.rate(g.gatedEnqueue, g.gatedWait(g.childrenStarted(), g.completed()))
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
	fmt.Fprintf(&sb, "    gated legs, p50: enqueue -> the run's workflow started %v, -> the child started %v, -> its first workflow task %v (direct: start -> first task %v); events: the run %d + the child %d, direct %d\n",
		p50(dispatch).Round(100*time.Microsecond), p50(parent).Round(100*time.Microsecond), p50(pickup).Round(100*time.Microsecond),
		p50(directPickup).Round(100*time.Microsecond), last.parentEvents, last.childEvents, directEvents)
	fmt.Fprintf(&sb, "(2) %d charges over %d ENTERPRISE tenants from %d callers, starts per second until all had started (gated: the child's start as Sluice records it on the node; direct: ExecuteWorkflow returned): gated %.1f/s, direct %.1f/s and %.1f/s (before and after): %.1f %% [target >= 80 %%: %s]\n",
		gatedRateRuns, benchWorkspaces, benchCallers, gated.starts, direct1.starts, direct2.starts, ratio, benchVerdict(ratio >= 80))
	fmt.Fprintf(&sb, "    completed per second until all had completed (gated: the run, the child's end and the parent's): gated %.1f/s, direct %.1f/s and %.1f/s: %.1f %%\n",
		gated.completions, direct1.completions, direct2.completions, doneRatio)
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
// started, when its first workflow task started, and its length.
type history struct {
	started, firstTask time.Time
	events             int
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
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				h.started = ev.GetEventTime().AsTime()
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
				if h.firstTask.IsZero() {
					h.firstTask = ev.GetEventTime().AsTime()
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
// workflow's first workflow task, in its legs: to the run's workflow
// start (admission and dispatch), from it to the child's start (the run's
// own work: admitting the run, checking the allow-list, the start
// command), and from that to the child's first workflow task (the team
// worker's pickup, which a direct start pays as well).
type gatedLegs struct {
	total, dispatch, parent, pickup time.Duration
	parentEvents, childEvents       int
}

func (g *gatedBench) gatedLegs(at time.Time, execID string) gatedLegs {
	child := g.historyOf("execution-" + execID + "/charge")
	parent := g.historyOf("execution-" + execID)
	return gatedLegs{
		total: child.firstTask.Sub(at), dispatch: parent.started.Sub(at),
		parent: child.started.Sub(parent.started), pickup: child.firstTask.Sub(child.started),
		parentEvents: parent.events, childEvents: child.events,
	}
}

// p50 is the median of ds, which it sorts.
func p50(ds []time.Duration) time.Duration {
	benchSortDurations(ds)
	return benchPercentile(ds, 50)
}

// rateFigures are one rate phase's starts and completions per second,
// each from the phase's first call.
type rateFigures struct{ starts, completions float64 }

// rate starts gatedRateRuns charges through start from benchCallers
// callers and waits with wait, which returns when all had started, until
// all have completed.
func (g *gatedBench) rate(start func(n int) string, wait func(ids []string, called time.Time) (started time.Time)) rateFigures {
	var next atomic.Int64
	var wg sync.WaitGroup
	ids := make([]string, gatedRateRuns)
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
	return rateFigures{starts: benchRate(gatedRateRuns, started.Sub(began)), completions: benchRate(gatedRateRuns, time.Since(began))}
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
// phase's) and then completed (its count of COMPLETED runs has).
func (g *gatedBench) gatedWait(fromStarted, fromCompleted int) func([]string, time.Time) time.Time {
	return func([]string, time.Time) time.Time {
		deadline := time.Now().Add(5 * time.Minute)
		for g.childrenStarted() < fromStarted+gatedRateRuns {
			if time.Now().After(deadline) {
				g.b.Fatalf("%d of %d gated children started within 5 minutes", g.childrenStarted()-fromStarted, gatedRateRuns)
			}
			time.Sleep(20 * time.Millisecond) // polled: Sluice's records are rows
		}
		started := time.Now()
		for g.completed() < fromCompleted+gatedRateRuns {
			if time.Now().After(deadline) {
				g.b.Fatalf("%d of %d gated runs completed within 5 minutes", g.completed()-fromCompleted, gatedRateRuns)
			}
			time.Sleep(20 * time.Millisecond) // polled: Sluice's completions are rows
		}
		return started
	}
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
