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

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
)

// ErrNotFound is what every port returns for a missing row, so that app can
// map it to a 404 without knowing about pgx.ErrNoRows.
var ErrNotFound = errors.New("not found")

// ErrConflict reports a write that contradicts existing state, such as an
// Idempotency-Key reused with a different body.
var ErrConflict = errors.New("conflict")

// Workspace is a tenant and the plan that sets its concurrency limit.
type Workspace struct {
	ID        uuid.UUID
	Name      string
	Plan      domain.Plan
	CreatedAt time.Time
	UpdatedAt time.Time
}

// WorkspaceStats are the live numbers shown with a workspace.
type WorkspaceStats struct {
	// Active counts RUNNING executions: the slots in use.
	Active int
	// Queued counts items PENDING or CLAIMED: waiting for a slot.
	Queued int
}

// APIKey is a workspace-scoped credential. The secret itself is never
// stored, only its hash.
type APIKey struct {
	ID          uuid.UUID
	WorkspaceID uuid.UUID
	Name        string
	Prefix      string
	CreatedAt   time.Time
	RevokedAt   *time.Time
}

// Definition is a workflow definition with its current version's graph.
type Definition struct {
	ID             uuid.UUID
	WorkspaceID    uuid.UUID
	Name           string
	CurrentVersion int
	Graph          domain.Graph
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// DefinitionVersion is one immutable graph of a definition.
type DefinitionVersion struct {
	DefinitionID uuid.UUID
	Version      int
	Graph        domain.Graph
	CreatedAt    time.Time
}

// QueueRecord is a stored queue item: its identity and payload around the
// state that the domain state machine governs.
type QueueRecord struct {
	ID           uuid.UUID
	WorkspaceID  uuid.UUID
	DefinitionID uuid.UUID
	Input        json.RawMessage
	Priority     int
	CreatedAt    time.Time
	ExecutionID  *uuid.UUID
	domain.QueueItem
}

// Execution is one run of a definition version.
type Execution struct {
	ID           uuid.UUID
	WorkspaceID  uuid.UUID
	DefinitionID uuid.UUID
	Version      int
	Status       domain.ExecutionStatus
	Input        json.RawMessage
	StartedAt    time.Time
	CompletedAt  *time.Time
	DurationMs   *int64
	Error        *string
}

// NodeRecord is one node run of an execution.
type NodeRecord struct {
	Key         string
	Type        domain.NodeType
	Status      domain.NodeStatus
	Attempt     int
	Input       json.RawMessage
	Output      json.RawMessage
	Error       *string
	StartedAt   *time.Time
	CompletedAt *time.Time
}

// Page carries a keyset cursor: the caller passes After from the previous
// page's last item.
type Page struct {
	Limit int
	After *uuid.UUID
}

// Actor names who made a request, for the audit log.
type Actor struct {
	// Admin is true for the configuration's admin token.
	Admin bool
	// WorkspaceID is the workspace a workspace key belongs to.
	WorkspaceID uuid.UUID
	// KeyID is the workspace key used, uuid.Nil for the admin.
	KeyID uuid.UUID
}

// String names the actor in audit rows.
func (a Actor) String() string {
	if a.Admin {
		return "admin"
	}
	return "api-key:" + a.KeyID.String()
}

// Enqueue is what the start endpoint asks storage to write.
type Enqueue struct {
	ID           uuid.UUID
	WorkspaceID  uuid.UUID
	DefinitionID uuid.UUID
	Input        json.RawMessage
	Priority     int
	Actor        Actor
	// IdempotencyKey is empty when the caller sent none.
	IdempotencyKey string
	// RequestHash identifies the body sent under IdempotencyKey.
	RequestHash []byte
}

// Store is the API side of storage.
type Store interface {
	Ping(ctx context.Context) error

	CreateWorkspace(ctx context.Context, w Workspace) (Workspace, error)
	GetWorkspace(ctx context.Context, id uuid.UUID) (Workspace, error)
	WorkspaceStats(ctx context.Context, id uuid.UUID) (WorkspaceStats, error)
	ListWorkspaces(ctx context.Context, page Page) ([]Workspace, error)
	UpdateWorkspacePlan(ctx context.Context, id uuid.UUID, plan domain.Plan) (Workspace, error)

	CreateAPIKey(ctx context.Context, key APIKey, secretHash []byte) (APIKey, error)
	ListAPIKeys(ctx context.Context, workspaceID uuid.UUID) ([]APIKey, error)
	RevokeAPIKey(ctx context.Context, workspaceID, keyID uuid.UUID) error
	// APIKeyBySecretHash returns the key, revoked or not.
	APIKeyBySecretHash(ctx context.Context, hash []byte) (APIKey, error)

	// CreateDefinition stores the definition and its version 1 atomically.
	CreateDefinition(ctx context.Context, d Definition) (Definition, error)
	GetDefinition(ctx context.Context, id uuid.UUID) (Definition, error)
	ListDefinitions(ctx context.Context, workspaceID uuid.UUID, page Page) ([]Definition, error)
	DeleteDefinition(ctx context.Context, id uuid.UUID) error
	// AddDefinitionVersion stores graph as the next version and makes it current.
	AddDefinitionVersion(ctx context.Context, definitionID uuid.UUID, graph domain.Graph) (DefinitionVersion, error)
	GetDefinitionVersion(ctx context.Context, definitionID uuid.UUID, version int) (DefinitionVersion, error)

	// Enqueue writes the queue item, its audit row and its idempotency
	// record in one transaction and wakes the dispatchers. With a key
	// already used for the same request hash it returns the original item
	// and replayed=true; with a different hash, ErrConflict.
	Enqueue(ctx context.Context, e Enqueue) (item QueueRecord, replayed bool, err error)
	GetQueueItem(ctx context.Context, id uuid.UUID) (QueueRecord, error)
	ListQueue(ctx context.Context, workspaceID uuid.UUID, status *domain.QueueStatus, page Page) ([]QueueRecord, error)
	// CancelQueued cancels an item that has not been dispatched, through the
	// domain state machine under the item's row lock.
	CancelQueued(ctx context.Context, id uuid.UUID) (QueueRecord, error)

	GetExecution(ctx context.Context, id uuid.UUID) (Execution, []NodeRecord, error)
	ListExecutions(ctx context.Context, workspaceID uuid.UUID, status *domain.ExecutionStatus, limit int, before *ExecutionCursor) ([]Execution, error)
}

// ExecutionCursor is the keyset position of the last execution of a page.
type ExecutionCursor struct {
	StartedAt time.Time
	ID        uuid.UUID
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
	ExecutionID  uuid.UUID
	WorkspaceID  uuid.UUID
	DefinitionID uuid.UUID
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
	DescribeWorkflow(ctx context.Context, executionID uuid.UUID) (WorkflowState, error)
	CancelWorkflow(ctx context.Context, executionID uuid.UUID) error
	CheckHealth(ctx context.Context) error
}
