package temporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// Registered names. They are part of the recorded histories, so they never
// change.
const (
	ExecutionWorkflowName = "SluiceExecution"
	loadGraphActivity     = "LoadGraph"
	runNodeActivity       = "RunNode"
	recordNodesActivity   = "RecordNodes"
	completeActivity      = "CompleteExecution"
)

// ExecutionInput starts an execution's workflow.
type ExecutionInput struct {
	ExecutionID  string
	WorkspaceID  string
	DefinitionID string
	Version      int
	Input        json.RawMessage
}

// ExecutionResult is what the workflow returns: the status it recorded.
type ExecutionResult struct {
	Status domain.ExecutionStatus
	Error  string
}

// RetryConfig is how node activities are retried. It is read from the
// worker's configuration once per execution through workflow.SideEffect, so
// a configuration change never alters a running execution's replay.
type RetryConfig struct {
	InitialInterval    time.Duration
	BackoffCoefficient float64
	MaximumInterval    time.Duration
	MaximumAttempts    int32
	// ExternalAPIQueue is where HTTP_REQUEST nodes run.
	ExternalAPIQueue string
}

// DefaultRetryConfig is three attempts with exponential backoff from 1 s.
func DefaultRetryConfig() RetryConfig {
	return RetryConfig{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 3}
}

// Workflows holds the worker's configuration for the workflow.
type Workflows struct {
	Retry RetryConfig
}

// nodeOutcome is one finished node, as the selector hands it back.
type nodeOutcome struct {
	node    domain.Node
	output  json.RawMessage
	err     error
	started bool
}

// Execution runs one execution's DAG: every ready node at once, each as its
// own activity (or a durable timer for DELAY), with results applied to the
// per-execution domain scheduler in the order Temporal delivers them, which
// replay reproduces.
func (w *Workflows) Execution(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
	log := workflow.GetLogger(ctx)
	var executionID string
	if err := workflow.SideEffect(ctx, func(ctx workflow.Context) any {
		return strings.TrimPrefix(workflow.GetInfo(ctx).WorkflowExecution.ID, "execution-")
	}).Get(&executionID); err != nil {
		return ExecutionResult{}, err
	}
	var retry RetryConfig
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return w.Retry }).Get(&retry); err != nil {
		return ExecutionResult{}, err
	}
	run := &executionRun{ctx: ctx, executionID: executionID, in: in, retry: retry, steps: map[string]json.RawMessage{}}

	var graph domain.Graph
	if err := workflow.ExecuteActivity(run.bookkeeping(ctx), loadGraphActivity, LoadGraphInput{
		DefinitionID: in.DefinitionID, Version: in.Version,
	}).Get(ctx, &graph); err != nil {
		return run.complete(domain.ExecutionFailed, "loading graph: "+errorMessage(err))
	}
	sched, err := domain.NewScheduler(graph)
	if err != nil {
		return run.complete(domain.ExecutionFailed, "invalid graph: "+err.Error())
	}

	sel := workflow.NewSelector(ctx)
	pending := 0
	var failure string
	for {
		if ctx.Err() == nil && failure == "" {
			ready, err := sched.Next()
			if err != nil {
				failure = err.Error()
			}
			for _, n := range ready {
				run.launch(sel, n)
				pending++
			}
		}
		if pending == 0 {
			break
		}
		sel.Select(ctx)
		pending--
		o := run.last
		switch {
		case o.err == nil:
			var out any
			if err := json.Unmarshal(o.output, &out); err != nil {
				out = nil
			}
			skipped, err := sched.Completed(o.node.Key, out)
			if err != nil {
				failure = err.Error()
				continue
			}
			run.steps[o.node.Key] = o.output
			run.record(ctx, skippedRecords(skipped, graph, "branch not taken"))
		case temporal.IsCanceledError(o.err) || ctx.Err() != nil:
			run.record(workflowDisconnected(ctx), []NodeRecordInput{{Key: o.node.Key, Type: o.node.Type, Status: domain.NodeCancelled, Error: "execution cancelled"}})
		default:
			msg := errorMessage(o.err)
			_ = sched.Failed(o.node.Key)
			run.record(ctx, []NodeRecordInput{{Key: o.node.Key, Type: o.node.Type, Status: domain.NodeFailed, Error: msg}})
			if failure == "" {
				failure = fmt.Sprintf("node %s failed: %s", o.node.Key, msg)
			}
		}
	}
	if ctx.Err() != nil {
		dctx := workflowDisconnected(ctx)
		run.record(dctx, skippedRecords(sched.Unrun(), graph, "execution cancelled"))
		log.Info("execution cancelled", "execution_id", executionID)
		if _, err := run.completeWith(dctx, domain.ExecutionCancelled, "execution cancelled"); err != nil {
			return ExecutionResult{}, err
		}
		return ExecutionResult{}, temporal.NewCanceledError("execution cancelled")
	}
	if failure != "" {
		run.record(ctx, skippedRecords(sched.Unrun(), graph, "not run: "+failure))
		return run.complete(domain.ExecutionFailed, failure)
	}
	return run.complete(domain.ExecutionCompleted, "")
}

// executionRun is the state of one workflow run.
type executionRun struct {
	ctx         workflow.Context
	executionID string
	in          ExecutionInput
	retry       RetryConfig
	steps       map[string]json.RawMessage
	last        nodeOutcome
}

// bookkeeping is the activity context for Sluice's own database writes:
// short, retried generously, never on the external queue.
func (r *executionRun) bookkeeping(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
}

// launch starts one node and registers its completion with the selector.
func (r *executionRun) launch(sel workflow.Selector, n domain.Node) {
	if n.Type == domain.NodeDelay {
		f, settle := workflow.NewFuture(r.ctx)
		workflow.Go(r.ctx, func(gctx workflow.Context) {
			settle.Set(r.delay(gctx, n))
		})
		sel.AddFuture(f, func(f workflow.Future) {
			var out json.RawMessage
			err := f.Get(r.ctx, &out)
			r.last = nodeOutcome{node: n, output: out, err: err, started: true}
		})
		return
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: nodeTimeout(n),
		HeartbeatTimeout:    10 * time.Second,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    r.retry.InitialInterval,
			BackoffCoefficient: r.retry.BackoffCoefficient,
			MaximumInterval:    r.retry.MaximumInterval,
			MaximumAttempts:    r.retry.MaximumAttempts,
		},
	}
	if n.Type == domain.NodeHTTPRequest && r.retry.ExternalAPIQueue != "" {
		opts.TaskQueue = r.retry.ExternalAPIQueue
	}
	steps := make(map[string]json.RawMessage, len(r.steps))
	for k, v := range r.steps {
		steps[k] = v
	}
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, opts), runNodeActivity, RunNodeInput{
		ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID, Node: n, Input: r.in.Input, Steps: steps,
	})
	sel.AddFuture(f, func(f workflow.Future) {
		var out RunNodeOutput
		err := f.Get(r.ctx, &out)
		r.last = nodeOutcome{node: n, output: out.Output, err: err, started: true}
	})
}

// delay runs a DELAY node as a durable timer: the wait lives in Temporal's
// history, so a worker restart resumes it rather than starting over.
func (r *executionRun) delay(ctx workflow.Context, n domain.Node) (json.RawMessage, error) {
	cfg, err := domain.DecodeDelayConfig(n.Config)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "invalid_config", err)
	}
	started := workflow.Now(ctx)
	if err := workflow.ExecuteActivity(r.bookkeeping(ctx), recordNodesActivity, RecordNodesInput{
		ExecutionID: r.executionID, Nodes: []NodeRecordInput{{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, StartedAt: &started}},
	}).Get(ctx, nil); err != nil {
		return nil, err
	}
	if err := workflow.Sleep(ctx, cfg.Duration.Std()); err != nil {
		return nil, err
	}
	out, _ := json.Marshal(map[string]any{"waitedMs": cfg.Duration.Std().Milliseconds()})
	if err := workflow.ExecuteActivity(r.bookkeeping(ctx), recordNodesActivity, RecordNodesInput{
		ExecutionID: r.executionID, Nodes: []NodeRecordInput{{Key: n.Key, Type: n.Type, Status: domain.NodeCompleted, Output: out, StartedAt: &started}},
	}).Get(ctx, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// record writes node records; a failure to record is logged, not fatal:
// the execution's own status stays authoritative.
func (r *executionRun) record(ctx workflow.Context, nodes []NodeRecordInput) {
	if len(nodes) == 0 {
		return
	}
	if err := workflow.ExecuteActivity(r.bookkeeping(ctx), recordNodesActivity, RecordNodesInput{ExecutionID: r.executionID, Nodes: nodes}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("recording nodes failed", "execution_id", r.executionID, "error", err)
	}
}

func (r *executionRun) complete(status domain.ExecutionStatus, msg string) (ExecutionResult, error) {
	return r.completeWith(r.ctx, status, msg)
}

func (r *executionRun) completeWith(ctx workflow.Context, status domain.ExecutionStatus, msg string) (ExecutionResult, error) {
	if err := workflow.ExecuteActivity(r.bookkeeping(ctx), completeActivity, CompleteInput{
		ExecutionID: r.executionID, Status: status, Error: msg,
	}).Get(ctx, nil); err != nil {
		return ExecutionResult{}, err
	}
	return ExecutionResult{Status: status, Error: msg}, nil
}

func workflowDisconnected(ctx workflow.Context) workflow.Context {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return dctx
}

func skippedRecords(keys []string, g domain.Graph, reason string) []NodeRecordInput {
	types := make(map[string]domain.NodeType, len(g.Nodes))
	for _, n := range g.Nodes {
		types[n.Key] = n.Type
	}
	out := make([]NodeRecordInput, len(keys))
	for i, k := range keys {
		out[i] = NodeRecordInput{Key: k, Type: types[k], Status: domain.NodeSkipped, Error: reason}
	}
	return out
}

// nodeTimeout is the start-to-close timeout of a node's activity: an
// HTTP node's own timeout plus room to record it, else 30 s.
func nodeTimeout(n domain.Node) time.Duration {
	if n.Type == domain.NodeHTTPRequest {
		if cfg, err := domain.DecodeHTTPRequestConfig(n.Config); err == nil {
			return cfg.Timeout.Std() + 10*time.Second
		}
	}
	return 30 * time.Second
}

// errorMessage unwraps an activity error to the message its activity gave.
func errorMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Error()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "timed out: " + timeout.Error()
	}
	return err.Error()
}
