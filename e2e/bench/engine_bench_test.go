package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// The engine benchmark that `make bench` runs: runs completed per second on
// the real Temporal dev server and the real Postgres, in each of two
// shapes, `sluice all` in this process and the api, the dispatcher and the
// worker as three processes of the built binary (the production shape,
// where eager start cannot apply). Each shape is measured against bare
// runs on the same server between its own phases, so the figures are
// compared as ratios measured side by side (see benchShapeOnce):
//
//	(a) a bare workflow with one no-op activity, 400 runs from 32 callers;
//	(b) Sluice, one-node TRANSFORM runs enqueued over HTTP into 20
//	    ENTERPRISE workspaces, timed from the first enqueue until all are
//	    COMPLETED, then enqueue-to-COMPLETED latency at a steady 20 runs/s;
//	(c) Sluice, a 6-node DAG: HTTP_REQUEST to a local server, a CONDITION,
//	    two TRANSFORM branches and a joining TRANSFORM, beside a DELAY of 0s.
//
// Each figure is printed with its ratio to (a), its target, whether it was
// met, and the events in one run's history: the server's own count of
// the round trips a run cost. The one-node runs' time is split into its
// legs from the database's timestamps and the runs' histories: enqueue to
// claim, claim to the server's WorkflowExecutionStarted, that to the first
// WorkflowTaskStarted (the wait for a poll), and that to COMPLETED.
// SLUICE_BENCH_SHAPE=1 or 2 runs that shape alone.

const (
	benchCallers    = 32
	benchWorkspaces = 20
	// benchSteadyRate paces the latency phase.
	benchSteadyRate = 20
)

var (
	benchRuns = benchSize(400, 20)
	// benchRounds is how many times each throughput (the one-node runs',
	// the DAG's) is measured, each time between two bare runs; odd, so
	// the median is a round.
	benchRounds = benchSize(3, 1)
	// benchSteadyFor is how long the latency phase runs.
	benchSteadyFor = benchSize(10*time.Second, time.Second)
	// benchLegsSample is how many runs' histories the breakdown reads.
	benchLegsSample = benchSize(50, 5)
)

// benchShape is one way to run Sluice's roles: start runs them and returns
// the API's base URL and the database they share.
type benchShape struct {
	name  string
	start func(b *testing.B) (base, dbURL string)
}

var benchShapes = []benchShape{
	{"sluice all: one process, eager start on its own worker", func(b *testing.B) (string, string) {
		base := harness.StartSluice(b, map[string]string{"SLUICE_HTTP_NODE_ALLOW": harness.HTTPNodeAllow})
		return base, harness.AppsByBase[base].DBURL
	}},
	{"api, dispatcher and worker: three processes of the built binary, default settings", startBenchRoles},
}

// startBenchRoles runs `sluice api`, `sluice dispatcher` and `sluice
// worker` on a fresh database and waits until the dispatcher holds the
// queue lease and the worker is ready.
func startBenchRoles(b *testing.B) (string, string) {
	dbURL := pgtest.URL(b)
	env := []string{
		"DATABASE_URL=" + dbURL,
		"TEMPORAL_ADDRESS=" + harness.TemporalAddress(b),
		"TEMPORAL_TASK_QUEUE_PREFIX=bench" + uuid.NewString()[:8] + ".",
		"SLUICE_ADMIN_TOKEN=" + harness.TestAdminToken,
		"SLUICE_HTTP_NODE_ALLOW=" + harness.HTTPNodeAllow,
	}
	api := harness.StartRole(b, "api", env)
	dispatcher := harness.StartRole(b, "dispatcher", env)
	worker := harness.StartRole(b, "worker", env)
	for _, r := range []*harness.Role{api, dispatcher, worker} {
		porttest.Eventually(b, 30*time.Second, porttest.Holds("the role to be ready", func() bool {
			resp, err := http.Get(r.Admin + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		}))
	}
	porttest.Eventually(b, 30*time.Second, porttest.Holds("the dispatcher to hold the queue lease", func() bool {
		resp, err := http.Get(dispatcher.Admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `dispatcher_lease_held{lease="processExecutionQueue"} 1`)
	}))
	return api.HTTP, dbURL
}

func BenchmarkEngineRunsPerSecond(b *testing.B) {
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if addr == "" {
		b.Skip("TEMPORAL_ADDRESS not set: run through `make bench`")
	}
	b.Setenv("SLUICE_HTTP_NODE_ALLOW", harness.HTTPNodeAllow)
	c, err := client.Dial(client.Options{HostPort: addr, Logger: harness.NopLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// Whatever ran on this server before (make test's suites leave runs
	// waiting on DELAYs and events) stays running; the benchmark settles
	// to that count, not to none.
	before, err := c.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Query: "ExecutionStatus = 'Running'"})
	if err != nil {
		b.Fatal(err)
	}
	quiet := before.GetCount()
	only := os.Getenv("SLUICE_BENCH_SHAPE")
	for i, shape := range benchShapes {
		if only != "" && only != fmt.Sprint(i+1) {
			continue
		}
		// Each shape is a sub-benchmark, so its processes and databases
		// are stopped when it ends and the next shape runs alone.
		b.Run(fmt.Sprintf("shape%d", i+1), func(b *testing.B) {
			for range b.N {
				benchShapeOnce(b, c, quiet, i+1, shape)
			}
		})
	}
}

// benchShapeOnce measures one shape. Each throughput, the one-node runs'
// and the DAG's, is measured benchRounds times, each round between two
// bare runs on the same server and compared with their mean, and its
// figure is the median of the rounds' ratios: one round's ratio swings by
// 15 % on a quiet machine, and the bare rate falls as the server's SQLite
// grows over the run, so a round is only comparable with the bare runs
// beside it, and the median of paired rounds holds where one round does
// not. The steady latency is measured once.
func benchShapeOnce(b *testing.B, c client.Client, quiet int64, n int, shape benchShape) {
	loadBefore := benchLoad()
	benchSettle(b, c, quiet, nil)
	bares := []engineRate{benchBare(b, c)}

	base, dbURL := shape.start(b)
	s := newSluiceBench(b, c, base, dbURL)
	// paired measures graph's throughput benchRounds times, each round
	// followed by a bare run, and returns the rounds and their ratios to
	// the bare runs beside them.
	paired := func(graph map[string]any) ([]engineRate, []float64) {
		var rounds []engineRate
		var ratios []float64
		for range benchRounds {
			benchSettle(b, c, quiet, s.db)
			t := s.throughput(graph)
			benchSettle(b, c, quiet, s.db)
			bares = append(bares, benchBare(b, c))
			rounds = append(rounds, t)
			around := bares[len(bares)-2].rate() + bares[len(bares)-1].rate()
			ratios = append(ratios, 100*t.rate()/(around/2))
		}
		return rounds, ratios
	}
	oneNode := map[string]any{"nodes": []any{harness.Node("t", "TRANSFORM", map[string]any{"output": "{{ input.run }}"})}}
	rounds, ratios := paired(oneNode)
	benchSettle(b, c, quiet, s.db)
	latency := s.steadyLatency()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"value": 7}`)
	}))
	dagRounds, dagRatios := paired(benchDAG(srv.URL))
	srv.Close()

	bareRates := make([]float64, len(bares))
	for i, r := range bares {
		bareRates[i] = r.rate()
	}
	bare := benchMedian(bareRates)
	transformRatio := benchMedian(ratios)
	transform := rounds[slices.Index(ratios, transformRatio)]
	dagRatio := benchMedian(dagRatios)
	dag := dagRounds[slices.Index(dagRatios, dagRatio)]

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== engine, shape %d, %s: runs completed per second on the real Temporal dev server; load average %s before, %s after ==\n",
		n, shape.name, loadBefore, benchLoad())
	fmt.Fprintf(&sb, "(a) bare workflow, one no-op activity, %d runs from %d callers, %d times (before, between and after the rest): median %6.1f runs/s (%s); %d events per run\n",
		benchRuns, benchCallers, len(bares), bare, benchRates(bareRates, "%.1f"), bares[0].events)
	fmt.Fprintf(&sb, "(b) Sluice, one-node TRANSFORM, enqueued over HTTP, %d runs in %d ENTERPRISE workspaces, %d rounds each between two (a) runs: median %5.1f %% of (a) (rounds %s) [target >= 100 %%: %s]; %d events per run\n",
		benchRuns, benchWorkspaces, benchRounds, transformRatio, benchRates(ratios, "%.1f %%"), benchVerdict(transformRatio >= 100), transform.events)
	fmt.Fprintf(&sb, "    median round: %6.1f runs/s (%v); run duration (claim to COMPLETED) p50 %v, p99 %v\n",
		transform.rate(), transform.took.Round(time.Millisecond), transform.p50.Round(time.Millisecond), transform.p99.Round(time.Millisecond))
	fmt.Fprintf(&sb, "    its legs, p50 of %d runs: %s\n", min(benchLegsSample, benchRuns), transform.legs)
	fmt.Fprintf(&sb, "(c) Sluice, 6-node DAG (HTTP, CONDITION, 2 TRANSFORM, join, DELAY 0s), %d runs in %d ENTERPRISE workspaces, %d rounds each between two (a) runs: median %5.1f %% of (a) (rounds %s) [target >= 50 %%: %s]; %d events per run\n",
		benchRuns, benchWorkspaces, benchRounds, dagRatio, benchRates(dagRatios, "%.1f %%"), benchVerdict(dagRatio >= 50), dag.events)
	fmt.Fprintf(&sb, "    median round: %6.1f runs/s (%v); run duration (claim to COMPLETED) p50 %v, p99 %v\n",
		dag.rate(), dag.took.Round(time.Millisecond), dag.p50.Round(time.Millisecond), dag.p99.Round(time.Millisecond))
	fmt.Fprintf(&sb, "(b) enqueue -> COMPLETED at a steady %d runs/s for %v (%d runs): p50 %v, p99 %v [target p50 <= 100 ms: %s]\n",
		benchSteadyRate, benchSteadyFor, latency.n, latency.p50.Round(time.Millisecond), latency.p99.Round(time.Millisecond), benchVerdict(latency.p50 <= 100*time.Millisecond))
	fmt.Fprintf(&sb, "    legs, p50 of %d runs: %s\n", min(benchLegsSample, latency.n), latency.legs)
	benchPrint(sb.String())
	benchMetric(b, bare, fmt.Sprintf("shape%d_bare_runs/s", n))
	benchMetric(b, transformRatio, fmt.Sprintf("shape%d_transform_%%_of_bare", n))
	benchMetric(b, dagRatio, fmt.Sprintf("shape%d_dag_%%_of_bare", n))
	benchMetric(b, float64(latency.p50.Microseconds())/1000, fmt.Sprintf("shape%d_steady_p50_ms", n))
}

// benchSettle waits, before a phase, until the previous phases' work is
// done: the server lists no more running workflows than quiet, those that
// were running before the benchmark began (its visibility records,
// which trail the runs' completions, are written), Sluice's Postgres has
// checkpointed (db nil before Sluice starts) and the kernel has written
// the dirty pages out. Without it the bare run after a Sluice round
// stalled, in some runs, for 6 to 8 s with every process idle, and the
// round's ratio to the runs beside it rose by up to half; started on a
// settled server and a flushed disk, each phase pays for its own work
// alone.
func benchSettle(b *testing.B, c client.Client, quiet int64, db *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "ExecutionStatus = 'Running'"})
		if err == nil && resp.GetCount() <= quiet {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatalf("the server still lists more than %d running workflows after 2 minutes (%v)", quiet, err)
		case <-tick.C:
		}
	}
	if db != nil {
		if _, err := db.Exec(ctx, "CHECKPOINT"); err != nil {
			b.Fatal(err)
		}
	}
	syscall.Sync()
}

// benchProgress prints a phase as it ends, with its wall-clock times, so
// that a slow one can be laid beside the machine's own records of the run.
func benchProgress(what string, began time.Time, r engineRate) {
	smoke := ""
	if benchSmoke {
		smoke = " (smoke run, not a result)"
	}
	fmt.Printf("    %s: %s to %s, %.1f runs/s%s\n", what, began.Format("15:04:05.0"), time.Now().Format("15:04:05.0"), r.rate(), smoke)
}

// benchMedian is the middle of an odd count of figures (the upper middle
// of an even one), always one of them.
func benchMedian(xs []float64) float64 {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// benchRates lists figures in the order they were measured.
func benchRates(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

// benchLoad is the machine's 1-minute load average, printed beside the
// figures because the absolute rates follow it.
func benchLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}

// engineRate is one throughput figure.
type engineRate struct {
	took     time.Duration
	n        int
	events   int
	p50, p99 time.Duration
	legs     benchLegs
}

func (r engineRate) rate() float64 { return float64(r.n) / r.took.Seconds() }

// benchBareWorkflow is the baseline: one activity that does nothing.
func benchBareWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	return workflow.ExecuteActivity(ctx, benchNoop).Get(ctx, nil)
}

func benchNoop(context.Context) error { return nil }

// benchBare runs (a) on a worker sized like Sluice's workflow worker.
func benchBare(b *testing.B, c client.Client) engineRate {
	queue := "bench-bare-" + uuid.NewString()[:8]
	w := worker.New(c, queue, worker.Options{MaxConcurrentWorkflowTaskExecutionSize: 50, MaxConcurrentActivityExecutionSize: 50})
	w.RegisterWorkflow(benchBareWorkflow)
	w.RegisterActivity(benchNoop)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var next atomic.Int32
	var wg sync.WaitGroup
	var lastID atomic.Value
	began := time.Now()
	for range benchCallers {
		wg.Go(func() {
			for int(next.Add(1)) <= benchRuns {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, benchBareWorkflow)
				if err == nil {
					err = run.Get(ctx, nil)
					lastID.Store(run.GetID())
				}
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r := engineRate{took: time.Since(began), n: benchRuns}
	benchProgress("bare", began, r)
	if id, ok := lastID.Load().(string); ok {
		r.events = benchEvents(b, c, id)
	}
	return r
}

// benchEvents counts the events in a closed workflow's history.
func benchEvents(b *testing.B, c client.Client, workflowID string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, 0)
	for it.HasNext() {
		if _, err := it.Next(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return n
}

// benchDAG is (c)'s graph: fetch -> check -> (left, right) -> join, and a
// zero delay joined too.
func benchDAG(url string) map[string]any {
	yes := true
	when := func(from, to string) map[string]any { return map[string]any{"from": from, "to": to, "when": yes} }
	return map[string]any{
		"nodes": []any{
			harness.Node("fetch", "HTTP_REQUEST", map[string]any{"url": url, "timeout": "10s"}),
			harness.Node("check", "CONDITION", map[string]any{"left": "{{ steps.fetch.output.body.value }}", "op": ">", "right": 5}),
			harness.Node("left", "TRANSFORM", map[string]any{"output": map[string]any{"v": "{{ steps.fetch.output.body.value }}"}}),
			harness.Node("right", "TRANSFORM", map[string]any{"output": "{{ input.run }}"}),
			harness.Node("pause", "DELAY", map[string]any{"duration": "0s"}),
			harness.Node("join", "TRANSFORM", map[string]any{"output": []any{"{{ steps.left.output.v }}", "{{ steps.right.output }}"}}),
		},
		"edges": []any{harness.Edge("fetch", "check"), when("check", "left"), when("check", "right"),
			harness.Edge("left", "join"), harness.Edge("right", "join"), harness.Edge("pause", "join")},
	}
}

// sluiceBench drives a started sluice: its workspaces, its database and
// an HTTP client that keeps its connections.
type sluiceBench struct {
	b     *testing.B
	c     client.Client
	base  string
	db    *pgx.Conn
	http  *http.Client
	ws    []string
	phase int
}

func newSluiceBench(b *testing.B, c client.Client, base, dbURL string) *sluiceBench {
	db, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close(context.Background()) })
	s := &sluiceBench{b: b, c: c, base: base, db: db,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchCallers}, Timeout: time.Minute}}
	for i := range benchWorkspaces {
		var ws struct{ ID string }
		if code := harness.Call(b, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": fmt.Sprintf("bench-%d", i), "plan": "ENTERPRISE"}, &ws); code != 201 {
			b.Fatalf("create workspace: %d", code)
		}
		s.ws = append(s.ws, ws.ID)
	}
	return s
}

// definitions creates graph in every workspace, returning the ids in
// workspace order.
func (s *sluiceBench) definitions(graph map[string]any) []string {
	ids := make([]string, len(s.ws))
	for i, ws := range s.ws {
		var def struct{ ID string }
		if code := harness.Call(s.b, "POST", s.base+"/api/v1/workflow/definitions", harness.TestAdminToken,
			map[string]any{"workspaceId": ws, "name": fmt.Sprintf("bench-%d", s.phase), "graph": graph}, &def); code != 201 {
			s.b.Fatalf("create definition: %d", code)
		}
		ids[i] = def.ID
	}
	return ids
}

// enqueue starts run n of the phase (its input names the phase and n) in
// workspace n mod 20.
func (s *sluiceBench) enqueue(defs []string, n int) {
	i := n % len(s.ws)
	body, _ := json.Marshal(map[string]any{"workspaceId": s.ws[i], "workflowDefinitionId": defs[i],
		"input": map[string]any{"phase": s.phase, "run": n}})
	req, _ := http.NewRequest("POST", s.base+"/api/v1/workflow/executions/start", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+harness.TestAdminToken)
	resp, err := s.http.Do(req)
	if err != nil {
		s.b.Error(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 202 {
		s.b.Errorf("enqueue: %d", resp.StatusCode)
	}
}

// benchEnded is one ended execution of a phase.
type benchEnded struct {
	run              int
	status           string
	started, stopped time.Time
	id               uuid.UUID
}

// ended lists the phase's ended executions.
func (s *sluiceBench) ended() []benchEnded {
	rows, err := s.db.Query(context.Background(), `
		SELECT (input->>'run')::int, status, started_at, completed_at, id FROM workflow_executions
		WHERE (input->>'phase')::int = $1 AND status <> 'RUNNING'`, s.phase)
	if err != nil {
		s.b.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (benchEnded, error) {
		var e benchEnded
		err := r.Scan(&e.run, &e.status, &e.started, &e.stopped, &e.id)
		return e, err
	})
	if err != nil {
		s.b.Fatal(err)
	}
	return out
}

// waitEnded polls until n executions of the phase ended, failing on any
// that did not complete. Each poll reads two counts, not the rows, so the
// wait takes as little as it can from the Postgres and the CPU the runs
// share; the rows are read once, at the end.
func (s *sluiceBench) waitEnded(n int) []benchEnded {
	porttest.Eventually(s.b, 5*time.Minute, func() error {
		var ended, failed int
		if err := s.db.QueryRow(context.Background(), `
			SELECT count(*) FILTER (WHERE status <> 'RUNNING'), count(*) FILTER (WHERE status NOT IN ('RUNNING', 'COMPLETED'))
			FROM workflow_executions WHERE (input->>'phase')::int = $1`, s.phase).Scan(&ended, &failed); err != nil {
			s.b.Fatal(err)
		}
		if failed > 0 {
			for _, e := range s.ended() {
				if e.status != "COMPLETED" {
					s.b.Fatalf("run %d of phase %d ended %s", e.run, s.phase, e.status)
				}
			}
		}
		if ended < n {
			return fmt.Errorf("phase %d: %d of %d runs ended", s.phase, ended, n)
		}
		return nil
	})
	return s.ended()
}

// throughput enqueues benchRuns runs of graph from benchCallers callers
// and times them from the first enqueue until all are COMPLETED.
func (s *sluiceBench) throughput(graph map[string]any) engineRate {
	s.phase++
	defs := s.definitions(graph)
	var next atomic.Int32
	var wg sync.WaitGroup
	sent := make([]time.Time, benchRuns+1)
	began := time.Now()
	for range benchCallers {
		wg.Go(func() {
			for n := int(next.Add(1)); n <= benchRuns; n = int(next.Add(1)) {
				sent[n] = time.Now()
				s.enqueue(defs, n)
			}
		})
	}
	wg.Wait()
	ended := s.waitEnded(benchRuns)
	r := engineRate{took: time.Since(began), n: benchRuns}
	benchProgress(fmt.Sprintf("sluice phase %d", s.phase), began, r)
	durations := make([]time.Duration, len(ended))
	for i, e := range ended {
		durations[i] = e.stopped.Sub(e.started)
	}
	r.p50, r.p99 = benchPercentiles(durations)
	r.events = benchEvents(s.b, s.c, engine.WorkflowID(domain.ID(ended[0].id)))
	r.legs = s.legs(ended, sent)
	return r
}

// benchLatency is the steady-rate figure.
type benchLatency struct {
	n        int
	p50, p99 time.Duration
	legs     benchLegs
}

// steadyLatency enqueues one-node TRANSFORM runs at benchSteadyRate for
// benchSteadyFor, each from its own goroutine so a slow answer does not
// delay the pace, and measures from the start of each enqueue call to its
// execution's completed_at (database time, same host and clock).
func (s *sluiceBench) steadyLatency() benchLatency {
	s.phase++
	defs := s.definitions(map[string]any{"nodes": []any{harness.Node("t", "TRANSFORM", map[string]any{"output": "{{ input.run }}"})}})
	total := int(benchSteadyFor.Seconds() * benchSteadyRate)
	sent := make([]time.Time, total)
	tick := time.NewTicker(time.Second / benchSteadyRate)
	defer tick.Stop()
	var wg sync.WaitGroup
	for n := range total {
		<-tick.C
		sent[n] = time.Now()
		wg.Go(func() { s.enqueue(defs, n) })
	}
	wg.Wait()
	ended := s.waitEnded(total)
	lat := make([]time.Duration, len(ended))
	for i, e := range ended {
		lat[i] = e.stopped.Sub(sent[e.run])
	}
	r := benchLatency{n: total, legs: s.legs(ended, sent)}
	r.p50, r.p99 = benchPercentiles(lat)
	return r
}

// benchLegs splits a run's enqueue-to-COMPLETED time, each leg a p50:
// enqueue to the claim that wrote the execution (the dispatcher's wait and
// claim), claim to the server's WorkflowExecutionStarted (the start call),
// that to the first WorkflowTaskStarted (the task's wait for a poll; zero
// with eager start), and that to completed_at (the workflow task, its local
// activities and the completion's write).
type benchLegs struct {
	toClaim, toStarted, toFirstTask, toCompleted time.Duration
}

func (l benchLegs) String() string {
	return fmt.Sprintf("enqueue -> claimed %v, -> workflow started %v, -> first workflow task %v, -> COMPLETED %v",
		l.toClaim.Round(time.Millisecond), l.toStarted.Round(time.Millisecond), l.toFirstTask.Round(time.Millisecond), l.toCompleted.Round(time.Millisecond))
}

// legs reads the histories of up to benchLegsSample runs, spread over the
// phase, and returns the p50 of each leg. sent holds each run's enqueue
// time by its number.
func (s *sluiceBench) legs(ended []benchEnded, sent []time.Time) benchLegs {
	slices.SortFunc(ended, func(a, b benchEnded) int { return a.run - b.run })
	step := max(1, len(ended)/benchLegsSample)
	var claim, start, task, done []time.Duration
	for i := 0; i < len(ended) && len(claim) < benchLegsSample; i += step {
		e := ended[i]
		started, firstTask := s.historyTimes(engine.WorkflowID(domain.ID(e.id)))
		claim = append(claim, e.started.Sub(sent[e.run]))
		start = append(start, started.Sub(e.started))
		task = append(task, firstTask.Sub(started))
		done = append(done, e.stopped.Sub(firstTask))
	}
	var l benchLegs
	l.toClaim, _ = benchPercentiles(claim)
	l.toStarted, _ = benchPercentiles(start)
	l.toFirstTask, _ = benchPercentiles(task)
	l.toCompleted, _ = benchPercentiles(done)
	return l
}

// historyTimes returns when the server recorded a workflow's start and
// its first WorkflowTaskStarted.
func (s *sluiceBench) historyTimes(workflowID string) (started, firstTask time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	it := s.c.GetWorkflowHistory(ctx, workflowID, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			s.b.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			started = ev.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			return started, ev.GetEventTime().AsTime()
		}
	}
	s.b.Fatalf("%s: no workflow task started in its history", workflowID)
	return
}

func benchPercentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)*50/100], ds[min(len(ds)-1, len(ds)*99/100)]
}
