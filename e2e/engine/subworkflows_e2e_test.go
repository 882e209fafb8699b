package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// freeNodesInFlight is FREE's nodesInFlight and freeSubWorkflowNodes its
// subWorkflowNodes, as migrations 00017 and 00022 seed them.
const (
	freeNodesInFlight    = 4
	freeSubWorkflowNodes = 100
)

// fanOutGraph is n SUB_WORKFLOW nodes, s0 to s<n-1>, each running child
// at its current version.
func fanOutGraph(n int, child string) map[string]any {
	nodes := make([]any, n)
	for i := range nodes {
		nodes[i] = harness.Node(fmt.Sprintf("s%d", i), "SUB_WORKFLOW", map[string]any{"definition": child})
	}
	return map[string]any{"nodes": nodes, "edges": []any{}}
}

// delayGraph is one DELAY of d.
func delayGraph(d string) map[string]any {
	return map[string]any{"nodes": []any{harness.Node("d", "DELAY", map[string]any{"duration": d})}, "edges": []any{}}
}

// treeRecord is one harness.Node record of an harness.Execution, harness.Read from Postgres.
type treeRecord struct{ key, typ, status, err string }

// treeRecords reads every harness.Node record of harness.Execution id, the children's
// included, straight from the database, so a poll costs one query
// however many there are.
func treeRecords(t *testing.T, db *pgx.Conn, id string) []treeRecord {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT node_key, node_type, status, coalesce(error, '') FROM workflow_execution_nodes WHERE execution_id = $1`, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (treeRecord, error) {
		var rec treeRecord
		return rec, r.Scan(&rec.key, &rec.typ, &rec.status, &rec.err)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runningByDepth counts the RUNNING SUB_WORKFLOW records of each depth
// (0: the execution's own nodes): the child runs open at each level.
func runningByDepth(recs []treeRecord) []int {
	by := make([]int, 4)
	for _, r := range recs {
		if r.typ == "SUB_WORKFLOW" && r.status == "RUNNING" {
			by[strings.Count(r.key, "/")]++
		}
	}
	return by
}

// stillRunning lists the records left RUNNING.
func stillRunning(recs []treeRecord) []string {
	var keys []string
	for _, r := range recs {
		if r.status == "RUNNING" {
			keys = append(keys, r.key)
		}
	}
	return keys
}

// terminatedRuns counts, of the execution's workflow and the child
// workflow of each SUB_WORKFLOW record, those the server terminated
// rather than Sluice ending them. A child never started (its input
// refused) is not found, and not counted.
func terminatedRuns(t *testing.T, id string, recs []treeRecord) int {
	t.Helper()
	tc := harness.TemporalClient(t, harness.TemporalAddress(t))
	ids := []string{"execution-" + id}
	for _, r := range recs {
		if r.typ == "SUB_WORKFLOW" {
			ids = append(ids, "execution-"+id+"/"+r.key)
		}
	}
	terminated := 0
	for _, wid := range ids {
		d, err := tc.DescribeWorkflowExecution(context.Background(), wid, "")
		var missing *serviceerror.NotFound
		switch {
		case err != nil && !errors.As(err, &missing):
			t.Fatalf("describe %s: %v", wid, err)
		case err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
			terminated++
			t.Errorf("workflow %s was terminated by the server", wid)
		}
	}
	return terminated
}

// createTimed creates a definition and returns the status, its id and
// how long the save took; a refusal's problem text is returned as the id.
func createTimed(t *testing.T, base, ws, name string, graph map[string]any) (int, string, time.Duration) {
	t.Helper()
	var out struct {
		ID     string
		Errors []struct{ Path, Message string }
	}
	began := time.Now()
	code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", harness.TestAdminToken, map[string]any{"workspaceId": ws, "name": name, "graph": graph}, &out)
	took := time.Since(began)
	if code != http.StatusCreated {
		return code, fmt.Sprint(out.Errors), took
	}
	return code, out.ID, took
}

// startRun starts definition def in workspace ws and returns the
// harness.Execution.
func startRun(t *testing.T, base, ws, def string) string {
	t.Helper()
	return harness.ExecutionOf(t, base, ws, enqueueThroughAPI(t, base, ws, def))
}

// oneNodeRun times a run of def in ws from its enqueue until it is seen
// COMPLETED.
func oneNodeRun(t *testing.T, base, ws, def string) time.Duration {
	t.Helper()
	began := time.Now()
	id := startRun(t, base, ws, def)
	harness.WaitRun(t, base, id, time.Minute, "the other workspace's run to complete", harness.StatusIs("COMPLETED"))
	return time.Since(began)
}

// TestSubWorkflowFanOutStaysWithinTheFreePlan is the 100 x 100
// sub-workflow tree (A runs 100 children B, each running 100 children C,
// a DELAY of 10 minutes) in a FREE workspace on the real harness.Stack. The save
// of the whole tree, walked once per version, is refused fast, naming
// subWorkflowNodes; a definition saved while its child was small runs the
// tree anyway (version 0 follows the child), and fails by Sluice as the
// child runs pass the quota. A tree within the quota holds at most the
// plan's nodes in flight open at every level while another workspace's
// one-harness.Node run completes at once, and a cancel ends every descendant.
func TestSubWorkflowFanOutStaysWithinTheFreePlan(t *testing.T) {
	base := harness.StartSluice(t, nil)
	db, err := pgx.Connect(context.Background(), harness.AppsByBase[base].DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	free := harness.NewE2EWithPlan(t, base, "FREE").Ws
	other := harness.NewE2EWithPlan(t, base, "FREE").Ws

	c := harness.DefineIn(t, base, free, "c", delayGraph("10m"))
	b := harness.DefineIn(t, base, free, "b", delayGraph("10m"))
	code, a, tookA := createTimed(t, base, free, "a", fanOutGraph(100, b))
	if code != http.StatusCreated {
		t.Fatalf("saving A over a one-harness.Node B: %d %s", code, a)
	}
	began := time.Now()
	if got := harness.Call(t, "POST", base+"/api/v1/workflow/definitions/"+b+"/versions", harness.TestAdminToken, map[string]any{"graph": fanOutGraph(100, c)}, nil); got != http.StatusCreated {
		t.Fatalf("B's version 2 (100 children): %d", got)
	}
	tookB := time.Since(began)
	code, problem, tookTree := createTimed(t, base, free, "a-again", fanOutGraph(100, b))
	t.Logf("FIGURE sub-workflow saves: A (100 x one-harness.Node B) %s, B v2 (100 x C) %s, A over B v2 (100 x 100, refused %d) %s",
		tookA.Round(time.Millisecond), tookB.Round(time.Millisecond), code, tookTree.Round(time.Millisecond))
	if code != http.StatusUnprocessableEntity || !strings.Contains(problem, "20000 nodes") || !strings.Contains(problem, "subWorkflowNodes quota of 100") {
		t.Errorf("saving A over B v2: %d %s, want 422 naming 20000 nodes over subWorkflowNodes", code, problem)
	}
	for name, took := range map[string]time.Duration{"A": tookA, "B v2": tookB, "the 100 x 100 tree": tookTree} {
		if took > time.Second {
			t.Errorf("saving %s took %s, want under 1 s", name, took)
		}
	}

	t.Run("the 100 x 100 tree fails by Sluice at the quota", func(t *testing.T) {
		id := startRun(t, base, free, a)
		peak := make([]int, 4)
		porttest.Eventually(t, 2*time.Minute, porttest.Holds("the tree to end", func() bool {
			for d, n := range runningByDepth(treeRecords(t, db, id)) {
				peak[d] = max(peak[d], n)
			}
			var ex harness.NodeRun
			harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+id, harness.TestAdminToken, nil, &ex)
			return ex.Status == "FAILED" || ex.Status == "COMPLETED"
		}))
		var ex harness.NodeRun
		harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+id, harness.TestAdminToken, nil, &ex)
		recs := treeRecords(t, db, id)
		msg := ""
		if ex.Error != nil {
			msg = *ex.Error
		}
		t.Logf("FIGURE 100 x 100 sub-workflows, FREE: %s after %d records, open child runs at most %v by level (nodesInFlight %d): %s",
			ex.Status, len(recs), peak[:2], freeNodesInFlight, msg)
		if ex.Status != "FAILED" || !strings.Contains(msg, "subWorkflowNodes") {
			t.Errorf("the run ended %s (%s), want FAILED naming subWorkflowNodes", ex.Status, msg)
		}
		for d, n := range peak {
			if n > freeNodesInFlight {
				t.Errorf("%d child runs open at once at level %d, over FREE's nodes in flight of %d", n, d+1, freeNodesInFlight)
			}
		}
		if left := stillRunning(recs); len(left) > 0 {
			t.Errorf("records left RUNNING: %v", left)
		}
		if n := terminatedRuns(t, id, recs); n > 0 {
			t.Errorf("%d runs terminated by the server", n)
		}
		// A child writes records only once its graph is loaded, which
		// counted its nodes.
		if len(recs) > 100+freeSubWorkflowNodes {
			t.Errorf("%d harness.Node records, over the root's 100 plus the quota's %d", len(recs), freeSubWorkflowNodes)
		}
	})

	t.Run("a tree within the quota holds the plan's nodes in flight and is cancelled whole", func(t *testing.T) {
		leaf := harness.DefineIn(t, base, free, "leaf", delayGraph("10m"))
		wide := harness.DefineIn(t, base, free, "wide", fanOutGraph(100, leaf))
		id := startRun(t, base, free, wide)
		peak := make([]int, 4)
		look := func() []treeRecord {
			recs := treeRecords(t, db, id)
			for d, n := range runningByDepth(recs) {
				peak[d] = max(peak[d], n)
			}
			return recs
		}
		porttest.Eventually(t, time.Minute, porttest.Holds("the first children to wait in their DELAY", func() bool {
			delays := 0
			for _, r := range look() {
				if r.typ == "DELAY" && r.status == "RUNNING" {
					delays++
				}
			}
			return delays == freeNodesInFlight
		}))
		ts := harness.DefineIn(t, base, other, "one", map[string]any{"nodes": []any{harness.Node("t", "TRANSFORM", map[string]any{"output": 1})}, "edges": []any{}})
		var runs []time.Duration
		for range 3 {
			runs = append(runs, oneNodeRun(t, base, other, ts))
			look()
		}
		slices.Sort(runs)
		t.Logf("FIGURE another workspace's one-harness.Node run beside the tree: %v (median %s); open child runs at most %v by level",
			runs, runs[1].Round(time.Millisecond), peak[:2])
		if runs[1] > time.Second {
			t.Errorf("another workspace's one-harness.Node run took %s (median of 3), want within 1 s", runs[1])
		}
		if peak[0] > freeNodesInFlight || peak[1] > 0 {
			t.Errorf("open child runs by level %v, want at most %d at the first, none below", peak[:2], freeNodesInFlight)
		}
		var res struct{ Status string }
		cancelled := time.Now()
		if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+id+"/cancel", harness.TestAdminToken, nil, &res); code != http.StatusAccepted {
			t.Fatalf("cancel: %d", code)
		}
		var recs []treeRecord
		porttest.Eventually(t, time.Minute, porttest.Holds("the tree to end", func() bool {
			var ex harness.NodeRun
			harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+id, harness.TestAdminToken, nil, &ex)
			recs = look()
			return ex.Status == "CANCELLED" && len(stillRunning(recs)) == 0
		}))
		took := time.Since(cancelled)
		t.Logf("FIGURE cancel of a tree of %d open child runs: every record ended in %s", peak[0], took.Round(time.Millisecond))
		if took > 10*time.Second {
			t.Errorf("the cancel took %s to end every descendant, want within 10 s", took)
		}
		if n := terminatedRuns(t, id, recs); n > 0 {
			t.Errorf("%d runs terminated by the server", n)
		}
	})
}

// TestSubWorkflowChildrenWithLargeGraphsEndBySluice runs three
// SUB_WORKFLOWs whose child's graph carries a 900 KB literal, which once
// went into the parent's start commands and got the run terminated by the
// server (GrpcMessageTooLarge). Each child now loads its own graph.
func TestSubWorkflowChildrenWithLargeGraphsEndBySluice(t *testing.T) {
	base := harness.StartSluice(t, nil)
	db, err := pgx.Connect(context.Background(), harness.AppsByBase[base].DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
	child := harness.DefineIn(t, base, ws, "big", map[string]any{"nodes": []any{
		harness.Node("big", "TRANSFORM", map[string]any{"output": strings.Repeat("x", 900<<10)}),
		harness.Node("small", "TRANSFORM", map[string]any{"output": "done"}),
	}, "edges": []any{harness.Edge("big", "small")}})
	parent := harness.DefineIn(t, base, ws, "three", fanOutGraph(3, child))
	id := startRun(t, base, ws, parent)
	ex := harness.WaitRun(t, base, id, 2*time.Minute, "the run to end", func(r harness.NodeRun) bool { return r.Status == "COMPLETED" || r.Status == "FAILED" })
	recs := treeRecords(t, db, id)
	msg := ""
	if ex.Error != nil {
		msg = *ex.Error
	}
	t.Logf("FIGURE three children of a 900 KB graph: %s (%q), %d records", ex.Status, msg, len(recs))
	if ex.Status == "FAILED" && msg == "" {
		t.Errorf("the run FAILED with no recorded cause")
	}
	if left := stillRunning(recs); len(left) > 0 {
		t.Errorf("records left RUNNING: %v", left)
	}
	if n := terminatedRuns(t, id, recs); n > 0 {
		t.Errorf("%d runs terminated by the server", n)
	}
}
