package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/domain"
)

// checkTemporalWorkflowActivity is the registered name of
// CheckTemporalWorkflow.
const checkTemporalWorkflowActivity = "CheckTemporalWorkflow"

// CheckTemporalWorkflowInput names what a TEMPORAL_WORKFLOW node is about
// to start, for the run-time allow-list check.
type CheckTemporalWorkflowInput struct {
	WorkspaceID  string
	TaskQueue    string
	WorkflowType string
}

// CheckTemporalWorkflow reads the workspace's allow-list now and returns
// its refusal of the queue and type (domain.AllowList.Refusal), "" when it
// permits them: the list may have changed since the definition was saved.
func (a *Activities) CheckTemporalWorkflow(ctx context.Context, in CheckTemporalWorkflowInput) (string, error) {
	ws, err := domain.ParseID(in.WorkspaceID)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError("bad workspace id", "invalid_input", err)
	}
	return a.runs.TemporalWorkflowRefusal(ctx, ws, in.TaskQueue, in.WorkflowType)
}

// ChildWorkflow names a TEMPORAL_WORKFLOW node's child in Temporal, for
// its record.
type ChildWorkflow struct {
	WorkflowID string
	RunID      string
}

// Error types a TEMPORAL_WORKFLOW node fails with.
const (
	// allowListErrorType: the allow-list no longer permits the child.
	allowListErrorType = "allow_list_refused"
	// childAlreadyStartedErrorType: the child's workflow id was taken.
	childAlreadyStartedErrorType = "workflow_id_taken"
	// childFailedErrorType: the child failed, timed out or was ended.
	childFailedErrorType = "temporal_workflow_failed"
)

// launchTemporal runs a TEMPORAL_WORKFLOW: the team's workflow type as a
// Temporal child workflow on the team's task queue, inside the run's
// admission slot and holding one of its nodes in flight, as launchSub
// does. In a goroutine of the workflow, so that other nodes launch
// meanwhile, it asks the allow-list again (CheckTemporalWorkflow, or the
// admission's read when the node launches in the workflow task the
// admission ended in: admittedRefusal), starts
// the child under a deterministic id (domain.TemporalWorkflowID), records
// the node RUNNING with the child's ids once Temporal has started it, and
// resolves with the child's result.
//
// The child's execution timeout is the config's (or the default), cut to
// what is left of the run's deadline (and childDeadlineMargin), so a child
// that no worker picks up (the team's worker down) or that outlives the
// run ends in Temporal as well; the run's cancellation, or its deadline, asks Temporal to cancel
// it without waiting for a worker to acknowledge, and the parent's close
// asks the same (ParentClosePolicy REQUEST_CANCEL).
func (r *executionRun) launchTemporal(sel workflow.Selector, n domain.Node) {
	started := r.now()
	var child *ChildWorkflow
	f, outcome := workflow.NewFuture(r.ctx)
	sel.AddFuture(f, func(f workflow.Future) {
		var out json.RawMessage
		err := f.Get(r.ctx, &out)
		ended := r.now()
		r.last = nodeOutcome{node: n, output: out, err: err, started: &started, ended: &ended, attempt: 1, child: child}
	})
	cfg, input, suffix, err := r.temporalInput(n)
	r.started(n)
	if err == nil {
		err = r.historyRoom("starting node "+n.Key, len(input))
	}
	if err != nil {
		outcome.SetError(asNonRetryable(err))
		return
	}
	refusal, checked := r.admittedRefusal(n.Key)
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		if !checked {
			if err := workflow.ExecuteLocalActivity(bookkeeping(ctx), checkTemporalWorkflowActivity, CheckTemporalWorkflowInput{
				WorkspaceID: r.in.WorkspaceID, TaskQueue: cfg.TaskQueue, WorkflowType: cfg.WorkflowType,
			}).Get(ctx, &refusal); err != nil {
				outcome.SetError(err)
				return
			}
		}
		if refusal != "" {
			outcome.SetError(temporal.NewNonRetryableApplicationError(refusal+" (the allow-list changed since the definition was saved)", allowListErrorType, nil))
			return
		}
		id := domain.TemporalWorkflowID(workflowIDPrefix+r.executionID, r.keyPrefix()+n.Key, suffix)
		cctx := workflow.WithChildOptions(ctx, r.temporalChildOptions(cfg, id))
		var args []any
		if input != nil {
			args = append(args, input)
		}
		run := workflow.ExecuteChildWorkflow(cctx, cfg.WorkflowType, args...)
		var exec workflow.Execution
		if err := run.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
			outcome.SetError(childStartError(err, cfg, id))
			return
		}
		child = &ChildWorkflow{WorkflowID: exec.ID, RunID: exec.RunID}
		r.record(NodeRecordInput{Key: n.Key, Type: n.Type, Status: domain.NodeRunning, Attempt: 1, StartedAt: &started, Child: child})
		r.flush(ctx)
		var out json.RawMessage
		if err := run.Get(ctx, &out); err != nil {
			if temporal.IsCanceledError(err) && r.ctx.Err() != nil {
				outcome.SetError(err)
				return
			}
			outcome.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf("workflow %s on task queue %q (id %s) %s",
				cfg.WorkflowType, cfg.TaskQueue, id, childFailure(err, cfg, abandonment(ctx, id))), childFailedErrorType, nil))
			return
		}
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		if len(out) > r.limits.PayloadLimit {
			outcome.SetError(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"workflow %s returned %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", cfg.WorkflowType, len(out), r.limits.PayloadLimit), "payload_too_large", nil))
			return
		}
		outcome.Set(out, nil)
	})
}

// admittedRefusal is the allow-list's verdict on TEMPORAL_WORKFLOW node
// key as the run's admission read it (AdmitRun), and whether there is
// one to use: only once, and only in the workflow task the admission
// ended in, where it is as fresh as CheckTemporalWorkflow's would be. A
// node launched in a later task (held by the nodes in flight or the
// task's bytes, or waiting on another node) reads the list again.
func (r *executionRun) admittedRefusal(key string) (string, bool) {
	a := r.admitted
	if !a.keys[key] || workflow.GetInfo(r.ctx).GetCurrentHistoryLength() != a.task {
		return "", false
	}
	delete(a.keys, key)
	return a.refusals[key], true
}

// temporalChildOptions are the child's options: on the team's queue,
// under id, bounded by its timeouts and the run's deadline, retried as its
// config says (once when it says nothing).
func (r *executionRun) temporalChildOptions(cfg domain.TemporalWorkflowConfig, id string) workflow.ChildWorkflowOptions {
	timeout := cfg.Timeout()
	if !r.deadlineAt.IsZero() {
		timeout = min(timeout, max(r.deadlineAt.Sub(workflow.Now(r.ctx)), 0)+childDeadlineMargin)
	}
	run := timeout
	if cfg.RunTimeout > 0 {
		run = min(cfg.RunTimeout.Std(), timeout)
	}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID:               id,
		TaskQueue:                cfg.TaskQueue,
		WorkflowExecutionTimeout: timeout,
		// Temporal's default, set so that every attempt is bounded
		// even where the execution timeout is not enforced.
		WorkflowRunTimeout: run,
		// A taken id is the node's failure, never another run's child.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// Not waiting: a team worker that is down would never acknowledge
		// the cancel, and the run would hold its slot for ever. The
		// execution timeout ends such a child in Temporal.
		WaitForCancellation: false,
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
	}
	if p := cfg.RetryPolicy; p != nil {
		// A policy without maxAttempts keeps the worker's attempts, as a
		// node's retry does; Temporal would read 0 as unlimited.
		attempts := r.retry.MaximumAttempts
		if p.MaxAttempts > 0 {
			attempts = int32(min(p.MaxAttempts, 1000))
		}
		opts.RetryPolicy = &temporal.RetryPolicy{
			InitialInterval: p.InitialInterval.Std(), BackoffCoefficient: p.BackoffCoefficient,
			MaximumInterval: p.MaxInterval.Std(), MaximumAttempts: max(attempts, 1),
		}
	}
	return opts
}

// childDeadlineMargin is how long past the run's deadline the child's
// execution timeout ends it: the run cancels it at the deadline (and
// records the deadline as the node's reason); the timeout is the backstop
// for a child whose worker is not there to act on the cancellation.
const childDeadlineMargin = time.Minute

// childStartError is the node's failure when Temporal did not start the
// child: a workflow id already taken is named as such.
func childStartError(err error, cfg domain.TemporalWorkflowConfig, id string) error {
	// The server answers the first; the SDK's test environment the
	// second.
	var taken *temporal.ChildWorkflowExecutionAlreadyStartedError
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &taken) || errors.As(err, &started) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"workflow id %s already exists in Temporal (WorkflowExecutionAlreadyStarted): workflow %s on task queue %q was not started",
			id, cfg.WorkflowType, cfg.TaskQueue), childAlreadyStartedErrorType, nil)
	}
	if temporal.IsCanceledError(err) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("starting workflow %s on task queue %q: %s",
		cfg.WorkflowType, cfg.TaskQueue, errorMessage(err)), childFailedErrorType, nil)
}

// abandonedChildSignalName is the signal by which the reconciler tells a
// run why it is about to terminate the child with workflow id childID
// (WorkflowClient.EndAbandonedChild): no worker picked it up within the
// stuck-start rule's time. One per child, from Sluice, not the tenant: the
// one event it adds is within the margin historyRoom keeps for what
// Sluice does not count.
func abandonedChildSignalName(childID string) string { return "sluice-abandoned-child:" + childID }

// abandonment is the reason the reconciler gave for terminating the child
// with workflow id childID, "" when it gave none: its signal is in the
// history before the child's termination.
func abandonment(ctx workflow.Context, childID string) string {
	var reason string
	workflow.GetSignalChannel(ctx, abandonedChildSignalName(childID)).ReceiveAsync(&reason)
	return reason
}

// childFailure says how the child ended, for the node's error: a timeout
// names the bound and the team's queue a missing worker would leave
// unpolled; a termination by Sluice's stuck-start rule, its reason
// (abandoned).
func childFailure(err error, cfg domain.TemporalWorkflowConfig, abandoned string) string {
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return fmt.Sprintf("timed out (%s) within its execution timeout of %s: no worker on task queue %q finished it (is the team's worker running?)",
			timeout.TimeoutType(), cfg.Timeout(), cfg.TaskQueue)
	}
	var term *temporal.TerminatedError
	if errors.As(err, &term) && abandoned != "" {
		return "was terminated by Sluice: " + abandoned
	}
	if errors.As(err, &term) {
		return "was terminated"
	}
	if temporal.IsCanceledError(err) {
		return "was cancelled"
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return "failed: " + app.Message()
	}
	return "failed: " + errorMessage(err)
}

// asNonRetryable wraps a plain error as a non-retryable application
// error; an application error is kept.
func asNonRetryable(err error) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), "invalid_input", nil)
}

// temporalInput decodes n's config and resolves the child's argument and
// workflow id suffix against what the run has, the argument bounded by the
// payload limit; input is nil when the config sets none.
func (r *executionRun) temporalInput(n domain.Node) (cfg domain.TemporalWorkflowConfig, input json.RawMessage, suffix string, err error) {
	cfg, err = domain.DecodeTemporalWorkflowConfig(n.Config)
	if err != nil {
		return cfg, nil, "", err
	}
	tctx := domain.TemplateContext{
		Input: r.input, Steps: r.outputs, ExecutionID: r.executionID, WorkspaceID: r.in.WorkspaceID,
		Budget: domain.NewTemplateBudget(r.limits.PayloadLimit),
	}
	if len(cfg.Input) > 0 {
		v, resolveErr := domain.ResolveJSON(cfg.Input, tctx)
		if resolveErr != nil {
			return cfg, nil, "", fmt.Errorf("config.input: %w", resolveErr)
		}
		if input, err = domain.EncodeJSON(v); err != nil {
			return cfg, nil, "", fmt.Errorf("config.input: %w", err)
		}
		if len(input) > r.limits.PayloadLimit {
			return cfg, nil, "", fmt.Errorf("config.input resolved to %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT)", len(input), r.limits.PayloadLimit)
		}
	}
	if cfg.WorkflowIDSuffix != "" {
		if suffix, err = domain.ResolveTemporalWorkflowSuffix(cfg.WorkflowIDSuffix, tctx); err != nil {
			return cfg, nil, "", err
		}
	}
	return cfg, input, suffix, nil
}
