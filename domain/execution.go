package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// ExecutionStatus is the state of one run of a workflow. Admission counts
// RUNNING executions, and the queue item of an execution that ended FAILED or
// CANCELLED records that outcome (QueueItem.RecordOutcome).
type ExecutionStatus string

const (
	// ExecutionRunning means the execution was created for dispatch and has not
	// ended; it occupies one of the workspace's concurrency slots.
	ExecutionRunning ExecutionStatus = "RUNNING"
	// ExecutionCompleted means every node that should run did run.
	ExecutionCompleted ExecutionStatus = "COMPLETED"
	// ExecutionFailed means a node failed or the workflow could not run.
	ExecutionFailed ExecutionStatus = "FAILED"
	// ExecutionCancelled means the execution was stopped on request.
	ExecutionCancelled ExecutionStatus = "CANCELLED"
)

// Terminal reports whether the execution has ended. A terminal execution no
// longer counts against the workspace's capacity.
func (s ExecutionStatus) Terminal() bool {
	switch s {
	case ExecutionCompleted, ExecutionFailed, ExecutionCancelled:
		return true
	}
	return false
}

// NodeStatus is the state of one node within an execution, as persisted for
// users to inspect. Nodes that never started have no status.
type NodeStatus string

const (
	// NodeRunning means the scheduler handed the node out and it has not ended.
	NodeRunning NodeStatus = "RUNNING"
	// NodeCompleted means the node ran and produced an output.
	NodeCompleted NodeStatus = "COMPLETED"
	// NodeFailed means the node ran and failed; the execution fails with it.
	NodeFailed NodeStatus = "FAILED"
	// NodeSkipped means the node will never run because no live edge leads to
	// it (an untaken CONDITION branch, or only skipped predecessors).
	NodeSkipped NodeStatus = "SKIPPED"
	// NodeCancelled means the node was running when the execution was
	// cancelled.
	NodeCancelled NodeStatus = "CANCELLED"
)

// Terminal reports whether the node has ended, i.e. is anything but RUNNING.
func (s NodeStatus) Terminal() bool {
	switch s {
	case NodeCompleted, NodeFailed, NodeSkipped, NodeCancelled:
		return true
	}
	return false
}

// LeftRunning is how a node record still RUNNING when its execution ended
// with status (and message msg) ends: CANCELLED with a cancelled
// execution, else FAILED, its error naming the execution's end. A run
// ended from outside its workflow (Temporal terminating it at one of its
// limits, an operator, the reconciler) never got to record its nodes.
func LeftRunning(status ExecutionStatus, msg string) (NodeStatus, string) {
	node := NodeFailed
	if status == ExecutionCancelled {
		node = NodeCancelled
	}
	reason := fmt.Sprintf("the execution ended %s while the node was RUNNING", status)
	if msg != "" {
		reason += ": " + msg
	}
	return node, reason
}

// Execution is one run of a definition version. Its RUNNING row is what
// admission counts against the workspace's limit.
type Execution struct {
	// ID names the execution and, as execution-{ID}, its workflow.
	ID ID
	// QueueID is the queue item the execution was started from, which is
	// how a client that enqueued finds its run. Nil only for executions
	// written before it was recorded.
	QueueID *ID
	// WorkspaceID owns the execution.
	WorkspaceID ID
	// DefinitionID and Version name the graph the execution runs.
	DefinitionID ID
	// Version is the definition version the execution runs.
	Version int
	// Status is RUNNING until the workflow records its end.
	Status ExecutionStatus
	// Input is the JSON the caller enqueued, kept byte for byte.
	Input json.RawMessage
	// AdmittedAt is when admission wrote the execution, just before its
	// workflow was started; the API shows it as startedAt.
	AdmittedAt time.Time
	// CompletedAt is when the execution ended, nil while RUNNING.
	CompletedAt *time.Time
	// DurationMs is CompletedAt minus AdmittedAt in milliseconds.
	DurationMs *int64
	// Error says why a FAILED or CANCELLED execution ended.
	Error *string
	// RetryOf is the execution this one retries from its failed nodes,
	// set once its workflow has read the outputs it reuses.
	RetryOf *ID
}

// NodeRecord is one node run of an execution, as users see it.
type NodeRecord struct {
	// Key names the node in its graph.
	Key string
	// Type is the node's type.
	Type NodeType
	// Status is RUNNING while the node runs, then how it ended.
	Status NodeStatus
	// Attempt counts the node's tries from 1.
	Attempt int
	// Input is the node's resolved configuration.
	Input json.RawMessage
	// Output is what the node produced, nil unless COMPLETED.
	Output json.RawMessage
	// Error says why the node FAILED.
	Error *string
	// StartedAt is when the latest attempt started.
	StartedAt *time.Time
	// CompletedAt is when the node ended.
	CompletedAt *time.Time
	// ChildWorkflowID is a TEMPORAL_WORKFLOW's child's workflow id in
	// Temporal once it started; "" otherwise.
	ChildWorkflowID string
	// ChildRunID is that child's run id; "" until it started.
	ChildRunID string
}
