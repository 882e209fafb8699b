package gated_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/gated"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/examples/teamservice"
)

// workspace makes a workspace of plan on the sluice at base, a definition
// of graph in it, and a gated client that holds the workspace's own API
// key, as a team would.
func workspace(t *testing.T, base, plan string, graph map[string]any) (*gated.Client, uuid.UUID, uuid.UUID) {
	t.Helper()
	var ws struct{ ID uuid.UUID }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "gated", "plan": plan}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	var key struct{ Secret string }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces/"+ws.ID.String()+"/api-keys", harness.TestAdminToken, map[string]any{"name": "team"}, &key); code != 201 {
		t.Fatalf("create API key: %d", code)
	}
	var def struct{ ID uuid.UUID }
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", key.Secret,
		map[string]any{"workspaceId": ws.ID, "name": "gated", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	c, err := gated.NewClient(base, key.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return c, ws.ID, def.ID
}

func greetGraph() map[string]any {
	return map[string]any{"nodes": []any{harness.Node("greet", "TRANSFORM",
		map[string]any{"output": map[string]any{"message": "Hello, {{ input.name }}"}})}, "edges": []any{}}
}

func TestGetDecodesTheOneNodesOutput(t *testing.T) {
	base := harness.StartSluice(t, nil)
	c, ws, def := workspace(t, base, "PRO", greetGraph())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	run, err := c.ExecuteWorkflow(ctx, gated.StartOptions{WorkspaceID: ws, DefinitionID: def, Priority: 2}, map[string]any{"name": "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if run.QueueID() == uuid.Nil {
		t.Fatal("an enqueued run has no queue id")
	}
	var out struct{ Message string }
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.Message != "Hello, Ada" {
		t.Fatalf("result %+v, want the node's output", out)
	}
	if run.ExecutionID() == uuid.Nil {
		t.Fatal("a finished run names no execution")
	}
}

func TestGetOfAFailedRunIsARunErrorWithTheNodesError(t *testing.T) {
	base := harness.StartSluice(t, nil)
	// The input has no name, so the template fails the node.
	c, ws, def := workspace(t, base, "PRO", greetGraph())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	run, err := c.ExecuteWorkflow(ctx, gated.StartOptions{WorkspaceID: ws, DefinitionID: def}, map[string]any{"nom": "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	var runErr *gated.RunError
	if !errors.As(err, &runErr) {
		t.Fatalf("Get of a failed run: %v, want a *gated.RunError", err)
	}
	if runErr.Status != "FAILED" || runErr.ExecutionID != run.ExecutionID() || runErr.NodeError == "" {
		t.Fatalf("run error %+v, want FAILED naming the execution and the node's error", runErr)
	}
}

func TestExecuteWorkflowReturnsTheAPIsProblem(t *testing.T) {
	base := harness.StartSluice(t, nil)
	c, ws, _ := workspace(t, base, "PRO", greetGraph())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, err := c.ExecuteWorkflow(ctx, gated.StartOptions{WorkspaceID: ws, DefinitionID: uuid.New()}, map[string]any{})
	var problem *gated.ProblemError
	if !errors.As(err, &problem) || problem.Status != http.StatusNotFound || problem.Problem.Detail == nil ||
		strings.Contains(*problem.Problem.Detail, "no such operation") {
		t.Fatalf("enqueue of an unknown definition: %v, want the API's 404 *gated.ProblemError for it", err)
	}
	if _, err := c.ExecuteWorkflow(ctx, gated.StartOptions{WorkspaceID: ws, WorkflowType: "ChargeCustomer", TaskQueue: "nobody"}, map[string]any{}); err == nil {
		t.Fatal("a workflow type no definition gates was enqueued")
	}
}

// team is a workspace of plan whose allow-list has the example team's
// queue, with a gating definition of ChargeCustomer there, and the team's
// worker polling it; the client holds the workspace's own key.
func team(t *testing.T, base, plan string) (*gated.Client, uuid.UUID, string) {
	t.Helper()
	queue := "team-billing-" + uuid.NewString()[:8]
	harness.StartTeamWorker(t, harness.TemporalAddress(t), queue)
	var ws struct{ ID uuid.UUID }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "team", "plan": plan}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	harness.AllowTaskQueue(t, base, ws.ID.String(), queue, teamservice.WorkflowType)
	var key struct{ Secret string }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces/"+ws.ID.String()+"/api-keys", harness.TestAdminToken, map[string]any{"name": "team"}, &key); code != 201 {
		t.Fatalf("create API key: %d", code)
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", key.Secret,
		map[string]any{"workspaceId": ws.ID, "name": "charge", "graph": harness.ChargeGraph(queue, nil)}, nil); code != 201 {
		t.Fatalf("create the gating definition: %d", code)
	}
	c, err := gated.NewClient(base, key.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return c, ws.ID, queue
}

func TestExecuteWorkflowRunsTheTeamsWorkflowFoundByTypeAndQueue(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{"SLUICE_DISPATCH_POLL_INTERVAL": "100ms"})
	c, ws, queue := team(t, base, "PRO")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := gated.StartOptions{WorkspaceID: ws, WorkflowType: teamservice.WorkflowType, TaskQueue: queue}

	run, err := c.ExecuteWorkflow(ctx, opts, teamservice.ChargeInput{Customer: "ada", AmountCents: 1200})
	if err != nil {
		t.Fatal(err)
	}
	var receipt teamservice.Receipt
	if err := run.Get(ctx, &receipt); err != nil {
		t.Fatal(err)
	}
	child := run.ChildWorkflow()
	wantID := "execution-" + run.ExecutionID().String() + "/charge"
	if receipt.Customer != "ada" || receipt.AmountCents != 1200 || receipt.ChargeID != "ch_"+wantID {
		t.Fatalf("receipt %+v, want ChargeCustomer's for ada's 1200 from workflow %s", receipt, wantID)
	}
	if child.WorkflowID != wantID || child.RunID == "" {
		t.Fatalf("child workflow %+v, want %s and its run id", child, wantID)
	}

	declined, err := c.ExecuteWorkflow(ctx, opts, teamservice.ChargeInput{Customer: "ada", AmountCents: 1200, Decline: true})
	if err != nil {
		t.Fatal(err)
	}
	err = declined.Get(ctx, nil)
	var runErr *gated.RunError
	if !errors.As(err, &runErr) || runErr.Status != "FAILED" || !strings.Contains(runErr.NodeError, "card declined") {
		t.Fatalf("Get of a declined charge: %v, want a FAILED *gated.RunError carrying the workflow's failure", err)
	}
}
