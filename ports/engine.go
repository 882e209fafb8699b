package ports

import (
	"context"
	"encoding/json"

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
}

// WorkflowEngine starts and inspects executions' workflows. Its
// implementation names the workflow execution-{executionId}, so a start is
// idempotent: StartWorkflow returns nil when that workflow already exists.
type WorkflowEngine interface {
	StartWorkflow(ctx context.Context, req WorkflowStart) error
	DescribeWorkflow(ctx context.Context, executionID domain.ID) (WorkflowState, error)
	CancelWorkflow(ctx context.Context, executionID domain.ID) error
	HealthCheck
}
