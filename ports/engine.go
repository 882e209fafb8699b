package ports

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// WorkflowState is what the workflow engine says about an execution's
// workflow.
type WorkflowState string

// The states the reconciler and stale recovery act on.
const (
	WorkflowNotFound   WorkflowState = "NOT_FOUND"
	WorkflowRunning    WorkflowState = "RUNNING"
	WorkflowCompleted  WorkflowState = "COMPLETED"
	WorkflowFailed     WorkflowState = "FAILED"
	WorkflowCancelled  WorkflowState = "CANCELLED"
	WorkflowTerminated WorkflowState = "TERMINATED"
	WorkflowTimedOut   WorkflowState = "TIMED_OUT"
)

// WorkflowPickup is whether a worker picked up a workflow: a RUNNING one
// whose first workflow task no worker has started, on a task queue no
// worker polls, is a start no worker will ever pick up (a missing worker,
// a task-queue prefix mismatch).
type WorkflowPickup struct {
	// TaskQueue is the queue the workflow's tasks wait on.
	TaskQueue string
	// PickedUp is set once a worker started a workflow task of it, or
	// when it is no longer RUNNING or is unknown.
	PickedUp bool
	// Polled is set when a worker polls TaskQueue, or did lately.
	Polled bool
}

// Abandoned reports a start no worker will pick up.
func (p WorkflowPickup) Abandoned() bool { return !p.PickedUp && !p.Polled }

// WorkflowStart is what the engine needs to start one execution.
type WorkflowStart struct {
	ExecutionID  domain.ID
	WorkspaceID  domain.ID
	DefinitionID domain.ID
	Version      int
	Input        json.RawMessage
	// Plan is the workspace's plan, which bounds the nodes in flight.
	Plan domain.Plan
	// Graph is the version's graph as stored; empty makes the workflow load
	// it itself.
	Graph json.RawMessage
	// RetryOf is the execution this one retries from its failed nodes;
	// nil for an ordinary run.
	RetryOf *domain.ID
	// RunTimeout is the enqueue's run deadline, 0 for none.
	RunTimeout time.Duration
}

// ErrEngineUnavailable marks an engine call that failed because the engine
// could not be reached or did not answer in time (connection refused,
// Unavailable, a deadline), as opposed to an error about the request
// itself. Such a failure says nothing about the item, so it must never
// count against it.
var ErrEngineUnavailable = errors.New("workflow engine unavailable")

// ErrEngineTimeout marks, beside ErrEngineUnavailable, an unavailable
// engine that did not answer in time (a deadline, its own or the server's),
// as opposed to one that could not be reached or refused the load.
var ErrEngineTimeout = errors.New("workflow engine did not answer in time")

// WorkflowEngine starts and inspects executions' workflows. Its
// implementation names the workflow execution-{executionId}, so a start is
// idempotent: StartWorkflow returns nil when that workflow already exists.
type WorkflowEngine interface {
	StartWorkflow(ctx context.Context, req WorkflowStart) error
	DescribeWorkflow(ctx context.Context, executionID domain.ID) (WorkflowState, error)
	// WorkflowResult reads the final status a WorkflowCompleted workflow
	// returned: a DAG that failed still ends its workflow normally, so the
	// close status alone cannot tell.
	WorkflowResult(ctx context.Context, executionID domain.ID) (status domain.ExecutionStatus, errMsg string, err error)
	CancelWorkflow(ctx context.Context, executionID domain.ID) error
	// WorkflowPickup tells whether a worker has picked up the execution's
	// workflow, and if not whether any worker polls its task queue.
	WorkflowPickup(ctx context.Context, executionID domain.ID) (WorkflowPickup, error)
	// TerminateWorkflow ends the execution's workflow at once, running
	// none of its code, with reason in its history; a closed or missing
	// workflow is not an error.
	TerminateWorkflow(ctx context.Context, executionID domain.ID, reason string) error
	EventSender
	HealthCheck
}

// RunningChild is a team workflow that a RUNNING TEMPORAL_WORKFLOW node
// started as a child of its execution's workflow, as the node's record
// names it.
type RunningChild struct {
	ExecutionID domain.ID
	NodeKey     string
	WorkflowID  string
	RunID       string
	// StartedAt is when the node's RUNNING record naming the child was
	// written, just after Temporal started the child.
	StartedAt time.Time
}

// ChildWorkflowEngine checks and ends the team workflows that runs started
// as children, for the stuck-start rule applied to them.
type ChildWorkflowEngine interface {
	// ChildPickup tells whether a worker has picked up the child, and if
	// not whether any worker polls its task queue.
	ChildPickup(ctx context.Context, child RunningChild) (WorkflowPickup, error)
	// EndAbandonedChild ends a child no worker will pick up: it tells the
	// child's run reason first, so that the run fails the node with it,
	// then terminates the child with reason in its history. A closed or
	// missing child or run is not an error.
	EndAbandonedChild(ctx context.Context, child RunningChild, reason string) error
}

// ClosedWorkflow is an execution's workflow that closed otherwise than by
// returning (terminated, timed out or failed), so that Sluice's code
// recorded nothing of its end.
type ClosedWorkflow struct {
	ExecutionID domain.ID
	// State is how it closed.
	State WorkflowState
	// Reason is what closed it as Temporal recorded it (a termination's
	// reason, such as the server's "history count exceeds limit", or a
	// failure's message); "" when it recorded none.
	Reason string
}

// ClosedWorkflowWatch lists the executions' workflows that closed
// otherwise than by returning, lately, so that their end is recorded
// promptly rather than when the reconciler reaches them.
type ClosedWorkflowWatch interface {
	// ClosedOutsideSluice lists at most limit such workflows closed since
	// since, newest first.
	ClosedOutsideSluice(ctx context.Context, since time.Time, limit int) ([]ClosedWorkflow, error)
}

// NodeSlot is one node's claim on a slot of its workspace's share of the
// external-API worker.
type NodeSlot struct {
	WorkspaceID domain.ID
	ExecutionID domain.ID
	NodeKey     string
}

// NodeSlots keep each workspace's share of the external-API worker's
// slots, across all its executions, in the database, so every worker
// process sees the same count.
type NodeSlots interface {
	// AcquireNodeSlot takes a slot for s when the workspace holds fewer
	// than share, for at most lease, and reports whether it did. Taking a
	// slot s already holds renews it.
	AcquireNodeSlot(ctx context.Context, s NodeSlot, share int, lease time.Duration) (bool, error)
	// ReleaseNodeSlot gives s's slot back; releasing one not held is a
	// no-op.
	ReleaseNodeSlot(ctx context.Context, s NodeSlot) error
}
