package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	appworker "github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// historyGeneration prefixes the histories recorded by the released
// workflow.
const historyGeneration = "v1_"

// TestRecordHistories runs representative executions on a real Temporal
// server and writes their histories to testdata/histories for
// TestReplayRecordedHistories. It is skipped unless
// SLUICE_RECORD_HISTORIES=1 and TEMPORAL_ADDRESS are set. It writes only
// histories that do not exist yet: after a versioned change to the
// workflow (workflow.GetVersion), add a scenario that takes the new branch
// under a new name and run, e.g.:
//
//	cd cmd/devstack && go build -o /tmp/devstack . && cd ../.. &&
//	/tmp/devstack -- env SLUICE_RECORD_HISTORIES=1 go test -run TestRecordHistories ./adapters/engine/
//
// The worker uses the in-memory store, so no database is needed, and the
// fake node executors of executors_test.go: what a history records is the
// workflow's commands, which do not depend on how a node did its work.
func TestRecordHistories(t *testing.T) {
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if os.Getenv("SLUICE_RECORD_HISTORIES") != "1" || addr == "" {
		t.Skip("set SLUICE_RECORD_HISTORIES=1 and TEMPORAL_ADDRESS to record histories")
	}
	namespace := os.Getenv("TEMPORAL_NAMESPACE")
	if namespace == "" {
		namespace = "default"
	}
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: namespace, Logger: discardLogger{}})
	if err != nil {
		t.Fatalf("dialing Temporal at %s: %v", addr, err)
	}
	t.Cleanup(c.Close)

	var flaky, busy atomic.Int32
	var calledOnce sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/orders":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"items": [{"id": 7}, {"id": 8}], "count": 2}`)
		case "/flaky":
			if flaky.Add(1) < 3 {
				http.Error(w, "try later", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, `{"ok": true}`)
		case "/busy":
			if busy.Add(1) == 1 {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, `{"ok": true}`)
		case "/once":
			// Each id's first call fails.
			if _, again := calledOnce.LoadOrStore(r.URL.Query().Get("id"), true); !again {
				http.Error(w, "try again", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, `{"ok": true}`)
		case "/hang":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	store := newMemStore()
	child, err := domain.DecodeGraph([]byte(`{"nodes": [{"key": "greet", "type": "TRANSFORM", "config": {"output": "hello {{ input.who }}"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	store.addDefinition(recordChildDefinition, recordWorkspace, child)
	queues := NewTaskQueues("sluice-history-" + uuid.NewString()[:8] + ".")
	ws := NewWorkers(c, WorkerConfig{
		Queues: queues, ServeWorkflows: true, ServeExternalAPI: true,
		WorkflowsSize: 10, ExternalAPISize: 10, Retry: testRetry,
		// Small payload and task limits, so that a recorded history shows
		// tasks ended at the task limit without megabytes of data.
		Limits: RunLimits{PayloadLimit: 1000, TaskLimit: 4000},
	}, newRecordingActivities(store), slog.New(slog.DiscardHandler))
	if err := ws.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Stop)
	// A team's worker on its own queue, for TEMPORAL_WORKFLOW nodes; the
	// queue nobody polls is allowed too, for a child no worker picks up.
	teamQueue, unpolledQueue := "sluice-history-team-"+uuid.NewString()[:8], "sluice-history-nobody-"+uuid.NewString()[:8]
	store.allowed = []domain.AllowListEntry{{TaskQueue: teamQueue}, {TaskQueue: unpolledQueue}}
	tw := worker.New(c, teamQueue, worker.Options{})
	registerTeamWorkflows(tw)
	tw.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		return workflow.Sleep(ctx, time.Hour)
	}, workflow.RegisterOptions{Name: "TeamSlow"})
	if err := tw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Stop)

	type scenario struct {
		name  string
		graph string
		input string
		// before runs before the execution starts; during while it runs,
		// e.g. to cancel it.
		before, during func(t *testing.T, execID domain.ID)
		want           domain.ExecutionStatus
		// loadGraph leaves the graph out of the input.
		loadGraph bool
		// refuseSuccess makes the store refuse a COMPLETED completion.
		refuseSuccess bool
		// retryOf seeds the store with the original a retry reuses and
		// names it.
		retryOf func() domain.ID
	}
	scenarios := []scenario{
		{
			// An HTTP node feeding a TRANSFORM beside a DELAY, joined by a
			// CONDITION whose false branch is skipped.
			name: "diamond_http_transform_delay_condition",
			graph: fmt.Sprintf(`{
				"nodes": [
					{"key": "fetch", "type": "HTTP_REQUEST", "config": {"url": "%s/orders", "headers": {"X-Exec": "{{ execution.id }}"}}},
					{"key": "shape", "type": "TRANSFORM", "config": {"output": {"first": "{{ steps.fetch.output.body.items[0].id }}", "count": "{{ steps.fetch.output.body.count }}"}}},
					{"key": "wait", "type": "DELAY", "config": {"duration": "1s"}},
					{"key": "check", "type": "CONDITION", "config": {"left": "{{ steps.shape.output.count }}", "op": ">", "right": "{{ input.min }}"}},
					{"key": "many", "type": "TRANSFORM", "config": {"output": "many"}},
					{"key": "few", "type": "TRANSFORM", "config": {"output": "few"}}
				],
				"edges": [
					{"from": "fetch", "to": "shape"}, {"from": "shape", "to": "check"}, {"from": "wait", "to": "check"},
					{"from": "check", "to": "many", "when": true}, {"from": "check", "to": "few", "when": false}
				]
			}`, srv.URL),
			input: `{"min": 1}`,
			want:  domain.ExecutionCompleted,
		},
		{
			name:  "http_5xx_retried_then_completed",
			graph: fmt.Sprintf(`{"nodes": [{"key": "flaky", "type": "HTTP_REQUEST", "config": {"url": "%s/flaky"}}]}`, srv.URL),
			want:  domain.ExecutionCompleted,
		},
		{
			name: "http_404_fails_and_skips_downstream",
			graph: fmt.Sprintf(`{
				"nodes": [
					{"key": "get", "type": "HTTP_REQUEST", "config": {"url": "%s/missing"}},
					{"key": "use", "type": "TRANSFORM", "config": {"output": "{{ steps.get.output.body }}"}}
				],
				"edges": [{"from": "get", "to": "use"}]
			}`, srv.URL),
			want: domain.ExecutionFailed,
		},
		{
			// Cancelled while a DELAY waits and an HTTP call hangs.
			name: "cancelled_during_delay_and_http",
			graph: fmt.Sprintf(`{
				"nodes": [
					{"key": "wait", "type": "DELAY", "config": {"duration": "1h"}},
					{"key": "call", "type": "HTTP_REQUEST", "config": {"url": "%s/hang", "timeout": "5m"}},
					{"key": "after", "type": "TRANSFORM", "config": {"output": 1}}
				],
				"edges": [{"from": "wait", "to": "after"}, {"from": "call", "to": "after"}]
			}`, srv.URL),
			during: func(t *testing.T, execID domain.ID) {
				porttest.Eventually(t, time.Minute, porttest.Holds("both nodes RUNNING", func() bool {
					st := store.statuses(execID)
					return st["wait"] == domain.NodeRunning && st["call"] == domain.NodeRunning
				}))
				if err := c.CancelWorkflow(context.Background(), WorkflowID(execID), ""); err != nil {
					t.Errorf("cancelling: %v", err)
				}
			},
			want: domain.ExecutionCancelled,
		},
		{
			name: "invalid_graph_cycle",
			graph: `{
				"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}, {"key": "b", "type": "TRANSFORM", "config": {"output": 2}}],
				"edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}]
			}`,
			want: domain.ExecutionFailed,
		},
		{
			name:  "empty_graph",
			graph: `{}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// More ready nodes than FREE's cap, a zero DELAY and a join
			// reading two of them.
			name: "fan_out_over_the_cap_with_zero_delay",
			graph: `{
				"nodes": [
					{"key": "a", "type": "TRANSFORM", "config": {"output": "{{ input.a }}"}},
					{"key": "b", "type": "TRANSFORM", "config": {"output": 2}},
					{"key": "c", "type": "TRANSFORM", "config": {"output": 3}},
					{"key": "d", "type": "TRANSFORM", "config": {"output": 4}},
					{"key": "e", "type": "TRANSFORM", "config": {"output": 5}},
					{"key": "f", "type": "TRANSFORM", "config": {"output": 6}},
					{"key": "z", "type": "DELAY", "config": {"duration": "0s"}},
					{"key": "join", "type": "TRANSFORM", "config": {"output": ["{{ steps.a.output }}", "{{ steps.f.output }}"]}}
				],
				"edges": [{"from": "a", "to": "join"}, {"from": "f", "to": "join"}, {"from": "z", "to": "join"}]
			}`,
			input: `{"a": 1, "unused": "x"}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// Two HTTP nodes, each refused a slot of its workspace's share
			// once: each waits on a timer and takes one on the next try.
			name: "http_nodes_wait_for_the_workspace_share",
			graph: fmt.Sprintf(`{
				"nodes": [
					{"key": "one", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/orders"}},
					{"key": "two", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/orders"}},
					{"key": "both", "type": "TRANSFORM", "config": {"output": ["{{ steps.one.output.status }}", "{{ steps.two.output.status }}"]}}
				],
				"edges": [{"from": "one", "to": "both"}, {"from": "two", "to": "both"}]
			}`, srv.URL),
			want: domain.ExecutionCompleted,
		},
		{
			// Six parallel TRANSFORMs of 900 bytes under a 4,000-byte task
			// limit: tasks end (1 ms timers) before one would pass it.
			name: "six_parallel_transforms_over_the_task_limit",
			graph: `{"nodes": [
				{"key": "t0", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}},
				{"key": "t1", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}},
				{"key": "t2", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}},
				{"key": "t3", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}},
				{"key": "t4", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}},
				{"key": "t5", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}}
			]}`,
			input: `{"s": "` + strings.Repeat("x", 900) + `"}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// An HTTP node whose first turn at its host waits 1 s (the
			// host's rate) and whose first call is not admitted as it
			// goes (0.5 s), then answered 429 with Retry-After: 1: it
			// pauses the host, waits the pause out and completes.
			name:  "http_node_waits_for_its_host_turn_and_a_retry_after",
			graph: fmt.Sprintf(`{"nodes": [{"key": "busy", "type": "HTTP_REQUEST", "config": {"url": "%s/busy"}}]}`, srv.URL),
			want:  domain.ExecutionCompleted,
		},
		{
			// The completion refused on every attempt: the execution is
			// recorded FAILED without its last records.
			name:          "completion_refused_then_recorded_failed",
			graph:         `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`,
			refuseSuccess: true,
			want:          domain.ExecutionFailed,
		},
		{
			// Nodes' own policies (node-policies): an HTTP node retried
			// under its own attempts and interval, a TRANSFORM with its
			// own timeout, beside one with neither.
			name: "node_policies_retry_and_timeout",
			graph: fmt.Sprintf(`{"nodes": [
				{"key": "flaky", "type": "HTTP_REQUEST", "config": {"url": "%s/flaky"}, "retry": {"maxAttempts": 4, "initialInterval": "100ms", "backoffCoefficient": 1}},
				{"key": "quick", "type": "TRANSFORM", "config": {"output": 1}, "timeout": "5s", "retry": {"maxAttempts": 2}},
				{"key": "plain", "type": "TRANSFORM", "config": {"output": 2}}
			]}`, srv.URL),
			want: domain.ExecutionCompleted,
		},
		{
			// A run deadline (run-deadline) passing while a DELAY waits.
			name: "run_deadline_cancels_the_run",
			graph: `{"runTimeout": "2s", "nodes": [
				{"key": "wait", "type": "DELAY", "config": {"duration": "1h"}},
				{"key": "after", "type": "TRANSFORM", "config": {"output": 1}}
			], "edges": [{"from": "wait", "to": "after"}]}`,
			want: domain.ExecutionCancelled,
		},
		{
			// A retry (retry-from-node) of a run whose "a" completed and
			// "b" failed: "a" is settled with its recorded output, "b" and
			// "c" run.
			name: "retry_reuses_completed_outputs",
			graph: `{"nodes": [
				{"key": "a", "type": "TRANSFORM", "config": {"output": {"v": 1}}},
				{"key": "b", "type": "TRANSFORM", "config": {"output": "{{ steps.a.output.v }}"}},
				{"key": "c", "type": "TRANSFORM", "config": {"output": ["{{ steps.a.output }}", "{{ steps.b.output }}"]}}
			], "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}]}`,
			retryOf: func() domain.ID {
				orig := domain.ID(uuid.New())
				store.addRun(domain.ID(uuid.New()), orig, 1, domain.Graph{})
				msg := "boom"
				if err := store.RecordNodes(context.Background(), orig, []domain.NodeRecord{
					{Key: "a", Type: domain.NodeTransform, Status: domain.NodeCompleted, Attempt: 1, Output: []byte(`{"v": 41}`)},
					{Key: "b", Type: domain.NodeTransform, Status: domain.NodeFailed, Attempt: 1, Error: &msg},
					{Key: "c", Type: domain.NodeTransform, Status: domain.NodeSkipped, Attempt: 1},
				}); err != nil {
					t.Fatal(err)
				}
				return orig
			},
			want: domain.ExecutionCompleted,
		},
		{
			// Two FOR_EACHs of three (HTTP and TRANSFORM iterations), six
			// iterations over FREE's four nodes in flight, joined by a TRANSFORM.
			name: "for_each_http_and_transform",
			graph: fmt.Sprintf(`{
				"nodes": [
					{"key": "calls", "type": "FOR_EACH", "config": {"items": "{{ input.ids }}", "node": {"type": "HTTP_REQUEST", "config": {"url": "%s/orders?id={{ item }}"}}}},
					{"key": "shapes", "type": "FOR_EACH", "config": {"items": "{{ input.ids }}", "node": {"type": "TRANSFORM", "config": {"output": {"i": "{{ index }}", "id": "{{ item }}"}}}}},
					{"key": "join", "type": "TRANSFORM", "config": {"output": ["{{ steps.calls.output[0].status }}", "{{ steps.shapes.output[2].id }}"]}}
				],
				"edges": [{"from": "calls", "to": "join"}, {"from": "shapes", "to": "join"}]
			}`, srv.URL),
			input: `{"ids": [1, 2, 3]}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// FOR_EACH iterations under their template's policies
			// (for-each-policies): HTTP iterations, each failing its first
			// call, retried under the template's attempts and interval,
			// each taking its host's turn first; TRANSFORM iterations under
			// the template's timeout.
			name: "for_each_iterations_take_their_template_policies",
			graph: fmt.Sprintf(`{
				"nodes": [
					{"key": "calls", "type": "FOR_EACH", "config": {"items": "{{ input.ids }}", "node": {"type": "HTTP_REQUEST", "config": {"url": "%s/once?id={{ item }}"}, "retry": {"maxAttempts": 2, "initialInterval": "100ms"}}}},
					{"key": "shapes", "type": "FOR_EACH", "config": {"items": [1, 2], "node": {"type": "TRANSFORM", "config": {"output": "{{ item }}"}, "timeout": "5s"}}}
				],
				"edges": [{"from": "calls", "to": "shapes"}]
			}`, srv.URL),
			input: `{"ids": [1, 2]}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// A FOR_EACH of a TRANSFORM whose iteration outgrows the
			// room of what it carries (its element of 20 bytes repeated 40 times, within
			// the recorder's payload limit of 1,000) and runs again with
			// the payload limit reserved.
			name: "for_each_iteration_outgrows_its_room",
			graph: `{
				"nodes": [
					{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input.items }}", "node": {"type": "TRANSFORM", "config": {"output": [` +
				strings.TrimSuffix(strings.Repeat(`"{{ item }}",`, 40), ",") + `]}}}}
				]
			}`,
			input: `{"items": ["` + strings.Repeat("x", 20) + `"]}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// A DAG's TRANSFORM node that outgrows the room of what it
			// carries (an input of 200 bytes repeated 4 times, within the
			// recorder's payload limit of 1,000) and runs again with the
			// payload limit reserved, beside a small one that does not.
			name: "pure_node_outgrows_its_room",
			graph: `{
				"nodes": [
					{"key": "big", "type": "TRANSFORM", "config": {"output": [` +
				strings.TrimSuffix(strings.Repeat(`"{{ input.s }}",`, 4), ",") + `]}},
					{"key": "small", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}}
				]
			}`,
			input: `{"s": "` + strings.Repeat("x", 200) + `"}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// One WAIT_FOR_EVENT signalled before it starts (behind a
			// DELAY), one that times out onto its false branch.
			name: "wait_for_event_signalled_and_timed_out",
			graph: `{
				"nodes": [
					{"key": "pause", "type": "DELAY", "config": {"duration": "1s"}},
					{"key": "approve", "type": "WAIT_FOR_EVENT", "config": {"event": "approval"}},
					{"key": "late", "type": "WAIT_FOR_EVENT", "config": {"event": "never", "timeout": "2s"}},
					{"key": "used", "type": "TRANSFORM", "config": {"output": "{{ steps.approve.output.by }}"}},
					{"key": "gave-up", "type": "TRANSFORM", "config": {"output": "timed out"}}
				],
				"edges": [{"from": "pause", "to": "approve"}, {"from": "approve", "to": "used"}, {"from": "late", "to": "gave-up", "when": false}]
			}`,
			during: func(t *testing.T, execID domain.ID) {
				if err := c.SignalWorkflow(context.Background(), WorkflowID(execID), "", EventSignalName("approval"),
					EventSignal{Payload: []byte(`{"by": "ada"}`)}); err != nil {
					t.Errorf("signalling: %v", err)
				}
			},
			want: domain.ExecutionCompleted,
		},
		{
			// A SUB_WORKFLOW whose child reads its input, and a TRANSFORM
			// reading the child's output.
			name: "sub_workflow_then_transform",
			graph: fmt.Sprintf(`{
				"nodes": [
					{"key": "sub", "type": "SUB_WORKFLOW", "config": {"definition": "%s", "input": {"who": "{{ input.name }}"}}},
					{"key": "after", "type": "TRANSFORM", "config": {"output": "{{ steps.sub.output.greet }}!"}}
				],
				"edges": [{"from": "sub", "to": "after"}]
			}`, recordChildDefinition),
			input: `{"name": "ada"}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// A team's workflow (TEMPORAL_WORKFLOW) on its own queue whose
			// result a CONDITION and a TRANSFORM read.
			name: "temporal_workflow_completed_then_condition",
			graph: fmt.Sprintf(`{"nodes": [
				{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "%s",
					"input": {"order": "{{ input.order }}"}, "workflowIdSuffix": "{{ input.order }}"}},
				{"key": "ok", "type": "CONDITION", "config": {"left": "{{ steps.team.output.ok }}", "op": "==", "right": true}},
				{"key": "shipped", "type": "TRANSFORM", "config": {"output": "{{ steps.team.output.echo.order }}"}},
				{"key": "refunded", "type": "TRANSFORM", "config": {"output": "refunded"}}
			], "edges": [{"from": "team", "to": "ok"}, {"from": "team", "to": "shipped"},
				{"from": "ok", "to": "shipped", "when": true}, {"from": "ok", "to": "refunded", "when": false}]}`, teamQueue),
			input: `{"order": "o-7"}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// The team's workflow fails: the node fails with its failure.
			name:  "temporal_workflow_failed",
			graph: fmt.Sprintf(`{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamFail", "taskQueue": "%s"}}]}`, teamQueue),
			want:  domain.ExecutionFailed,
		},
		{
			// No worker polls the team's queue: the child's execution
			// timeout ends it, and the node fails naming the queue.
			name:  "temporal_workflow_no_worker_times_out",
			graph: fmt.Sprintf(`{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "%s", "executionTimeout": "2s"}}]}`, unpolledQueue),
			want:  domain.ExecutionFailed,
		},
		{
			// The run is cancelled while the team's workflow runs: the
			// child is asked to cancel.
			name:  "temporal_workflow_cancelled_with_the_run",
			graph: fmt.Sprintf(`{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamSlow", "taskQueue": "%s"}}]}`, teamQueue),
			during: func(t *testing.T, execID domain.ID) {
				porttest.Eventually(t, time.Minute, porttest.Holds("the child RUNNING", func() bool {
					rec, ok := store.node(execID, "team")
					return ok && rec.ChildRunID != ""
				}))
				if err := c.CancelWorkflow(context.Background(), WorkflowID(execID), ""); err != nil {
					t.Errorf("cancelling: %v", err)
				}
			},
			want: domain.ExecutionCancelled,
		},
		{
			// The team's workflow is terminated by someone else: the node
			// fails naming the termination.
			name:  "temporal_workflow_terminated",
			graph: fmt.Sprintf(`{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamSlow", "taskQueue": "%s"}}]}`, teamQueue),
			during: func(t *testing.T, execID domain.ID) {
				var rec domain.NodeRecord
				porttest.Eventually(t, time.Minute, porttest.Holds("the child RUNNING", func() bool {
					var ok bool
					rec, ok = store.node(execID, "team")
					return ok && rec.ChildRunID != ""
				}))
				if err := c.TerminateWorkflow(context.Background(), rec.ChildWorkflowID, rec.ChildRunID, "an operator"); err != nil {
					t.Errorf("terminating the child: %v", err)
				}
			},
			want: domain.ExecutionFailed,
		},
		{
			// No worker polls the team's queue, and the reconciler's
			// stuck-start rule ends the child (EndAbandonedChild: the
			// reason signalled to the run, then the child terminated):
			// the node fails with the reason, long before the child's
			// execution timeout.
			name:  "temporal_workflow_ended_by_the_stuck_start_rule",
			graph: fmt.Sprintf(`{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "%s", "executionTimeout": "5m"}}]}`, unpolledQueue),
			during: func(t *testing.T, execID domain.ID) {
				var rec domain.NodeRecord
				porttest.Eventually(t, time.Minute, porttest.Holds("the child RUNNING", func() bool {
					var ok bool
					rec, ok = store.node(execID, "team")
					return ok && rec.ChildRunID != ""
				}))
				reason := fmt.Sprintf("no worker picked up workflow %s on task queue %q within 1s (Sluice's stuck-start rule, SLUICE_STUCK_START_AFTER)", rec.ChildWorkflowID, unpolledQueue)
				ctx := context.Background()
				if err := c.SignalWorkflow(ctx, WorkflowID(execID), "", abandonedChildSignalName(rec.ChildWorkflowID), reason); err != nil {
					t.Errorf("telling the run: %v", err)
				}
				if err := c.TerminateWorkflow(ctx, rec.ChildWorkflowID, rec.ChildRunID, reason); err != nil {
					t.Errorf("terminating the child: %v", err)
				}
			},
			want: domain.ExecutionFailed,
		},
		{
			// The run's deadline passes while the team's workflow runs.
			name:  "temporal_workflow_run_deadline",
			graph: fmt.Sprintf(`{"runTimeout": "2s", "nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamSlow", "taskQueue": "%s"}}]}`, teamQueue),
			want:  domain.ExecutionCancelled,
		},
		{
			// The child's workflow id is taken: the node fails naming it.
			name:  "temporal_workflow_id_already_started",
			graph: fmt.Sprintf(`{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "%s"}}]}`, teamQueue),
			before: func(t *testing.T, execID domain.ID) {
				if _, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
					ID: domain.TemporalWorkflowID(WorkflowID(execID), "team", ""), TaskQueue: teamQueue, WorkflowExecutionTimeout: time.Minute,
				}, "TeamSlow"); err != nil {
					t.Fatal(err)
				}
			},
			want: domain.ExecutionFailed,
		},
		{
			// The allow-list no longer permits the queue when the node
			// starts: it fails naming the rule, and no child starts.
			name:  "temporal_workflow_allow_list_revoked",
			graph: `{"nodes": [{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "revoked-queue"}}]}`,
			want:  domain.ExecutionFailed,
		},
		{
			// A team's workflow after another node: the allow-list is read
			// when the node starts (CheckTemporalWorkflow), not with the
			// run's admission, which reads it only for nodes that wait on
			// nothing.
			name: "temporal_workflow_after_a_node_checks_at_its_start",
			graph: fmt.Sprintf(`{"nodes": [
				{"key": "order", "type": "TRANSFORM", "config": {"output": {"order": "{{ input.order }}"}}},
				{"key": "team", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamEcho", "taskQueue": "%s", "input": "{{ steps.order.output }}"}}
			], "edges": [{"from": "order", "to": "team"}]}`, teamQueue),
			input: `{"order": "o-8"}`,
			want:  domain.ExecutionCompleted,
		},
		{
			// A dispatcher that could not fit the graph in the input.
			name:      "graph_loaded_by_the_workflow",
			graph:     `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`,
			loadGraph: true,
			want:      domain.ExecutionCompleted,
		},
	}
	// Every history carries the generation of the workflow it was
	// recorded by: v1_ for the first release. A change after it comes
	// behind workflow.GetVersion with a scenario of its own (see
	// docs/changing-the-workflow.md).
	for i := range scenarios {
		scenarios[i].name = historyGeneration + scenarios[i].name
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			path := filepath.Join(historyDir, sc.name+".json")
			if _, err := os.Stat(path); err == nil {
				// Histories are append-only: re-recording one would let a
				// change that breaks running executions pass the replay test.
				t.Skipf("%s exists and is kept; a new scenario gets a new name", path)
			}
			// Each scenario meets the local server's failures afresh.
			flaky.Store(0)
			busy.Store(0)
			if sc.refuseSuccess {
				store.refuseFinish = func(status domain.ExecutionStatus) error {
					if status == domain.ExecutionCompleted {
						return errors.New("refused")
					}
					return nil
				}
				t.Cleanup(func() { store.refuseFinish = nil })
			}
			g, err := domain.DecodeGraph([]byte(sc.graph))
			if err != nil {
				t.Fatal(err)
			}
			execID, defID := domain.ID(uuid.New()), domain.ID(uuid.New())
			store.addRun(defID, execID, 1, g)
			in := ExecutionInput{ExecutionID: execID.String(), WorkspaceID: recordWorkspace.String(), DefinitionID: defID.String(), Version: 1, Plan: domain.PlanFree}
			if !sc.loadGraph {
				in.Graph = []byte(sc.graph)
			}
			if sc.input != "" {
				in.Input = []byte(sc.input)
			}
			if sc.retryOf != nil {
				in.RetryOf = sc.retryOf().String()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			if sc.before != nil {
				sc.before(t, execID)
			}
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: WorkflowID(execID), TaskQueue: queues.Workflows}, ExecutionWorkflowName, in)
			if err != nil {
				t.Fatalf("starting workflow: %v", err)
			}
			if sc.during != nil {
				sc.during(t, execID)
			}
			var res ExecutionResult
			err = run.Get(ctx, &res)
			var cancelled *temporal.CanceledError
			switch {
			case errors.As(err, &cancelled):
			case err != nil:
				t.Fatalf("workflow: %v", err)
			}
			completions := store.finished()
			var got []domain.ExecutionStatus
			for _, cp := range completions {
				if cp.ID == execID {
					got = append(got, cp.Status)
				}
			}
			if len(got) != 1 || got[0] != sc.want {
				t.Fatalf("completions = %v, want one %s (%s)", got, sc.want, res.Error)
			}
			writeHistory(ctx, t, c, WorkflowID(execID), path)
		})
	}
}

// refusedOnce refuses each node's first try at a slot of its workspace's
// share and grants the next, so a recorded history takes the wait.
type refusedOnce struct {
	mu    sync.Mutex
	tried map[ports.NodeSlot]bool
}

func (r *refusedOnce) AcquireNodeSlot(_ context.Context, s ports.NodeSlot, _ int, _ time.Duration) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tried == nil {
		r.tried = map[ports.NodeSlot]bool{}
	}
	taken := r.tried[s]
	r.tried[s] = true
	return taken, nil
}

func (r *refusedOnce) ReleaseNodeSlot(context.Context, ports.NodeSlot) error { return nil }

// firstTurnWaits makes each workspace+host's first turn wait a second and
// its first call's admission half a second, and keeps pauses in memory,
// so a recorded history takes every wait.
type firstTurnWaits struct {
	mu       sync.Mutex
	tried    map[string]bool
	admitted map[string]bool
	paused   map[string]time.Time
}

func (g *firstTurnWaits) TakeOutboundTurn(_ context.Context, ws domain.ID, host string, holdsSlot bool) (ports.OutboundTurn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := ws.String() + "/" + host
	if until, ok := g.paused[key]; ok && time.Until(until) > 0 {
		return ports.OutboundTurn{Wait: time.Until(until)}, nil
	}
	if g.tried == nil {
		g.tried = map[string]bool{}
	}
	if !g.tried[key] && !holdsSlot {
		g.tried[key] = true
		return ports.OutboundTurn{Wait: time.Second, Reserved: true}, nil
	}
	return ports.OutboundTurn{}, nil
}

func (g *firstTurnWaits) AdmitOutboundCall(_ context.Context, ws domain.ID, host string) (time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := ws.String() + "/" + host
	if g.admitted == nil {
		g.admitted = map[string]bool{}
	}
	if !g.admitted[key] {
		g.admitted[key] = true
		return 500 * time.Millisecond, nil
	}
	return 0, nil
}

func (g *firstTurnWaits) PauseOutboundHost(_ context.Context, ws domain.ID, host string, wait time.Duration, _ int) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		g.paused = map[string]time.Time{}
	}
	g.paused[ws.String()+"/"+host] = time.Now().Add(wait)
	return true, nil
}

// The workspace of the recorded runs, and the definition their
// SUB_WORKFLOWs run.
var (
	recordWorkspace       = domain.ID(uuid.MustParse("7d1e6b0e-54a3-4c1f-9c55-2f3f3a8f0a01"))
	recordChildDefinition = domain.ID(uuid.MustParse("0b6f5a2c-8d3e-4f7a-a1b2-c3d4e5f60718"))
)

// writeHistory fetches a closed workflow's history and writes it as the
// JSON the replayer (and `temporal workflow show --output json`) uses.
func writeHistory(ctx context.Context, t *testing.T, c client.Client, workflowID, path string) {
	t.Helper()
	hist := &historypb.History{}
	iter := c.GetWorkflowHistory(ctx, workflowID, "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("reading history: %v", err)
		}
		hist.Events = append(hist.Events, ev)
	}
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d events)", path, len(hist.Events))
}

// newRecordingActivities are the activities the recorder's worker runs,
// with the recorder's payload limit.
func newRecordingActivities(store *memStore) *Activities {
	a := NewActivities(appworker.NewRuns(store, slog.New(slog.DiscardHandler), appworker.WithDefinitions(store), appworker.WithNodeSlots(&refusedOnce{}), appworker.WithOutboundGate(&firstTurnWaits{}),
		appworker.WithAllowLists(store, NewTaskQueues("").Reserved())), fakeExecutors())
	a.PayloadLimit = 1000
	return a
}
