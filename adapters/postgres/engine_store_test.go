package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// claimOne enqueues one item in a new workspace on plan with graph, and
// claims it.
func claimOne(t *testing.T, store *postgres.Store, plan domain.Plan, graph string) ports.ClaimedItem {
	t.Helper()
	ctx := context.Background()
	g, err := domain.DecodeGraph([]byte(graph))
	if err != nil {
		t.Fatal(err)
	}
	w, err := store.CreateWorkspace(ctx, domain.Workspace{ID: domain.ID(uuid.New()), Name: "ws", Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	d, err := store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: w.ID, Name: "d", Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Enqueue(ctx, ports.ItemToEnqueue{ID: domain.ID(uuid.New()), WorkspaceID: w.ID, DefinitionID: d.ID, Input: json.RawMessage(`{}`), Priority: 2, Actor: domain.Actor{Admin: true}}); err != nil {
		t.Fatal(err)
	}
	res, err := store.Claim(ctx, ports.Fence{}, 1, dispatch.PlanClaim(func(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
		q := map[domain.ID]int{}
		for _, w := range ws {
			q[w.ID] = 1
		}
		return q
	}), dispatch.RejectUnrunnable)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Claimed) != 1 {
		t.Fatalf("claimed %d items, want 1", len(res.Claimed))
	}
	return res.Claimed[0]
}

func TestClaimHandsOutThePlanAndTheGraph(t *testing.T) {
	t.Parallel()
	store := postgres.NewStore(pgtest.Pool(t), slog.New(slog.DiscardHandler))
	item := claimOne(t, store, domain.PlanPro, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)

	if item.Plan != domain.PlanPro {
		t.Errorf("plan = %q, want PRO", item.Plan)
	}
	g, err := domain.DecodeGraph(item.Graph)
	if err != nil {
		t.Fatalf("graph %s: %v", item.Graph, err)
	}
	if len(g.Nodes) != 1 || g.Nodes[0].Key != "a" {
		t.Errorf("graph = %s, want the stored one", item.Graph)
	}
}

func TestRecordNodesWritesABatchInOneGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := postgres.NewStore(pgtest.Pool(t), slog.New(slog.DiscardHandler))
	item := claimOne(t, store, domain.PlanFree, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
	started := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
	failed := "boom"
	err := store.RecordNodes(ctx, item.ExecutionID, []domain.NodeRecord{
		{Key: "done", Type: domain.NodeTransform, Status: domain.NodeCompleted, Attempt: 2, Output: json.RawMessage(`{"x": 1}`), StartedAt: &started},
		{Key: "bad", Type: domain.NodeTransform, Status: domain.NodeFailed, Error: &failed},
		{Key: "gone", Type: domain.NodeTransform, Status: domain.NodeSkipped},
		{Key: "wait", Type: domain.NodeDelay, Status: domain.NodeRunning, StartedAt: &started},
	})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := store.ListNodes(ctx, item.ExecutionID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]domain.NodeRecord{}
	for _, n := range nodes {
		got[n.Key] = n
	}
	if n := got["done"]; n.Status != domain.NodeCompleted || n.Attempt != 2 || string(n.Output) != `{"x": 1}` || n.StartedAt == nil || !n.StartedAt.Equal(started) || n.CompletedAt == nil {
		t.Errorf("done = %+v", n)
	}
	if n := got["bad"]; n.Status != domain.NodeFailed || n.Error == nil || *n.Error != "boom" || n.StartedAt != nil {
		t.Errorf("bad = %+v", n)
	}
	if n := got["gone"]; n.Status != domain.NodeSkipped || n.Error != nil || n.Output != nil {
		t.Errorf("gone = %+v", n)
	}
	if n := got["wait"]; n.Status != domain.NodeRunning || n.CompletedAt != nil {
		t.Errorf("wait = %+v", n)
	}

	// A later batch finishes the RUNNING node and keeps its start.
	if err := store.RecordNodes(ctx, item.ExecutionID, []domain.NodeRecord{{Key: "wait", Type: domain.NodeDelay, Status: domain.NodeCompleted, Output: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	nodes, _ = store.ListNodes(ctx, item.ExecutionID, 100, "")
	for _, n := range nodes {
		if n.Key == "wait" && (n.Status != domain.NodeCompleted || n.StartedAt == nil || n.CompletedAt == nil) {
			t.Errorf("wait after finishing = %+v", n)
		}
	}

	if err := store.RecordNodes(ctx, domain.ID(uuid.New()), []domain.NodeRecord{{Key: "x", Type: domain.NodeTransform, Status: domain.NodeSkipped}}); !isNotFound(err) {
		t.Errorf("recording nodes of a missing execution: %v, want ErrNotFound", err)
	}
}

func isNotFound(err error) bool { return errors.Is(err, ports.ErrNotFound) }

func TestFinishExecutionWritesItsLastRecordsOnlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := postgres.NewStore(pgtest.Pool(t), slog.New(slog.DiscardHandler))
	item := claimOne(t, store, domain.PlanFree, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)

	found, err := finish(ctx, store, item.ExecutionID, domain.ExecutionCompleted, nil,
		domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeCompleted, Output: json.RawMessage(`1`)})
	if err != nil || !found {
		t.Fatalf("finishing: found %v, %v", found, err)
	}
	// A repeat (a replayed completion) finds the execution ended and
	// writes nothing, not even its records.
	found, err = finish(ctx, store, item.ExecutionID, domain.ExecutionFailed, nil,
		domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeFailed})
	if err != nil || found {
		t.Fatalf("repeating: found %v, %v", found, err)
	}
	exec, err := store.GetExecutionWithoutNodes(ctx, item.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := store.ListNodes(ctx, item.ExecutionID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if exec.Status != domain.ExecutionCompleted || len(nodes) != 1 || nodes[0].Status != domain.NodeCompleted || string(nodes[0].Output) != "1" {
		t.Errorf("after finishing twice: %s with nodes %+v", exec.Status, nodes)
	}
}

func TestStoreKeepsTheExecutionStoreContract(t *testing.T) {
	t.Parallel()
	porttest.ExecutionStore(t, func(t *testing.T) porttest.ExecutionStoreFixture {
		store := postgres.NewStore(pgtest.Pool(t), quiet())
		claimed := func(t *testing.T, g domain.Graph) ports.ClaimedItem {
			raw, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			return claimOne(t, store, domain.PlanFree, string(raw))
		}
		runOf := func(item ports.ClaimedItem) porttest.Run {
			return porttest.Run{ExecutionID: item.ExecutionID, QueueID: item.ID, DefinitionID: item.DefinitionID, Version: item.Version}
		}
		return porttest.ExecutionStoreFixture{
			Store: store,
			NewRun: func(t *testing.T, g domain.Graph) porttest.Run {
				item := claimed(t, g)
				if recs, err := store.MarkDispatched(context.Background(), ports.Fence{}, []ports.DispatchedItem{{ID: item.ID, ExecutionID: item.ExecutionID}}); err != nil || len(recs) != 1 {
					t.Fatalf("marking dispatched: %d, %v", len(recs), err)
				}
				return runOf(item)
			},
			NewClaimedRun: func(t *testing.T, g domain.Graph) porttest.Run { return runOf(claimed(t, g)) },
			Release: func(t *testing.T, run porttest.Run) {
				item, err := store.GetQueueItem(context.Background(), run.QueueID)
				if err != nil {
					t.Fatal(err)
				}
				next := item.QueueState
				if err := next.ReleaseUnstarted("not started"); err != nil {
					t.Fatal(err)
				}
				exec := run.ExecutionID
				written, err := store.ApplyTransitions(context.Background(), []ports.QueueTransition{
					{ID: item.ID, FromStatus: item.Status, FromClaimedAt: item.ClaimedAt, To: next, DropExecution: &exec},
				})
				if err != nil || len(written) != 1 {
					t.Fatalf("releasing: %v, %v", written, err)
				}
			},
			Cancel: func(t *testing.T, run porttest.Run) {
				if _, err := store.UpdateQueueItem(context.Background(), run.QueueID, func(q *domain.QueueItem) error { return q.Cancel() }); err != nil {
					t.Fatal(err)
				}
			},
			QueueItem: func(t *testing.T, id domain.ID) (domain.QueueItem, bool) {
				q, err := store.GetQueueItem(context.Background(), id)
				if errors.Is(err, ports.ErrNotFound) {
					return domain.QueueItem{}, false
				}
				if err != nil {
					t.Fatal(err)
				}
				return q, true
			},
			Execution: func(t *testing.T, id domain.ID) domain.Execution {
				e, err := store.GetExecutionWithoutNodes(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				return e
			},
		}
	})
}

// TestRecordNodesWritesAndStreamsABatchInItsOrder: a batch the workflow
// decided (two ends, then a DELAY that waited on them starting, then
// another end) is written, and told by the feed, in the batch's order, and
// an end keeps the time the workflow gave it: a node started after its
// upstreams ended is never told, nor stamped, before them.
func TestRecordNodesWritesAndStreamsABatchInItsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, slog.New(slog.DiscardHandler))
	item := claimOne(t, store, domain.PlanFree, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
	ended := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
	err := store.RecordNodes(ctx, item.ExecutionID, []domain.NodeRecord{
		{Key: "w1", Type: domain.NodeDelay, Status: domain.NodeCompleted, Output: json.RawMessage(`{}`), StartedAt: &ended, CompletedAt: &ended},
		{Key: "b", Type: domain.NodeTransform, Status: domain.NodeCompleted, Output: json.RawMessage(`1`), StartedAt: &ended, CompletedAt: &ended},
		{Key: "w2", Type: domain.NodeDelay, Status: domain.NodeRunning},
		{Key: "c", Type: domain.NodeTransform, Status: domain.NodeCompleted, Output: json.RawMessage(`2`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT kind || '(' || (data->>'key') || ')' FROM feed_events WHERE execution_id = $1 AND kind LIKE 'node.%' ORDER BY id`, item.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		told = append(told, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := "node.finished(w1) node.finished(b) node.started(w2) node.finished(c)"
	if got := strings.Join(told, " "); got != want {
		t.Errorf("the feed told %s, want %s", got, want)
	}
	nodes, err := store.ListNodes(ctx, item.ExecutionID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		switch n.Key {
		case "w1", "b":
			if n.CompletedAt == nil || !n.CompletedAt.Equal(ended) {
				t.Errorf("%s ended at %v, want the time the workflow gave, %s", n.Key, n.CompletedAt, ended)
			}
		case "w2":
			if n.StartedAt == nil || n.StartedAt.Before(ended) {
				t.Errorf("w2 started at %v, before its upstreams ended at %s", n.StartedAt, ended)
			}
		}
	}
}

// TestRunningChildrenAreTheGivenRunsRunningTemporalWorkflowNodes: of the
// records of two runs, RunningChildren for the first returns only its
// RUNNING node that names a child, with the child's ids and the time its
// RUNNING record was written: not a completed child, a RUNNING node without one, nor the other
// run's.
func TestRunningChildrenAreTheGivenRunsRunningTemporalWorkflowNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := postgres.NewStore(pgtest.Pool(t), slog.New(slog.DiscardHandler))
	graph := `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`
	mine, other := claimOne(t, store, domain.PlanFree, graph), claimOne(t, store, domain.PlanFree, graph)
	started := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	child := func(key, status string) domain.NodeRecord {
		return domain.NodeRecord{Key: key, Type: domain.NodeTemporalWorkflow, Status: domain.NodeStatus(status), StartedAt: &started,
			ChildWorkflowID: "execution-x/" + key, ChildRunID: "run-" + key}
	}
	if err := store.RecordNodes(ctx, mine.ExecutionID, []domain.NodeRecord{
		child("team", "RUNNING"), child("done", "COMPLETED"),
		{Key: "wait", Type: domain.NodeDelay, Status: domain.NodeRunning, StartedAt: &started},
	}); err != nil {
		t.Fatal(err)
	}
	if err := store.RecordNodes(ctx, other.ExecutionID, []domain.NodeRecord{child("theirs", "RUNNING")}); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	got, err := store.RunningChildren(ctx, []domain.ID{mine.ExecutionID})
	if err != nil {
		t.Fatal(err)
	}
	want := ports.RunningChild{ExecutionID: mine.ExecutionID, NodeKey: "team", WorkflowID: "execution-x/team", RunID: "run-team"}
	if len(got) != 1 || got[0].StartedAt.IsZero() || got[0].StartedAt.After(written) {
		t.Fatalf("RunningChildren = %+v, want the one child, started when its record was written", got)
	}
	if got[0].StartedAt = (time.Time{}); got[0] != want {
		t.Errorf("RunningChildren = %+v, want %+v", got[0], want)
	}
}
