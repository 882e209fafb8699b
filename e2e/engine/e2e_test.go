package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

func TestSkeletonRunsAnExecutionToCompletion(t *testing.T) {
	base := harness.StartSluice(t, nil)

	var ws struct{ ID string }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "Acme", "plan": "FREE"}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	var def struct{ ID string }
	graph := map[string]any{
		"nodes": []any{map[string]any{"key": "greet", "type": "TRANSFORM",
			"config": map[string]any{"output": map[string]any{"message": "Hello, {{ input.name }}", "n": "{{ input.n }}"}}}},
		"edges": []any{},
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", harness.TestAdminToken,
		map[string]any{"workspaceId": ws.ID, "name": "greet", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	var started struct {
		QueueID string `json:"queueId"`
		Status  string `json:"status"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": ws.ID, "workflowDefinitionId": def.ID, "input": map[string]any{"name": "Ada", "n": 7}}, &started); code != 202 {
		t.Fatalf("start: %d", code)
	}
	if started.Status != "PENDING" {
		t.Fatalf("a new queue item is %s, want PENDING", started.Status)
	}

	executionID := harness.ExecutionOf(t, base, ws.ID, started.QueueID)
	type node struct {
		Key    string         `json:"key"`
		Status string         `json:"status"`
		Output map[string]any `json:"output"`
	}
	var exec struct {
		Status     string `json:"status"`
		DurationMs *int64 `json:"durationMs"`
		Nodes      []node `json:"nodes"`
	}
	porttest.Eventually(t, 60*time.Second, porttest.Holds("the execution to complete", func() bool {
		harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+executionID, harness.TestAdminToken, nil, &exec)
		return exec.Status == "COMPLETED"
	}))
	if exec.DurationMs == nil {
		t.Error("a completed execution has no duration")
	}
	if len(exec.Nodes) != 1 || exec.Nodes[0].Key != "greet" || exec.Nodes[0].Status != "COMPLETED" {
		t.Fatalf("node records = %+v, want greet COMPLETED", exec.Nodes)
	}
	if got := fmt.Sprint(exec.Nodes[0].Output); got != "map[message:Hello, Ada n:7]" {
		t.Errorf("greet output = %s", got)
	}
	var problem map[string]any
	if code := harness.Call(t, "GET", base+"/api/v1/workflow/queue/"+started.QueueID, harness.TestAdminToken, nil, &problem); code != 404 {
		t.Errorf("queue item after completion: status %d, want 404 (deleted)", code)
	}
}

func TestStartRefusesUnknownAndForeignDefinitions(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{"SLUICE_DISPATCH_ENABLED": "false"})
	var a, b struct{ ID string }
	harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "A", "plan": "FREE"}, &a)
	harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "B", "plan": "FREE"}, &b)
	var def struct{ ID string }
	harness.Call(t, "POST", base+"/api/v1/workflow/definitions", harness.TestAdminToken,
		map[string]any{"workspaceId": b.ID, "name": "x", "graph": map[string]any{"nodes": []any{}}}, &def)

	var problem struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": a.ID, "workflowDefinitionId": uuid.NewString()}, &problem)
	if code != 404 || problem.Status != 404 {
		t.Errorf("unknown definition: %d %+v, want 404", code, problem)
	}
	code = harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": a.ID, "workflowDefinitionId": def.ID}, &problem)
	if code != 403 || problem.Type != "https://sluice.dev/problems/forbidden" {
		t.Errorf("another workspace's definition: %d %+v, want 403 forbidden", code, problem)
	}
}
