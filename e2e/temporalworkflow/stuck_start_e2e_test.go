package temporalworkflow

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/examples/teamservice"
	"github.com/sluicehq/sluice/ports/porttest"
)

// stuckStartAfter is SLUICE_STUCK_START_AFTER in TestTheStuckStartRule…:
// short beside the children's execution timeout (childTimeout), long
// enough on a loaded machine for a worker to start within it.
const (
	stuckStartAfter = 10 * time.Second
	childTimeout    = 10 * time.Minute
)

// TestTheStuckStartRuleEndsATeamWorkflowNoWorkerPicksUp runs one sluice
// with SLUICE_STUCK_START_AFTER of 10 s and TEMPORAL_WORKFLOW nodes whose
// children may run 10 minutes (executionTimeout), each in its own
// workspace and on its own team queue:
//   - on a queue no worker ever polled, the child is ended by Sluice and
//     the run fails its node naming the queue and the rule, well before
//     the child's execution timeout, also when the node is inside a
//     SUB_WORKFLOW's child run (the reason goes to the workflow that
//     started the child);
//   - on a queue whose worker starts 5 s after the child did, within the
//     rule's time, the run completes;
//   - on a queue whose worker was killed -9 and is back 5 s after the
//     child started (a restart within the rule's time), the run completes;
//   - on a queue whose worker was killed -9 once Temporal listed its
//     poller, and is back only after the rule's time (15 s), the queue
//     counts as polled (Temporal keeps listing a poller a while after its
//     last poll):
//     the child is left alone and the run completes. A worker killed
//     before Temporal listed it is not known to Temporal as the queue's,
//     and its queue counts as unpolled.
func TestTheStuckStartRuleEndsATeamWorkflowNoWorkerPicksUp(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_STUCK_START_AFTER":          stuckStartAfter.String(),
		"SLUICE_DISPATCH_RECONCILE_AFTER":   "0s",
		"SLUICE_DISPATCH_RECOVERY_INTERVAL": "200ms",
		"SLUICE_DISPATCH_POLL_INTERVAL":     "100ms",
	})
	temporal := harness.TemporalAddress(t)
	tag := uuid.NewString()[:8]
	// The worker's binary is built by its first start: here, so that a
	// later start takes a second, not a build.
	harness.StartTeamWorker(t, temporal, "team-warm-"+tag)

	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprintf("no worker (in a SUB_WORKFLOW: %v)", nested), func(t *testing.T) {
			t.Parallel()
			queue := fmt.Sprintf("team-none-%v-%s", nested, tag)
			started := time.Now()
			exec := startCharge(t, base, queue, nested)
			run := harness.WaitRun(t, base, exec, 2*time.Minute, "the run to end", func(r harness.NodeRun) bool { return r.Status != "RUNNING" && r.Status != "" })
			if run.Status != "FAILED" {
				t.Fatalf("run %s; want FAILED", run.Status)
			}
			msg := deref(run.Error)
			if !strings.Contains(msg, fmt.Sprintf("task queue %q", queue)) || !strings.Contains(msg, "stuck-start rule, SLUICE_STUCK_START_AFTER") {
				t.Fatalf("run error %q; want it to name the team's queue and the stuck-start rule", msg)
			}
			took := time.Since(started)
			if took >= childTimeout/2 {
				t.Errorf("the run failed after %s; want well before the child's execution timeout of %s", took, childTimeout)
			}
			t.Logf("FIGURE a child on an unpolled queue (in a SUB_WORKFLOW: %v) failed its run %.1f s after the enqueue (rule %s, execution timeout %s): %s",
				nested, took.Seconds(), stuckStartAfter, childTimeout, msg)
		})
	}

	t.Run("worker starts within the rule's time", func(t *testing.T) {
		t.Parallel()
		queue := "team-late-" + tag
		exec := startCharge(t, base, queue, false)
		harness.WaitRun(t, base, exec, time.Minute, "the child to start", harness.NodeIs("charge", "RUNNING"))
		childStarted := time.Now()
		waitUnpicked(t, base, exec, stuckStartAfter/2)
		harness.StartTeamWorker(t, temporal, queue)
		polling := time.Since(childStarted)
		run := harness.WaitRun(t, base, exec, 2*time.Minute, "the run to end", func(r harness.NodeRun) bool { return r.Status != "RUNNING" && r.Status != "" })
		if run.Status != "COMPLETED" {
			t.Fatalf("run %s (%s); want COMPLETED by the worker that began polling %.1f s after the child started", run.Status, deref(run.Error), polling.Seconds())
		}
		t.Logf("FIGURE the worker polled %.1f s after the child started (rule %s): the run completed", polling.Seconds(), stuckStartAfter)
	})

	t.Run("worker restarting within the rule's time", func(t *testing.T) {
		t.Parallel()
		queue := "team-restart-" + tag
		harness.StartTeamWorker(t, temporal, queue).Kill()
		exec := startCharge(t, base, queue, false)
		harness.WaitRun(t, base, exec, time.Minute, "the child to start", harness.NodeIs("charge", "RUNNING"))
		childStarted := time.Now()
		waitUnpicked(t, base, exec, stuckStartAfter/2)
		harness.StartTeamWorker(t, temporal, queue)
		back := time.Since(childStarted)
		run := harness.WaitRun(t, base, exec, 2*time.Minute, "the run to end", func(r harness.NodeRun) bool { return r.Status != "RUNNING" && r.Status != "" })
		if run.Status != "COMPLETED" {
			t.Fatalf("run %s (%s); want COMPLETED by the worker back %.1f s after the child started", run.Status, deref(run.Error), back.Seconds())
		}
		t.Logf("FIGURE a worker killed -9 was back %.1f s after the child started (rule %s): the run completed", back.Seconds(), stuckStartAfter)
	})

	t.Run("worker restarting past the rule's time", func(t *testing.T) {
		t.Parallel()
		queue := "team-slow-restart-" + tag
		w := harness.StartTeamWorker(t, temporal, queue)
		tc := harness.TemporalClient(t, temporal)
		porttest.Eventually(t, time.Minute, func() error {
			d, err := tc.DescribeTaskQueue(context.Background(), queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
			if err != nil {
				return fmt.Errorf("describing %s: %w", queue, err)
			}
			if len(d.GetPollers()) == 0 {
				return fmt.Errorf("Temporal lists no poller of %s yet", queue)
			}
			return nil
		})
		w.Kill()
		exec := startCharge(t, base, queue, false)
		harness.WaitRun(t, base, exec, time.Minute, "the child to start", harness.NodeIs("charge", "RUNNING"))
		childStarted := time.Now()
		waitUnpicked(t, base, exec, stuckStartAfter+5*time.Second)
		harness.StartTeamWorker(t, temporal, queue)
		back := time.Since(childStarted)
		run := harness.WaitRun(t, base, exec, 2*time.Minute, "the run to end", func(r harness.NodeRun) bool { return r.Status != "RUNNING" && r.Status != "" })
		if run.Status != "COMPLETED" {
			t.Fatalf("run %s (%s); want COMPLETED by the worker back %.1f s after the child started", run.Status, deref(run.Error), back.Seconds())
		}
		t.Logf("FIGURE a worker killed -9 once Temporal listed its poller was back %.1f s after the child started (rule %s): the queue counted as polled, the run completed",
			back.Seconds(), stuckStartAfter)
	})
}

// waitUnpicked returns once the run's child has waited d with no worker,
// through the reconciler's walks (every 200 ms), failing the test if the
// run ends meanwhile.
func waitUnpicked(t *testing.T, base, exec string, d time.Duration) {
	t.Helper()
	from := time.Now()
	porttest.Eventually(t, d+time.Minute, func() error {
		var run harness.NodeRun
		harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+exec, harness.TestAdminToken, nil, &run)
		if run.Status != "RUNNING" {
			t.Fatalf("run %s (%s) within the stuck-start rule's time; want it left RUNNING", run.Status, deref(run.Error))
		}
		if waited := time.Since(from); waited < d {
			return fmt.Errorf("the child has waited %s of %s", waited, d)
		}
		return nil
	})
}

// startCharge creates a PRO workspace allowed ChargeCustomer on queue, a
// definition of one TEMPORAL_WORKFLOW node starting it there with an
// execution timeout of childTimeout (inside a SUB_WORKFLOW's child run
// when nested), and one run of it, and returns the run's execution id.
func startCharge(t *testing.T, base, queue string, nested bool) string {
	t.Helper()
	var ws struct{ ID string }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "stuck-" + queue, "plan": "PRO"}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	harness.AllowTaskQueue(t, base, ws.ID, queue, teamservice.WorkflowType)
	def := harness.DefineIn(t, base, ws.ID, "charge", map[string]any{"nodes": []any{harness.Node("charge", "TEMPORAL_WORKFLOW", map[string]any{
		"workflowType": teamservice.WorkflowType, "taskQueue": queue, "input": "{{ input }}", "executionTimeout": childTimeout.String(),
	})}, "edges": []any{}})
	if nested {
		def = harness.DefineIn(t, base, ws.ID, "nested", harness.SubGraph(def, "{{ input }}"))
	}
	var started struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken, map[string]any{
		"workspaceId": ws.ID, "workflowDefinitionId": def, "input": teamservice.ChargeInput{Customer: "c-" + queue, AmountCents: 100},
	}, &started); code != 202 {
		t.Fatalf("enqueue: %d", code)
	}
	return harness.ExecutionOf(t, base, ws.ID, started.QueueID)
}
