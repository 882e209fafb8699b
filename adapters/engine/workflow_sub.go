package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// loadSubWorkflowActivity is the registered name of LoadSubWorkflow.
const loadSubWorkflowActivity = "LoadSubWorkflow"

// ParentRun marks an execution's workflow as a SUB_WORKFLOW's child: it
// records its nodes under the parent's execution, their keys prefixed
// with KeyPrefix ("<node>/", "/" never being in a key), records no
// execution status, and returns its outputs to the parent.
type ParentRun struct {
	KeyPrefix string
	// Depth is the child's nesting depth, 1 for a run's own SUB_WORKFLOW.
	Depth int
}

// LoadSubWorkflowInput names the definition a SUB_WORKFLOW runs.
type LoadSubWorkflowInput struct {
	WorkspaceID  string
	DefinitionID string
	// Version is pinned, or 0 for the current one.
	Version int
}

// SubWorkflowGraph is the graph a SUB_WORKFLOW runs, with its version.
type SubWorkflowGraph struct {
	Graph   json.RawMessage
	Version int
}

// LoadSubWorkflow loads the definition a SUB_WORKFLOW runs, which must be
// of the run's workspace. A missing one cannot appear later, so it is not
// retried.
func (a *Activities) LoadSubWorkflow(ctx context.Context, in LoadSubWorkflowInput) (SubWorkflowGraph, error) {
	ws, err := domain.ParseID(in.WorkspaceID)
	if err != nil {
		return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	def, err := domain.ParseID(in.DefinitionID)
	if err != nil {
		return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError("bad definition id", "invalid_input", err)
	}
	g, version, err := a.runs.SubWorkflowGraph(ctx, ws, def, in.Version)
	if err != nil {
		if isNotFound(err) {
			return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("sub-workflow definition %s (version %d) not found in the workspace", in.DefinitionID, in.Version), "not_found", err)
		}
		return SubWorkflowGraph{}, err
	}
	raw, err := domain.EncodeGraph(g)
	if err != nil {
		return SubWorkflowGraph{}, temporal.NewNonRetryableApplicationError(err.Error(), "invalid_graph", err)
	}
	return SubWorkflowGraph{Graph: raw, Version: version}, nil
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
	r.flush()
	res := ExecutionResult{Status: status, Error: msg}
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
		return ExecutionResult{Status: domain.ExecutionFailed, Error: "outputs: " + err.Error()}, nil
	case len(raw) > r.limits.PayloadLimit:
		return ExecutionResult{Status: domain.ExecutionFailed, Error: fmt.Sprintf(
			"the sub-workflow's outputs are %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", len(raw), r.limits.PayloadLimit)}, nil
	}
	res.Output = raw
	return res, nil
}

// launchSub runs a SUB_WORKFLOW: it resolves the child's input in the
// workflow, loads the child's graph (a local activity) and runs it as a
// Temporal child workflow on the run's task queue, inside the run's
// admission slot: nothing is enqueued, so a workspace at its limit never
// waits on its own children. The child's nodes count against its own
// nodes in flight, the SUB_WORKFLOW holds none of the parent's. A
// cancelled run cancels the child and waits for its records.
func (r *executionRun) launchSub(sel workflow.Selector, n domain.Node) {
	started := workflow.Now(r.ctx)
	f, settle := workflow.NewFuture(r.ctx)
	sel.AddFuture(f, func(f workflow.Future) {
		var out json.RawMessage
		err := f.Get(r.ctx, &out)
		ended := workflow.Now(r.ctx)
		r.last = nodeOutcome{node: n, output: out, err: err, started: &started, ended: &ended, attempt: 1}
	})
	cfg, input, err := r.subInput(n)
	r.started(n)
	if err != nil {
		settle.SetError(temporal.NewNonRetryableApplicationError(err.Error(), "invalid_input", nil))
		return
	}
	depth := 1
	if r.in.Parent != nil {
		depth = r.in.Parent.Depth + 1
	}
	if depth > domain.MaxSubWorkflowDepth {
		settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"sub-workflows nest deeper than the limit of %d", domain.MaxSubWorkflowDepth), "too_deep", nil))
		return
	}
	r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, Attempt: 1, StartedAt: &started})
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		var sub SubWorkflowGraph
		if err := workflow.ExecuteLocalActivity(bookkeeping(ctx), loadSubWorkflowActivity, LoadSubWorkflowInput{
			WorkspaceID: r.in.WorkspaceID, DefinitionID: cfg.Definition.String(), Version: cfg.Version,
		}).Get(ctx, &sub); err != nil {
			settle.SetError(err)
			return
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			// From the execution's id, not the running workflow's: a
			// replayer runs the history under an id of its own.
			WorkflowID:          workflowIDPrefix + r.executionID + "/" + r.keyPrefix() + n.Key,
			WaitForCancellation: true,
			ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		})
		child := ExecutionInput{
			ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID, DefinitionID: cfg.Definition.String(),
			Version: sub.Version, Input: input, Plan: r.in.Plan, Graph: sub.Graph,
			Parent: &ParentRun{KeyPrefix: r.keyPrefix() + n.Key + "/", Depth: depth},
		}
		var res ExecutionResult
		if err := workflow.ExecuteChildWorkflow(cctx, ExecutionWorkflowName, child).Get(ctx, &res); err != nil {
			settle.SetError(err)
			return
		}
		if res.Status != domain.ExecutionCompleted {
			settle.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"sub-workflow %s version %d %s: %s", cfg.Definition, sub.Version, strings.ToLower(string(res.Status)), res.Error), "sub_workflow_failed", nil))
			return
		}
		settle.Set(res.Output, nil)
	})
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
