// Package engine is Sluice's Temporal adapter: the client side that starts,
// describes and cancels execution workflows, and the worker side that runs
// them: the orchestration workflow and its activities.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Task queue names. Workflows and their light activities run on
// WorkflowTaskQueue; HTTP_REQUEST nodes run on ExternalAPITaskQueue, served
// by their own worker, so slow third parties never starve orchestration.
const (
	WorkflowTaskQueue    = "workflows.default"
	ExternalAPITaskQueue = "activities.external-api"
)

// TaskQueues are the queue names in use: the constants, optionally with a
// prefix so that several test stacks can share one Temporal server.
type TaskQueues struct {
	Workflows   string
	ExternalAPI string
}

// NewTaskQueues returns the queue names with prefix prepended.
func NewTaskQueues(prefix string) TaskQueues {
	return TaskQueues{Workflows: prefix + WorkflowTaskQueue, ExternalAPI: prefix + ExternalAPITaskQueue}
}

// workflowIDPrefix starts every execution's workflow id; the workflow
// parses the execution id back out of it.
const workflowIDPrefix = "execution-"

// WorkflowID names an execution's workflow. Being derived from the
// execution id, it makes every start of the same execution the same start.
func WorkflowID(executionID domain.ID) string { return workflowIDPrefix + executionID.String() }

// WorkflowClient starts, inspects and cancels executions' workflows in
// Temporal: ports.WorkflowEngine on a Temporal client.
type WorkflowClient struct {
	client client.Client
	queues TaskQueues
	// payloadLimit is Limits.PayloadLimit, the workers' bound on what one
	// payload may carry, which a start's input must keep to as well.
	payloadLimit int
	// initMu and initialized: see initialize.
	initMu      sync.Mutex
	initialized atomic.Bool
}

var _ ports.WorkflowEngine = (*WorkflowClient)(nil)

// NewWorkflowClient wraps a connected client; limits are the workers' (only the
// payload limit applies to starting a workflow).
func NewWorkflowClient(c client.Client, queues TaskQueues, limits Limits) *WorkflowClient {
	return &WorkflowClient{client: c, queues: queues, payloadLimit: limits.withDefaults().PayloadLimit}
}

// initialize has the SDK load the server's capabilities once, before any
// other call this client makes. The SDK (v1.50.0) memoizes them on the first
// call and ExecuteWorkflow reads them without its lock, so the first calls
// made in parallel (the dispatcher's first batch of starts) race on them, as
// `make test-race` showed; once loaded they are never written again.
func (e *WorkflowClient) initialize(ctx context.Context) error {
	if e.initialized.Load() {
		return nil
	}
	e.initMu.Lock()
	defer e.initMu.Unlock()
	if e.initialized.Load() {
		return nil
	}
	if _, err := e.client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return classify(err)
	}
	e.initialized.Store(true)
	return nil
}

// StartWorkflow starts the execution's workflow. An existing workflow with
// the same id, running or closed, counts as started: the id is never
// reused, so no execution runs twice.
func (e *WorkflowClient) StartWorkflow(ctx context.Context, req ports.WorkflowStart) error {
	in := ExecutionInput{
		ExecutionID:  req.ExecutionID.String(),
		WorkspaceID:  req.WorkspaceID.String(),
		DefinitionID: req.DefinitionID.String(),
		Version:      req.Version,
		Input:        req.Input,
		Plan:         req.Plan,
		Graph:        req.Graph,
	}
	if err := e.initialize(ctx); err != nil {
		return err
	}
	if len(in.Input)+len(in.Graph) > e.payloadLimit {
		// Together they would pass the payload limit; the workflow loads
		// the graph itself instead.
		in.Graph = nil
	}
	_, err := e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    WorkflowID(req.ExecutionID),
		TaskQueue:             e.queues.Workflows,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// Eager start: when this process also runs a workflow worker with
		// a free slot (`sluice all`), the server returns the first workflow
		// task with the start, skipping a trip through matching; otherwise
		// the start is an ordinary one.
		EnableEagerStart: true,
	}, ExecutionWorkflowName, in)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &already) {
		return nil
	}
	return classify(err)
}

// DescribeWorkflow reports the workflow's state, WorkflowNotFound when
// Temporal has never heard of it.
func (e *WorkflowClient) DescribeWorkflow(ctx context.Context, executionID domain.ID) (ports.WorkflowState, error) {
	if err := e.initialize(ctx); err != nil {
		return "", err
	}
	resp, err := e.client.DescribeWorkflowExecution(ctx, WorkflowID(executionID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return ports.WorkflowNotFound, nil
	}
	if err != nil {
		return "", classify(err)
	}
	switch s := resp.GetWorkflowExecutionInfo().GetStatus(); s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return ports.WorkflowRunning, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return ports.WorkflowCompleted, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return ports.WorkflowFailed, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return ports.WorkflowCancelled, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return ports.WorkflowTerminated, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return ports.WorkflowTimedOut, nil
	default:
		return "", fmt.Errorf("unexpected workflow status %s", s)
	}
}

// WorkflowResult reads the ExecutionResult a completed workflow returned.
func (e *WorkflowClient) WorkflowResult(ctx context.Context, executionID domain.ID) (domain.ExecutionStatus, string, error) {
	if err := e.initialize(ctx); err != nil {
		return "", "", err
	}
	var res ExecutionResult
	if err := e.client.GetWorkflow(ctx, WorkflowID(executionID), "").Get(ctx, &res); err != nil {
		return "", "", classify(err)
	}
	if res.Status == "" {
		return "", "", fmt.Errorf("workflow %s returned no status", WorkflowID(executionID))
	}
	return res.Status, res.Error, nil
}

// CancelWorkflow asks the workflow to cancel; it records CANCELLED itself.
func (e *WorkflowClient) CancelWorkflow(ctx context.Context, executionID domain.ID) error {
	if err := e.initialize(ctx); err != nil {
		return err
	}
	err := e.client.CancelWorkflow(ctx, WorkflowID(executionID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: workflow %s", ports.ErrNotFound, WorkflowID(executionID))
	}
	return classify(err)
}

// SendEvent signals event name, with its payload, to the execution's
// workflow (EventSignalName); a workflow that is gone is ErrNotFound.
func (e *WorkflowClient) SendEvent(ctx context.Context, executionID domain.ID, name string, payload json.RawMessage) error {
	if err := e.initialize(ctx); err != nil {
		return err
	}
	err := e.client.SignalWorkflow(ctx, WorkflowID(executionID), "", EventSignalName(name), EventSignal{Payload: payload})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: workflow %s", ports.ErrNotFound, WorkflowID(executionID))
	}
	return classify(err)
}

// CheckHealth asks the frontend whether it serves.
func (e *WorkflowClient) CheckHealth(ctx context.Context) error {
	_, err := e.client.CheckHealth(ctx, &client.CheckHealthRequest{})
	return classify(err)
}
