// Package engine is Sluice's Temporal adapter: the client side that starts,
// describes and cancels execution workflows, and the worker side that runs
// them: the orchestration workflow and its activities.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
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

// Reserved are the queues as no workspace's allow-list may open them.
func (q TaskQueues) Reserved() domain.ReservedTaskQueues {
	return domain.ReservedTaskQueues{Queues: []string{q.Workflows, q.ExternalAPI}}
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
	// payloadLimit is RunLimits.PayloadLimit, the workers' bound on what one
	// payload may carry, which a start's input must keep to as well.
	payloadLimit int
	// signalledParents are the children (by workflow and run id) whose
	// parent EndAbandonedChild has signalled, so that a termination that
	// keeps failing after the signal went through adds no further event to
	// the parent's history on every walk: at most one per process.
	signalledParents *lru.Cache[string, struct{}]
	// initMu and initialized: see initialize.
	initMu      sync.Mutex
	initialized atomic.Bool
}

var _ ports.WorkflowEngine = (*WorkflowClient)(nil)

// NewWorkflowClient wraps a connected client; limits are the workers' (only the
// payload limit applies to starting a workflow).
func NewWorkflowClient(c client.Client, queues TaskQueues, limits RunLimits) *WorkflowClient {
	signalled, _ := lru.New[string, struct{}](signalledParentsKept) // errors only for a size below 1
	return &WorkflowClient{client: c, queues: queues, payloadLimit: limits.withDefaults().PayloadLimit, signalledParents: signalled}
}

// signalledParentsKept bounds the memory of signalled parents; a child
// forgotten past it may have its parent signalled once more.
const signalledParentsKept = 4096

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
		RunTimeout:   req.RunTimeout,
	}
	if req.RetryOf != nil {
		in.RetryOf = req.RetryOf.String()
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

// WorkflowPickup reads the execution's workflow's description (pickup).
func (e *WorkflowClient) WorkflowPickup(ctx context.Context, executionID domain.ID) (ports.WorkflowPickup, error) {
	if err := e.initialize(ctx); err != nil {
		return ports.WorkflowPickup{}, err
	}
	return e.pickup(ctx, WorkflowID(executionID), "")
}

var _ ports.ChildWorkflowEngine = (*WorkflowClient)(nil)

// ChildPickup reads the child's description (pickup), on the team's task
// queue.
func (e *WorkflowClient) ChildPickup(ctx context.Context, child ports.RunningChild) (ports.WorkflowPickup, error) {
	if err := e.initialize(ctx); err != nil {
		return ports.WorkflowPickup{}, err
	}
	return e.pickup(ctx, child.WorkflowID, child.RunID)
}

// EndAbandonedChild signals the workflow that started the child (the
// run's, or a SUB_WORKFLOW's inside it, as the child's description names
// its parent) with reason (abandonedChildSignalName), then terminates the
// child: Temporal does not pass a termination's reason to the parent, and
// a cancel would wait for the team's worker, which is not there. The
// signal is acknowledged before the termination is asked, so the parent
// reads the reason when it learns that its child ended; should the
// termination fail, the next walk asks it again without a second signal.
func (e *WorkflowClient) EndAbandonedChild(ctx context.Context, child ports.RunningChild, reason string) error {
	if err := e.initialize(ctx); err != nil {
		return err
	}
	var nf *serviceerror.NotFound
	d, err := e.client.DescribeWorkflowExecution(ctx, child.WorkflowID, child.RunID)
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return classify(err)
	}
	parentID, parentRun := WorkflowID(child.ExecutionID), ""
	if p := d.GetWorkflowExecutionInfo().GetParentExecution(); p != nil {
		parentID, parentRun = p.GetWorkflowId(), p.GetRunId()
	}
	signalled := child.WorkflowID + "/" + child.RunID
	if !e.signalledParents.Contains(signalled) {
		err = e.client.SignalWorkflow(ctx, parentID, parentRun, abandonedChildSignalName(child.WorkflowID), reason)
		if err != nil && !errors.As(err, &nf) {
			return classify(err)
		}
		e.signalledParents.Add(signalled, struct{}{})
	}
	if err := e.client.TerminateWorkflow(ctx, child.WorkflowID, child.RunID, reason); err != nil && !errors.As(err, &nf) {
		return classify(err)
	}
	return nil
}

// pickup reads a workflow's description: RUNNING, a history of its first
// two events (started, first workflow task scheduled) and that task still
// SCHEDULED mean no worker has picked it up; the task queue's pollers then
// tell whether one still may. Temporal lists a poller for some minutes
// after its last poll, so a worker that polled lately (one restarting)
// counts as polling.
func (e *WorkflowClient) pickup(ctx context.Context, workflowID, runID string) (ports.WorkflowPickup, error) {
	resp, err := e.client.DescribeWorkflowExecution(ctx, workflowID, runID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return ports.WorkflowPickup{PickedUp: true}, nil
	}
	if err != nil {
		return ports.WorkflowPickup{}, classify(err)
	}
	info, task := resp.GetWorkflowExecutionInfo(), resp.GetPendingWorkflowTask()
	p := ports.WorkflowPickup{TaskQueue: resp.GetExecutionConfig().GetTaskQueue().GetName()}
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetHistoryLength() > 2 ||
		task == nil || task.GetState() != enumspb.PENDING_WORKFLOW_TASK_STATE_SCHEDULED {
		p.PickedUp = true
		return p, nil
	}
	tq, err := e.client.DescribeTaskQueue(ctx, p.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return ports.WorkflowPickup{}, classify(err)
	}
	p.Polled = len(tq.GetPollers()) > 0
	return p, nil
}

// TerminateWorkflow terminates the execution's workflow.
func (e *WorkflowClient) TerminateWorkflow(ctx context.Context, executionID domain.ID, reason string) error {
	if err := e.initialize(ctx); err != nil {
		return err
	}
	err := e.client.TerminateWorkflow(ctx, WorkflowID(executionID), "", reason)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return classify(err)
}

var _ ports.ClosedWorkflowWatch = (*WorkflowClient)(nil)

// ClosedOutsideSluice asks Temporal's visibility for the workflows of
// this deployment's workflow task queue that closed since since as
// terminated, timed out or failed: a Sluice run ends by returning (its
// workflow COMPLETED, or CANCELLED for a cancel it recorded), so these are
// the runs ended around Sluice, by the server at one of its limits or by
// an operator. Each one's close event is read for its reason. Workflows
// not named execution-<id> (none of Sluice's) are left out.
func (e *WorkflowClient) ClosedOutsideSluice(ctx context.Context, since time.Time, limit int) ([]ports.ClosedWorkflow, error) {
	if err := e.initialize(ctx); err != nil {
		return nil, err
	}
	query := fmt.Sprintf(`TaskQueue = %q AND CloseTime >= %q AND (ExecutionStatus = "Terminated" OR ExecutionStatus = "TimedOut" OR ExecutionStatus = "Failed")`,
		e.queues.Workflows, since.UTC().Format(time.RFC3339Nano))
	resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: int32(limit)})
	if err != nil {
		return nil, classify(err)
	}
	var out []ports.ClosedWorkflow
	for _, info := range resp.GetExecutions() {
		if len(out) >= limit {
			break
		}
		wf := info.GetExecution()
		id, ok := strings.CutPrefix(wf.GetWorkflowId(), workflowIDPrefix)
		if !ok {
			continue
		}
		executionID, err := domain.ParseID(id)
		if err != nil {
			continue
		}
		c := ports.ClosedWorkflow{ExecutionID: executionID}
		switch info.GetStatus() {
		case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
			c.State = ports.WorkflowTerminated
		case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
			c.State = ports.WorkflowTimedOut
		default:
			c.State = ports.WorkflowFailed
		}
		c.Reason, err = e.closeReason(ctx, wf.GetWorkflowId(), wf.GetRunId())
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// closeReason reads a closed workflow's close event for the reason
// Temporal recorded: a termination's reason or a failure's message.
func (e *WorkflowClient) closeReason(ctx context.Context, workflowID, runID string) (string, error) {
	it := e.client.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", classify(err)
		}
		if a := ev.GetWorkflowExecutionTerminatedEventAttributes(); a != nil {
			return a.GetReason(), nil
		}
		if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
			return a.GetFailure().GetMessage(), nil
		}
	}
	return "", nil
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
