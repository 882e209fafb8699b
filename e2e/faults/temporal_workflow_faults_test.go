package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestFaultTeamWorkflowOutlivesSluicesWorkerAndIsPickedUpOnReplay runs a
// TEMPORAL_WORKFLOW whose team workflow (on the team's own queue and
// worker, in this test process) waits for a signal; Sluice's worker
// process is killed -9 while it waits. The team's workflow keeps running
// (Temporal holds it, not Sluice's worker); it is then let finish, and a
// new worker process replays the run, takes the child's result as the
// node's output and completes the run, with the child's ids on the node's
// record.
func TestFaultTeamWorkflowOutlivesSluicesWorkerAndIsPickedUpOnReplay(t *testing.T) {
	harness.FaultTest(t)
	dbURL := pgtest.URL(t)
	temporalAddr := harness.RequireEnv(t, "TEMPORAL_ADDRESS")
	ctx := context.Background()
	conn := connect(t, dbURL)
	prefix := "team" + uuid.NewString()[:8] + "."
	teamQueue := prefix + "team-orders"
	env := harness.FaultEnv(dbURL, temporalAddr, prefix)

	tc := harness.TemporalClient(t, temporalAddr)
	tw := worker.New(tc, teamQueue, worker.Options{})
	tw.RegisterWorkflowWithOptions(func(ctx workflow.Context, in map[string]any) (map[string]any, error) {
		workflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
		return map[string]any{"shipped": in["order"]}, nil
	}, workflow.RegisterOptions{Name: "TeamShip"})
	if err := tw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Stop)

	graph := fmt.Sprintf(`{"nodes": [{"key": "ship", "type": "TEMPORAL_WORKFLOW", "config": {"workflowType": "TeamShip", "taskQueue": %q,
		"input": {"order": "{{ input.n }}"}, "executionTimeout": "10m"}}], "edges": []}`, teamQueue)
	def := seedItems(t, conn, graph, 0)
	if _, err := conn.Exec(ctx, `INSERT INTO workspace_allow_list (workspace_id, task_queue)
		SELECT workspace_id, $2 FROM workflow_definitions WHERE id = $1`, def, teamQueue); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, input)
		SELECT gen_random_uuid(), workspace_id, id, '{"n": 7}' FROM workflow_definitions WHERE id = $1`, def); err != nil {
		t.Fatal(err)
	}
	harness.StartFaultRole(t, "dispatcher", env)
	sluiceWorker := harness.StartFaultRole(t, "worker", env)

	var childID, childRun string
	porttest.Eventually(t, 2*time.Minute, func() error {
		err := conn.QueryRow(ctx, `SELECT coalesce(child_workflow_id, ''), coalesce(child_run_id, '') FROM workflow_execution_nodes n
			JOIN workflow_executions e ON e.id = n.execution_id WHERE e.workflow_definition_id = $1 AND n.node_key = 'ship'`, def).Scan(&childID, &childRun)
		if err != nil || childRun == "" {
			return fmt.Errorf("the node's record names no child yet (%v)", err)
		}
		return nil
	})
	if err := sluiceWorker.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-sluiceWorker.Done
	killedAt := time.Now()

	d, err := tc.DescribeWorkflowExecution(ctx, childID, childRun)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the team's workflow is %s after Sluice's worker died, want RUNNING", st)
	}
	if err := tc.SignalWorkflow(ctx, childID, childRun, "go", nil); err != nil {
		t.Fatal(err)
	}
	harness.StartFaultRole(t, "worker", env)
	waitCount(t, conn, 2*time.Minute, "the run completed after a new worker replayed it", 1,
		`SELECT count(*) FROM workflow_executions WHERE workflow_definition_id = $1 AND status = 'COMPLETED'`, def)
	var output json.RawMessage
	if err := conn.QueryRow(ctx, `SELECT n.output FROM workflow_execution_nodes n JOIN workflow_executions e ON e.id = n.execution_id
		WHERE e.workflow_definition_id = $1 AND n.node_key = 'ship'`, def).Scan(&output); err != nil {
		t.Fatal(err)
	}
	var out struct{ Shipped json.Number }
	if err := json.Unmarshal(output, &out); err != nil || out.Shipped.String() != "7" {
		t.Errorf("the node's output is %s, want the team workflow's result", output)
	}
	t.Logf("FIGURE Sluice's worker killed -9 while the team's workflow %s ran: it stayed RUNNING, and a new worker completed the run %.1f s after the kill",
		childID, time.Since(killedAt).Seconds())
}
