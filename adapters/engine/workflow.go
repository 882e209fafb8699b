package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	// ExternalAPITaskQueue is where HTTP_REQUEST nodes run.
	ExternalAPITaskQueue string
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
	node   domain.Node
	output json.RawMessage
	err    error
}

// Execution runs one execution's DAG: every ready node at once, each as its
// own activity (or a durable timer for DELAY), with results applied to the
// per-execution domain scheduler one at a time in the order their events
// appear in the history, which replay reproduces exactly.
//
// It always ends by recording the execution's status through
// CompleteExecution, on a context that cancellation cannot interrupt, so a
// cancelled or failed execution frees its slot like a completed one.
func (w *Workflows) Execution(ctx workflow.Context, in ExecutionInput) (ExecutionResult, error) {
	var executionID string
	if err := workflow.SideEffect(ctx, func(ctx workflow.Context) any {
		return executionIDFrom(workflow.GetInfo(ctx).WorkflowExecution.ID, in.ExecutionID)
	}).Get(&executionID); err != nil {
		return ExecutionResult{}, err
	}
	var retry RetryConfig
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return w.Retry }).Get(&retry); err != nil {
		return ExecutionResult{}, err
	}
	run := &executionRun{ctx: ctx, executionID: executionID, in: in, retry: retry, steps: map[string]json.RawMessage{}}

	var graph domain.Graph
	if err := workflow.ExecuteActivity(bookkeeping(ctx), loadGraphActivity, LoadGraphInput{
		DefinitionID: in.DefinitionID, Version: in.Version,
	}).Get(ctx, &graph); err != nil {
		if ctx.Err() != nil {
			return run.cancelled(nil)
		}
		return run.finish(domain.ExecutionFailed, "loading graph: "+errorMessage(err))
	}
	sched, err := domain.NewScheduler(graph)
	if err != nil {
		return run.finish(domain.ExecutionFailed, "graph "+err.Error())
	}
	run.types = make(map[string]domain.NodeType, len(graph.Nodes))
	for _, n := range graph.Nodes {
		run.types[n.Key] = n.Type
	}

	failure := run.drive(sched)
	switch {
	case ctx.Err() != nil:
		workflow.GetLogger(ctx).Info("execution cancelled", "execution_id", executionID)
		return run.cancelled(sched.Unrun())
	case failure != "":
		run.record(run.skipped(sched.Unrun(), "not run: "+failure))
		return run.finish(domain.ExecutionFailed, failure)
	}
	return run.finish(domain.ExecutionCompleted, "")
}

// executionIDFrom parses the execution id out of the workflow id
// ("execution-<uuid>"), which the seeds make the authority; a workflow
// started under another id falls back to the id in its input.
func executionIDFrom(workflowID, fallback string) string {
	if id, ok := strings.CutPrefix(workflowID, workflowIDPrefix); ok {
		if _, err := domain.ParseID(id); err == nil {
			return id
		}
	}
	return fallback
}

// executionRun is the state of one workflow run.
type executionRun struct {
	ctx         workflow.Context
	executionID string
	in          ExecutionInput
	retry       RetryConfig
	types       map[string]domain.NodeType
	steps       map[string]json.RawMessage
	last        nodeOutcome
}

// drive launches ready nodes and applies their outcomes until nothing runs.
// After a failure or a cancellation it launches nothing new but still
// waits for the nodes in flight, so that each gets its final record. It
// returns the first failure, "" if none.
func (r *executionRun) drive(sched *domain.Scheduler) string {
	sel := workflow.NewSelector(r.ctx)
	pending := 0
	failure := ""
	for {
		if r.ctx.Err() == nil && failure == "" {
			ready, err := sched.Next()
			if err != nil {
				failure = err.Error()
			}
			for _, n := range ready {
				r.launch(sel, n)
				pending++
			}
		}
		if pending == 0 {
			return failure
		}
		sel.Select(r.ctx)
		pending--
		if msg := r.apply(sched, r.last); failure == "" {
			failure = msg
		}
	}
}

// apply feeds one node's outcome to the scheduler and records what the
// workflow decided about it. It returns a failure message, "" if the node
// did not fail.
func (r *executionRun) apply(sched *domain.Scheduler, o nodeOutcome) string {
	key := o.node.Key
	if o.err == nil {
		var out any
		if err := json.Unmarshal(o.output, &out); err != nil {
			out = nil
		}
		skipped, err := sched.Completed(key, out)
		if err == nil {
			r.steps[key] = o.output
			r.record(r.skipped(skipped, "branch not taken"))
			return ""
		}
		o.err = err
	} else if temporal.IsCanceledError(o.err) && r.ctx.Err() != nil {
		r.record([]NodeRecordInput{{Key: key, Type: o.node.Type, Status: domain.NodeCancelled, Error: "execution cancelled"}})
		return ""
	}
	// A node failed, or was cancelled without the execution being
	// cancelled, which leaves its successors as stuck as a failure would.
	msg := errorMessage(o.err)
	_ = sched.Failed(key)
	r.record([]NodeRecordInput{{Key: key, Type: o.node.Type, Status: domain.NodeFailed, Error: msg}})
	return fmt.Sprintf("node %s failed: %s", key, msg)
}

// bookkeeping is the activity context for Sluice's own database writes:
// short, retried generously, never on the external queue.
func bookkeeping(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
}

// completionWrite is the activity context of the completion write: bookkeeping's
// options with no limit on attempts.
func completionWrite(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second},
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
			r.last = nodeOutcome{node: n, output: out, err: err}
		})
		return
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: nodeTimeout(n),
		HeartbeatTimeout:    10 * time.Second,
		// Waiting lets the activity acknowledge a cancellation before the
		// node is recorded CANCELLED, so no late write follows the record.
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    r.retry.InitialInterval,
			BackoffCoefficient: r.retry.BackoffCoefficient,
			MaximumInterval:    r.retry.MaximumInterval,
			MaximumAttempts:    r.retry.MaximumAttempts,
		},
	}
	if n.Type == domain.NodeHTTPRequest && r.retry.ExternalAPITaskQueue != "" {
		opts.TaskQueue = r.retry.ExternalAPITaskQueue
	}
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, opts), runNodeActivity, RunNodeInput{
		ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID, Node: n, Input: r.in.Input, Steps: maps.Clone(r.steps),
	})
	sel.AddFuture(f, func(f workflow.Future) {
		var out RunNodeOutput
		err := f.Get(r.ctx, &out)
		r.last = nodeOutcome{node: n, output: out.Output, err: err}
	})
}

// delay runs a DELAY node as a durable timer: the wait lives in Temporal's
// history, so a worker restart resumes it rather than starting over. Only
// the timer listens to cancellation; its records are written regardless,
// so a cancellation cannot leave a half-written node behind.
func (r *executionRun) delay(ctx workflow.Context, n domain.Node) (json.RawMessage, error) {
	cfg, err := domain.DecodeDelayConfig(n.Config)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "invalid_config", nil)
	}
	started := workflow.Now(ctx)
	if err := r.write(ctx, []NodeRecordInput{{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, StartedAt: &started}}); err != nil {
		return nil, err
	}
	if err := workflow.Sleep(ctx, cfg.Duration.Std()); err != nil {
		return nil, err
	}
	ended := workflow.Now(ctx)
	out, err := json.Marshal(map[string]any{"waitedMs": cfg.Duration.Std().Milliseconds()})
	if err != nil {
		return nil, err
	}
	if err := r.write(ctx, []NodeRecordInput{{Key: n.Key, Type: n.Type, Status: domain.NodeCompleted, Output: out, StartedAt: &started, CompletedAt: &ended}}); err != nil {
		return nil, err
	}
	return out, nil
}

// write records nodes on a context disconnected from ctx (the calling
// coroutine's), so that records decided before or during a cancellation
// are still written.
func (r *executionRun) write(ctx workflow.Context, nodes []NodeRecordInput) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	return workflow.ExecuteActivity(bookkeeping(ctx), recordNodesActivity, RecordNodesInput{ExecutionID: r.executionID, Nodes: nodes}).Get(ctx, nil)
}

// record writes node records; a failure to record is logged, not fatal:
// the execution's own status stays authoritative.
func (r *executionRun) record(nodes []NodeRecordInput) {
	if len(nodes) == 0 {
		return
	}
	now := workflow.Now(r.ctx)
	for i := range nodes {
		nodes[i].CompletedAt = &now
	}
	if err := r.write(r.ctx, nodes); err != nil {
		workflow.GetLogger(r.ctx).Warn("recording nodes failed", "execution_id", r.executionID, "error", err)
	}
}

// cancelled records the nodes the cancellation kept from running as
// SKIPPED, the execution as CANCELLED, and ends the workflow as cancelled.
func (r *executionRun) cancelled(unrun []string) (ExecutionResult, error) {
	r.record(r.skipped(unrun, "execution cancelled"))
	if _, err := r.finish(domain.ExecutionCancelled, "execution cancelled"); err != nil {
		return ExecutionResult{}, err
	}
	return ExecutionResult{}, temporal.NewCanceledError("execution cancelled")
}

// finish records the execution's final status. It runs on a disconnected
// context: a cancellation arriving at the end must not stop the write that
// frees the execution's slot. The write is idempotent and retried until it
// succeeds, however long Postgres is away: a lost completion would hold
// the slot and misreport the run, a slow one only delays both.
func (r *executionRun) finish(status domain.ExecutionStatus, msg string) (ExecutionResult, error) {
	ctx, _ := workflow.NewDisconnectedContext(r.ctx)
	if err := workflow.ExecuteActivity(completionWrite(ctx), completeActivity, CompleteInput{
		ExecutionID: r.executionID, Status: status, Error: msg,
	}).Get(ctx, nil); err != nil {
		return ExecutionResult{}, err
	}
	return ExecutionResult{Status: status, Error: msg}, nil
}

// skipped builds SKIPPED records for nodes that will never run.
func (r *executionRun) skipped(keys []string, reason string) []NodeRecordInput {
	out := make([]NodeRecordInput, len(keys))
	for i, k := range keys {
		out[i] = NodeRecordInput{Key: k, Type: r.types[k], Status: domain.NodeSkipped, Error: reason}
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

// errorMessage turns an activity error into the message its activity gave,
// without the SDK's wrapping ("activity error (type: ...)"), since it is
// shown to users on the node and execution records.
func errorMessage(err error) string {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		msg := "timed out (" + timeout.TimeoutType().String() + ")"
		var last *temporal.ApplicationError
		if errors.As(timeout, &last) {
			msg += "; last attempt: " + last.Message()
		}
		return msg
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	if temporal.IsCanceledError(err) {
		return "cancelled"
	}
	return err.Error()
}
