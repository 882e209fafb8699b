package harness

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/sluicehq/sluice/ports/porttest"
)

// E2E drives one workspace on a running sluice.
type E2E struct {
	T    testing.TB
	Base string
	Ws   string
}

// NewE2E drives a new ENTERPRISE workspace.
func NewE2E(t testing.TB, base string) *E2E {
	return NewE2EWithPlan(t, base, "ENTERPRISE")
}

// NodeRecord is one node's record as the API shows it.
type NodeRecord struct {
	Key         string          `json:"key"`
	Status      string          `json:"status"`
	Attempt     int             `json:"attempt"`
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
	Error       *string         `json:"error"`
	StartedAt   *time.Time      `json:"startedAt"`
	CompletedAt *time.Time      `json:"completedAt"`
}

// Execution is a run as the API shows it, with its node records.
type Execution struct {
	ID     string       `json:"id"`
	Status string       `json:"status"`
	Error  *string      `json:"error"`
	Nodes  []NodeRecord `json:"nodes"`
}

// Node returns the record of the node with key, or an empty record.
func (e *Execution) Node(key string) NodeRecord {
	for _, n := range e.Nodes {
		if n.Key == key {
			return n
		}
	}
	return NodeRecord{}
}

// Start creates a definition of graph and starts it, returning the
// execution id once dispatched.
//
// Each start gets a workspace of its own, so its execution is the only one
// there (see ExecutionOf).
func (e *E2E) Start(graph map[string]any, input map[string]any) string {
	e.T.Helper()
	e.Ws = NewE2E(e.T, e.Base).Ws
	return e.StartIn(graph, input)
}

// StartIn is start in e's own workspace.
func (e *E2E) StartIn(graph map[string]any, input map[string]any) string {
	t := e.T
	t.Helper()
	var def struct{ ID string }
	if code := Call(t, "POST", e.Base+"/api/v1/workflow/definitions", TestAdminToken,
		map[string]any{"workspaceId": e.Ws, "name": "g", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	var q struct {
		QueueID string `json:"queueId"`
	}
	body := map[string]any{"workspaceId": e.Ws, "workflowDefinitionId": def.ID}
	if input != nil {
		body["input"] = input
	}
	if code := Call(t, "POST", e.Base+"/api/v1/workflow/executions/start", TestAdminToken, body, &q); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return ExecutionOf(t, e.Base, e.Ws, q.QueueID)
}

// WaitFor polls the execution until it has one of statuses, failing the
// test at the deadline.
func (e *E2E) WaitFor(execID string, statuses ...string) Execution {
	e.T.Helper()
	var ex Execution
	porttest.Eventually(e.T, 60*time.Second, porttest.Holds("execution to reach "+statuses[0], func() bool {
		ex = Execution{}
		Call(e.T, "GET", e.Base+"/api/v1/workflow/executions/"+execID, TestAdminToken, nil, &ex)
		for _, s := range statuses {
			if ex.Status == s {
				return true
			}
		}
		return false
	}))
	return ex
}

// Node is a graph's node of a type with its config.
func Node(key, typ string, cfg map[string]any) map[string]any {
	return map[string]any{"key": key, "type": typ, "config": cfg}
}

// Edge is a graph's edge from one node key to another.
func Edge(from, to string) map[string]any { return map[string]any{"from": from, "to": to} }

// runningApp is a started sluice and its database.
type runningApp struct {
	App   *fx.App
	DBURL string
}

// AppsByBase lets a test stop a started sluice to restart it.
var AppsByBase = map[string]runningApp{}

// HTTPNodeAllow lets HTTP_REQUEST nodes reach the tests' local servers
// past the outbound guard, which refuses loopback by default.
const HTTPNodeAllow = "127.0.0.0/8,::1/128"

// NewE2EWithPlan is NewE2E with a workspace on plan.
func NewE2EWithPlan(t testing.TB, base, plan string) *E2E {
	var ws struct{ ID string }
	if code := Call(t, "POST", base+"/api/v1/workspaces", TestAdminToken, map[string]any{"name": "e2e-" + plan, "plan": plan}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	return &E2E{T: t, Base: base, Ws: ws.ID}
}

// WaitForStatus polls an execution until it has one of statuses, for up
// to within.
func (e *E2E) WaitForStatus(execID string, within time.Duration, statuses ...string) Execution {
	e.T.Helper()
	var ex Execution
	porttest.Eventually(e.T, within, porttest.Holds("execution to reach "+strings.Join(statuses, " or "), func() bool {
		ex = Execution{}
		Call(e.T, "GET", e.Base+"/api/v1/workflow/executions/"+execID, TestAdminToken, nil, &ex)
		for _, s := range statuses {
			if ex.Status == s {
				return true
			}
		}
		return false
	}))
	return ex
}

// OneTransform is the smallest graph that runs: one TRANSFORM node.
var OneTransform = map[string]any{"nodes": []any{Node("a", "TRANSFORM", map[string]any{"output": map[string]any{"k": "v"}})}}
