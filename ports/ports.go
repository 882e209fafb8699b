// Package ports declares what the use cases in app need from the outside
// world: storage, the workflow engine and the wake-up signal between them.
// Adapters implement these interfaces; app sees nothing else of Postgres,
// Temporal or HTTP. The records here are plain values built from domain
// types, so no generated code leaks past its adapter.
package ports

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// ErrNotFound is what every port returns for a missing row, so that app can
// map it to a 404 without knowing about pgx.ErrNoRows.
var ErrNotFound = errors.New("not found")

// ErrConflict reports a write that contradicts existing state, such as an
// Idempotency-Key reused with a different body.
var ErrConflict = errors.New("conflict")

// Page carries a keyset cursor: the caller passes After from the previous
// page's last item.
type Page struct {
	Limit int
	After *domain.ID
}

// Enqueue is what the start endpoint asks storage to write.
type Enqueue struct {
	ID           domain.ID
	WorkspaceID  domain.ID
	DefinitionID domain.ID
	Input        json.RawMessage
	Priority     int
	Actor        domain.Actor
	// IdempotencyKey is empty when the caller sent none.
	IdempotencyKey string
	// RequestHash identifies the body sent under IdempotencyKey.
	RequestHash []byte
}

// Store is the API side of storage.
type Store interface {
	Ping(ctx context.Context) error

	CreateWorkspace(ctx context.Context, w domain.Workspace) (domain.Workspace, error)
	GetWorkspace(ctx context.Context, id domain.ID) (domain.Workspace, error)
	WorkspaceStats(ctx context.Context, id domain.ID) (domain.WorkspaceStats, error)
	ListWorkspaces(ctx context.Context, page Page) ([]domain.Workspace, error)
	UpdateWorkspacePlan(ctx context.Context, id domain.ID, plan domain.Plan) (domain.Workspace, error)

	CreateAPIKey(ctx context.Context, key domain.APIKey, secretHash []byte) (domain.APIKey, error)
	ListAPIKeys(ctx context.Context, workspaceID domain.ID) ([]domain.APIKey, error)
	RevokeAPIKey(ctx context.Context, workspaceID, keyID domain.ID) error
	// APIKeyBySecretHash returns the key, revoked or not.
	APIKeyBySecretHash(ctx context.Context, hash []byte) (domain.APIKey, error)

	// CreateDefinition stores the definition and its version 1 atomically.
	CreateDefinition(ctx context.Context, d domain.Definition) (domain.Definition, error)
	GetDefinition(ctx context.Context, id domain.ID) (domain.Definition, error)
	ListDefinitions(ctx context.Context, workspaceID domain.ID, page Page) ([]domain.Definition, error)
	DeleteDefinition(ctx context.Context, id domain.ID) error
	// AddDefinitionVersion stores graph as the next version and makes it current.
	AddDefinitionVersion(ctx context.Context, definitionID domain.ID, graph domain.Graph) (domain.DefinitionVersion, error)
	GetDefinitionVersion(ctx context.Context, definitionID domain.ID, version int) (domain.DefinitionVersion, error)

	// Enqueue writes the queue item, its audit row and its idempotency
	// record in one transaction and wakes the dispatchers. With a key
	// already used for the same request hash it returns the original item
	// and replayed=true; with a different hash, ErrConflict.
	Enqueue(ctx context.Context, e Enqueue) (item domain.QueueItem, replayed bool, err error)
	GetQueueItem(ctx context.Context, id domain.ID) (domain.QueueItem, error)
	ListQueue(ctx context.Context, workspaceID domain.ID, status *domain.QueueStatus, page Page) ([]domain.QueueItem, error)
	// CancelQueued cancels an item that has not been dispatched, through the
	// domain state machine under the item's row lock.
	CancelQueued(ctx context.Context, id domain.ID) (domain.QueueItem, error)

	GetExecution(ctx context.Context, id domain.ID) (domain.Execution, []domain.NodeRecord, error)
	ListExecutions(ctx context.Context, workspaceID domain.ID, status *domain.ExecutionStatus, limit int, before *ExecutionCursor) ([]domain.Execution, error)
}

// ExecutionCursor is the keyset position of the last execution of a page.
type ExecutionCursor struct {
	StartedAt time.Time
	ID        domain.ID
}

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
}

// WorkflowEngine starts and inspects executions' workflows. Its
// implementation names the workflow execution-{executionId}, so a start is
// idempotent: StartWorkflow returns nil when that workflow already exists.
type WorkflowEngine interface {
	StartWorkflow(ctx context.Context, req WorkflowStart) error
	DescribeWorkflow(ctx context.Context, executionID domain.ID) (WorkflowState, error)
	CancelWorkflow(ctx context.Context, executionID domain.ID) error
	CheckHealth(ctx context.Context) error
}
