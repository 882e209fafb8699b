package harness

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/ports/porttest"
)

// NodeRun is an execution as the API shows it, with its node records.
type NodeRun struct {
	Status string `json:"status"`
	Error  *string
	Nodes  []struct {
		Key    string `json:"key"`
		Type   string `json:"type"`
		Status string `json:"status"`
		Output any    `json:"output"`
	} `json:"nodes"`
}

// Node returns the record of key, or fails the test.
func (r NodeRun) Node(t *testing.T, key string) (status string, output any) {
	t.Helper()
	for _, n := range r.Nodes {
		if n.Key == key {
			return n.Status, n.Output
		}
	}
	t.Fatalf("no record of node %s in %+v", key, r.Nodes)
	return "", nil
}

// StartGraph creates a workspace of plan, a definition of graph and one
// execution of it with input, through the API at base, and returns the
// workspace and execution ids.
func StartGraph(t *testing.T, base, plan string, graph map[string]any, input any) (string, string) {
	t.Helper()
	var ws struct{ ID string }
	if code := Call(t, "POST", base+"/api/v1/workspaces", TestAdminToken, map[string]any{"name": "nodes", "plan": plan}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	var def struct{ ID string }
	if code := Call(t, "POST", base+"/api/v1/workflow/definitions", TestAdminToken,
		map[string]any{"workspaceId": ws.ID, "name": "nodes", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	var started struct {
		QueueID string `json:"queueId"`
	}
	if code := Call(t, "POST", base+"/api/v1/workflow/executions/start", TestAdminToken,
		map[string]any{"workspaceId": ws.ID, "workflowDefinitionId": def.ID, "input": input}, &started); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return ws.ID, ExecutionOf(t, base, ws.ID, started.QueueID)
}

// WaitRun polls the execution until done holds, and returns it.
func WaitRun(t *testing.T, base, execID string, within time.Duration, what string, done func(NodeRun) bool) NodeRun {
	t.Helper()
	var run NodeRun
	porttest.Eventually(t, within, porttest.Holds(what, func() bool {
		run = NodeRun{}
		Call(t, "GET", base+"/api/v1/workflow/executions/"+execID, TestAdminToken, nil, &run)
		return done(run)
	}))
	return run
}

// NodeIs reports whether the run has a record of key in status.
func NodeIs(key, status string) func(NodeRun) bool {
	return func(r NodeRun) bool {
		for _, n := range r.Nodes {
			if n.Key == key && n.Status == status {
				return true
			}
		}
		return false
	}
}

// StatusIs is done once the run has the status.
func StatusIs(status string) func(NodeRun) bool {
	return func(r NodeRun) bool { return r.Status == status }
}

// DefineIn creates a definition of graph in workspace ws and returns its id.
func DefineIn(t *testing.T, base, ws, name string, graph map[string]any) string {
	t.Helper()
	var def struct{ ID string }
	if code := Call(t, "POST", base+"/api/v1/workflow/definitions", TestAdminToken,
		map[string]any{"workspaceId": ws, "name": name, "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition %s: %d", name, code)
	}
	return def.ID
}

// SubGraph is one SUB_WORKFLOW node running child with input.
func SubGraph(child string, input any) map[string]any {
	return map[string]any{"nodes": []any{map[string]any{"key": "sub", "type": "SUB_WORKFLOW",
		"config": map[string]any{"definition": child, "input": input}}}, "edges": []any{}}
}
