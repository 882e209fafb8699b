package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// startSubWorkflowActivity is the registered name of StartSubWorkflow.
const startSubWorkflowActivity = "StartSubWorkflow"

// ParentRun marks an execution's workflow as a SUB_WORKFLOW's child: it
// loads its graph itself (StartSubWorkflow), records its nodes under the
// parent's execution, their keys prefixed with KeyPrefix ("<node>/", "/"
// never being in a key), runs within the one node in flight its
// SUB_WORKFLOW holds (nodesInFlight), records no execution status, and
// returns its outputs to the parent.
type ParentRun struct {
	KeyPrefix string
	// Depth is the child's nesting depth, 1 for a run's own SUB_WORKFLOW.
	Depth int
}

// StartSubWorkflowInput names the child run that starts and the
// definition it runs.
type StartSubWorkflowInput struct {
	WorkspaceID  string
	ExecutionID  string
	DefinitionID string
	// Version is pinned, or 0 for the current one.
	Version int
	// GraphLimit is the largest encoded graph the child may load, the
	// run's payload limit: the graph is the activity's result, which
	// Temporal refuses past its blob limit.
	GraphLimit int
}

// SubWorkflowGraph is the graph a child run runs, with its version.
type SubWorkflowGraph struct {
	Graph   json.RawMessage
	Version int
}

// StartSubWorkflow loads the graph a child run runs, which must be of the
// run's workspace, and counts its nodes against the execution's
// subWorkflowNodes quota (worker.Runs.StartSubWorkflow), then refuses a graph
// whose encoding is over in.GraphLimit (its nodes stay counted: the
// count errs toward the quota). A missing definition cannot appear later,
// nor a quota passed free itself, so neither is retried.
func (a *Activities) StartSubWorkflow(ctx context.Context, in StartSubWorkflowInput) (SubWorkflowGraph, error) {
	ids := make([]domain.ID, 3)
	for i, s := range []string{in.WorkspaceID, in.ExecutionID, in.DefinitionID} {
		id, err := domain.ParseID(s)
		if err != nil {
			return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError("bad id "+s, "invalid_input", err)
		}
		ids[i] = id
	}
	g, version, err := a.runs.StartSubWorkflow(ctx, ids[0], ids[1], ids[2], in.Version)
	var quota *domain.QuotaError
	switch {
	case errors.As(err, &quota):
		return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError(err.Error(), "quota_exceeded", err)
	case isNotFound(err):
		return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("sub-workflow definition %s (version %d) not found in the workspace", in.DefinitionID, in.Version), "not_found", err)
	case err != nil:
		return SubWorkflowGraph{}, err
	}
	raw, err := domain.EncodeGraph(g)
	if err != nil {
		return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError(err.Error(), "invalid_graph", err)
	}
	if len(raw) > in.GraphLimit {
		return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the sub-workflow's graph is %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", len(raw), in.GraphLimit), "payload_too_large", nil)
	}
	return SubWorkflowGraph{Graph: raw, Version: version}, nil
}

// childGraph is a child run's graph, which it loads itself rather than
// from its start input, so that no graph (up to the definition size
// limit each) crosses the parent's workflow task: the parent's start
// command carries the child's ids and input only. It also takes the
// child's count against the execution's quota, and notes the version it
// runs for the parent. The graph, at most the payload limit, is the
// marker of the current workflow task, whose room it takes (taskLoad).
// It returns a failure message, "" on success.
func (r *executionRun) childGraph() (domain.Graph, string) {
	var sub SubWorkflowGraph
	if err := workflow.ExecuteLocalActivity(bookkeeping(r.ctx), startSubWorkflowActivity, StartSubWorkflowInput{
		WorkspaceID: r.in.WorkspaceID, ExecutionID: r.executionID, DefinitionID: r.in.DefinitionID, Version: r.in.Version,
		GraphLimit: r.limits.PayloadLimit,
	}).Get(r.ctx, &sub); err != nil {
		return domain.Graph{}, errorMessage(err)
	}
	r.in.Version = sub.Version
	r.task.historyLength = workflow.GetInfo(r.ctx).GetCurrentHistoryLength()
	r.task.restart()
	r.task.used, r.task.events = taskEntryOverhead+len(sub.Graph), 1
	g, err := domain.DecodeGraph(sub.Graph)
	if err != nil {
		return domain.Graph{}, "graph " + err.Error()
	}
	return g, ""
}

// nodesInFlight is how many of this run's nodes may hold a node in flight
// at once: the plan's for an execution's own run; one for a child run,
// the one its SUB_WORKFLOW holds of its parent's.
//
// A child runs inside the slot its SUB_WORKFLOW holds, rather than taking
// slots of its own from a pool its ancestors draw from too, so that a tree
// cannot deadlock: no run ever waits for a slot another run holds (a
// parent holding every slot for children that wait for one would wait for
// ever). Every node that holds a slot, at any level, holds one lent down
// from the execution's own nodes in flight, so the whole tree runs at most
// the plan's nodes in flight at once, and at most that many child runs
// per level. A child's slot-holding nodes run one at a time; its DELAY
// and WAIT_FOR_EVENT nodes hold none and wait side by side.
func (r *executionRun) nodesInFlight() int {
	if r.in.Parent != nil {
		return 1
	}
	return r.limits.inFlight(r.in.Plan)
}

// keyPrefix is what this run's record keys start with: "" for an
// execution's own run, the SUB_WORKFLOW path for a child.
func (r *executionRun) keyPrefix() string {
	if r.in.Parent == nil {
		return ""
	}
	return r.in.Parent.KeyPrefix
}

// prefixKeys puts a child's prefix on its records' keys.
func (r *executionRun) prefixKeys(nodes []NodeRecordInput) {
	if p := r.keyPrefix(); p != "" {
		for i := range nodes {
			nodes[i].Key = p + nodes[i].Key
		}
	}
}

// retainLeaves keeps, in a child, the outputs of the nodes nothing reads
// (its leaves), which are its outputs to the parent.
func (r *executionRun) retainLeaves(g domain.Graph) {
	if r.in.Parent == nil {
		return
	}
	from := map[string]bool{}
	for _, e := range g.Edges {
		from[e.From] = true
	}
	for _, n := range g.Nodes {
		if !from[n.Key] {
			r.readers[n.Key]++
			r.leaves = append(r.leaves, n.Key)
		}
	}
}

// finishChild ends a child's run: it writes its last records under the
// parent's execution and returns its status with its outputs, an object
// of its completed leaves' outputs by key, bounded by the payload limit.
func (r *executionRun) finishChild(status domain.ExecutionStatus, msg string) (ExecutionResult, error) {
	r.flush(r.ctx)
	res := ExecutionResult{Status: status, Error: msg, Version: r.in.Version}
	if status != domain.ExecutionCompleted {
		return res, nil
	}
	out := map[string]any{}
	for _, k := range r.leaves {
		if v, ok := r.outputs[k]; ok {
			out[k] = v
		}
	}
	raw, err := json.Marshal(out)
	switch {
	case err != nil:
		return ExecutionResult{Status: domain.ExecutionFailed, Error: "outputs: " + err.Error(), Version: r.in.Version}, nil
	case len(raw) > r.limits.PayloadLimit:
		return ExecutionResult{Status: domain.ExecutionFailed, Version: r.in.Version, Error: fmt.Sprintf(
			"the sub-workflow's outputs are %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", len(raw), r.limits.PayloadLimit)}, nil
	}
	res.Output = raw
	return res, nil
}

// launchSub runs a SUB_WORKFLOW: it resolves the child's input in the
// workflow (at most the payload limit, below Temporal's blob limit) and
// runs the child as a Temporal child workflow on the run's task queue,
// inside the run's admission slot: nothing is enqueued, so a workspace at
// its limit never waits on its own children. The SUB_WORKFLOW holds one of
// the run's nodes in flight for as long as its child runs, and the child
// runs inside it (nodesInFlight). The child loads its own graph
// (childGraph). A cancelled run cancels the child and waits for its
// records.
func (r *executionRun) launchSub(sel workflow.Selector, n domain.Node) {
	started := r.now()
	f, outcome := workflow.NewFuture(r.ctx)
	sel.AddFuture(f, func(f workflow.Future) {
		var out json.RawMessage
		err := f.Get(r.ctx, &out)
		ended := r.now()
		r.last = nodeOutcome{node: n, output: out, err: err, started: &started, ended: &ended, attempt: 1}
	})
	cfg, input, err := r.subInput(n)
	r.started(n)
	if err != nil {
		outcome.SetError(temporal.NewNonRetryableApplicationError(err.Error(), "invalid_input", nil))
		return
	}
	depth := 1
	if r.in.Parent != nil {
		depth = r.in.Parent.Depth + 1
	}
	if depth > domain.MaxSubWorkflowDepth {
		outcome.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"sub-workflows nest deeper than the limit of %d", domain.MaxSubWorkflowDepth), "too_deep", nil))
		return
	}
	r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, Attempt: 1, StartedAt: &started})
	cctx := workflow.WithChildOptions(r.ctx, workflow.ChildWorkflowOptions{
		// From the execution's id, not the running workflow's: a
		// replayer runs the history under an id of its own.
		WorkflowID:          workflowIDPrefix + r.executionID + "/" + r.keyPrefix() + n.Key,
		WaitForCancellation: true,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_TERMINATE,
	})
	child := ExecutionInput{
		ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID, DefinitionID: cfg.Definition.String(),
		Version: cfg.Version, Input: input, Plan: r.in.Plan,
		Parent: &ParentRun{KeyPrefix: r.keyPrefix() + n.Key + "/", Depth: depth},
	}
	run := workflow.ExecuteChildWorkflow(cctx, ExecutionWorkflowName, child)
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		var res ExecutionResult
		if err := run.Get(ctx, &res); err != nil {
			outcome.SetError(err)
			return
		}
		if res.Status != domain.ExecutionCompleted {
			outcome.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"sub-workflow %s version %d %s: %s", cfg.Definition, res.Version, strings.ToLower(string(res.Status)), res.Error), "sub_workflow_failed", nil))
			return
		}
		outcome.Set(res.Output, nil)
	})
}

// startBytes is the bytes node n's start hands to Temporal in the current
// workflow task, with activity input in: a SUB_WORKFLOW's or a
// TEMPORAL_WORKFLOW's start carries its resolved input, which templates
// may make larger than what they read (an input that fails to resolve
// fails the node and starts nothing).
func (r *executionRun) startBytes(n domain.Node, in RunNodeInput) int {
	switch n.Type {
	case domain.NodeSubWorkflow:
		if _, input, err := r.subInput(n); err == nil {
			return max(in.size, len(input))
		}
	case domain.NodeTemporalWorkflow:
		if _, input, _, err := r.temporalInput(n); err == nil {
			return max(in.size, len(input))
		}
	}
	return in.size
}

// subInput decodes n's config and resolves the child's input against what
// the run has, bounded by the payload limit.
func (r *executionRun) subInput(n domain.Node) (domain.SubWorkflowConfig, json.RawMessage, error) {
	cfg, err := domain.DecodeSubWorkflowConfig(n.Config)
	if err != nil {
		return cfg, nil, err
	}
	if len(cfg.Input) == 0 {
		return cfg, json.RawMessage("{}"), nil
	}
	v, err := domain.ResolveJSON(cfg.Input, domain.TemplateContext{
		Input: r.input, Steps: r.outputs, ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID,
		Budget: domain.NewTemplateBudget(r.limits.PayloadLimit),
	})
	if err != nil {
		return cfg, nil, fmt.Errorf("config.input: %w", err)
	}
	raw, err := domain.EncodeJSON(v)
	if err != nil {
		return cfg, nil, fmt.Errorf("config.input: %w", err)
	}
	if len(raw) > r.limits.PayloadLimit {
		return cfg, nil, fmt.Errorf("config.input resolved to %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", len(raw), r.limits.PayloadLimit)
	}
	return cfg, raw, nil
}
