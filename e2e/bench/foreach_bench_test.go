package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/e2e/harness"
)

// The FOR_EACH benchmark that `make bench` runs: one run at a time on the
// real Temporal dev server and Postgres, in `sluice all`, timed from the
// start request to the execution's completed_at (the database's clock, on
// this host), each shape benchForEachRounds times, its median judged:
//
//	(a) 100 parallel TRANSFORM nodes, the DAG the FOR_EACH is set beside;
//	(b) a FOR_EACH of 100 TRANSFORM items in a FREE workspace (its cap),
//	    target <= 1 s;
//	(c) the same 100 parallel nodes in an ENTERPRISE workspace;
//	(d) a FOR_EACH of 1,000 TRANSFORM items in ENTERPRISE, target <= 5 s.
//
// Beside each FOR_EACH it prints how its iterations were recorded, from
// the stream's own table (feed_events, whose created_at is the write's
// transaction time): the distinct write times of the iterations'
// node.finished events and the distinct completedAt of their records, and
// how long before the run's end the first iteration's event was written
// (a loop that ends within one write of its records, as 100 FREE ones
// do, is recorded with the run's end). Iterations once ran about a second
// each, all recorded at the run's end with its end as every completedAt.

var (
	benchForEachRounds = benchSize(3, 1)
	benchForEachFree   = benchSize(100, 5)
	benchForEachEnt    = benchSize(1000, 10)
)

func BenchmarkForEachOfPureNodes(b *testing.B) {
	if os.Getenv("TEMPORAL_ADDRESS") == "" {
		b.Skip("TEMPORAL_ADDRESS not set: run through `make bench`")
	}
	for range b.N {
		benchForEachOnce(b)
	}
}

// benchForEachShape is one graph timed in one plan, with its target (0:
// none, it is the DAG set beside a FOR_EACH).
type benchForEachShape struct {
	what   string
	plan   string
	graph  map[string]any
	target time.Duration
	metric string
}

func benchForEachOnce(b *testing.B) {
	base := harness.StartSluice(b, nil)
	db, err := pgx.Connect(context.Background(), harness.AppsByBase[base].DBURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close(context.Background())
	shapes := []benchForEachShape{
		{fmt.Sprintf("(a) %d parallel TRANSFORM nodes, FREE", benchForEachFree), "FREE", benchParallelTransforms(benchForEachFree), 0, "parallel_free_ms"},
		{fmt.Sprintf("(b) FOR_EACH of %d TRANSFORM items, FREE", benchForEachFree), "FREE", benchForEachTransforms(), time.Second, "foreach_free_ms"},
		{fmt.Sprintf("(c) %d parallel TRANSFORM nodes, ENTERPRISE", benchForEachFree), "ENTERPRISE", benchParallelTransforms(benchForEachFree), 0, "parallel_enterprise_ms"},
		{fmt.Sprintf("(d) FOR_EACH of %d TRANSFORM items, ENTERPRISE", benchForEachEnt), "ENTERPRISE", benchForEachTransforms(), 5 * time.Second, "foreach_enterprise_ms"},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== FOR_EACH of pure nodes beside a DAG of them, one run at a time in sluice all, start request to COMPLETED, median of %d; load average %s ==\n",
		benchForEachRounds, benchLoad())
	for _, s := range shapes {
		items := benchForEachFree
		if s.plan == "ENTERPRISE" {
			items = benchForEachEnt
		}
		e := harness.NewE2EWithPlan(b, base, s.plan)
		var took []time.Duration
		var last benchForEachRun
		for range benchForEachRounds {
			last = benchForEachRunOnce(b, e, db, s.graph, items)
			took = append(took, last.took)
		}
		sorted := slices.Clone(took)
		slices.Sort(sorted)
		median := sorted[len(sorted)/2]
		verdict := "no target: the DAG beside it"
		if s.target > 0 {
			verdict = fmt.Sprintf("target <= %v: %s", s.target, benchVerdict(median <= s.target))
		}
		fmt.Fprintf(&sb, "%s: median %v (runs %s) [%s]\n", s.what, median.Round(time.Millisecond), benchDurations(took), verdict)
		if last.iterations > 0 {
			fmt.Fprintf(&sb, "    last run: the loop took %v; its %d iterations' node.finished events written at %d distinct times, the first %v before the run's end; %d distinct completedAt\n",
				last.loop.Round(10*time.Microsecond), last.iterations, last.writes, last.firstBeforeEnd.Round(time.Millisecond), last.completedAts)
		}
		benchMetric(b, float64(median.Microseconds())/1000, s.metric)
	}
	benchPrint(sb.String())
}

// benchForEachRun is one timed run and how its iterations were recorded.
type benchForEachRun struct {
	took               time.Duration
	iterations, writes int
	completedAts       int
	firstBeforeEnd     time.Duration
	// loop is the FOR_EACH's own time, from its record.
	loop time.Duration
}

// benchForEachRunOnce starts graph with items elements as its input and
// waits for it to complete.
func benchForEachRunOnce(b *testing.B, e *harness.E2E, db *pgx.Conn, graph map[string]any, items int) benchForEachRun {
	list := make([]any, items)
	for i := range list {
		list[i] = i
	}
	began := time.Now()
	id := e.StartIn(graph, map[string]any{"items": list})
	ex := e.WaitForStatus(id, 5*time.Minute, "COMPLETED", "FAILED", "CANCELLED")
	if ex.Status != "COMPLETED" {
		cause := ""
		if ex.Error != nil {
			cause = *ex.Error
		}
		b.Fatalf("run %s ended %s (%s), want COMPLETED", id, ex.Status, cause)
	}
	var r benchForEachRun
	var completed time.Time
	if err := db.QueryRow(context.Background(), `SELECT completed_at FROM workflow_executions WHERE id = $1`, id).Scan(&completed); err != nil {
		b.Fatal(err)
	}
	r.took = completed.Sub(began)
	var first *time.Time
	if err := db.QueryRow(context.Background(), `
		SELECT count(*), count(DISTINCT created_at), count(DISTINCT data->>'completedAt'), min(created_at)
		FROM feed_events WHERE execution_id = $1 AND kind = 'node.finished' AND data->>'key' LIKE 'each[%'`, id).
		Scan(&r.iterations, &r.writes, &r.completedAts, &first); err != nil {
		b.Fatal(err)
	}
	if first != nil {
		r.firstBeforeEnd = completed.Sub(*first)
	}
	if r.iterations > 0 {
		var began, ended time.Time
		if err := db.QueryRow(context.Background(), `
			SELECT started_at, completed_at FROM workflow_execution_nodes WHERE execution_id = $1 AND node_key = 'each'`, id).
			Scan(&began, &ended); err != nil {
			b.Fatal(err)
		}
		r.loop = ended.Sub(began)
	}
	return r
}

// benchParallelTransforms is n TRANSFORM nodes with no edges, each
// reading its own element of the input.
func benchParallelTransforms(n int) map[string]any {
	nodes := make([]any, n)
	for i := range nodes {
		nodes[i] = harness.Node(fmt.Sprintf("t%d", i), "TRANSFORM", map[string]any{"output": map[string]any{"i": fmt.Sprintf("{{ input.items[%d] }}", i)}})
	}
	return map[string]any{"nodes": nodes}
}

// benchForEachTransforms is a FOR_EACH of a TRANSFORM over the input's
// items.
func benchForEachTransforms() map[string]any {
	return map[string]any{"nodes": []any{harness.Node("each", "FOR_EACH", map[string]any{
		"items": "{{ input.items }}",
		"node":  map[string]any{"type": "TRANSFORM", "config": map[string]any{"output": map[string]any{"i": "{{ index }}", "v": "{{ item }}"}}},
	})}}
}

// benchDurations lists durations in the order they were measured.
func benchDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}
