package ports

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// ItemToEnqueue is the queue item the enqueue use case asks storage to
// write, with what its writing needs (the actor, an idempotency key).
type ItemToEnqueue struct {
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
	// NotBefore, when set, keeps the item PENDING and unclaimed until then
	// (its available_at, on database time, never before now).
	NotBefore *time.Time
	// RetryOf and PinnedVersion make the item a retry from the failed
	// nodes of that execution, running its version (domain.QueueItem).
	RetryOf       *domain.ID
	PinnedVersion int
	// RunTimeout is the enqueue's run deadline, 0 for none.
	RunTimeout time.Duration
	// ConcurrencyKey is the item's resolved concurrency key, nil for
	// none; ConcurrencyLimit is its key's limit.
	ConcurrencyKey   *string
	ConcurrencyLimit int
	// ConcurrencyRate is its key's start rate, nil for none.
	ConcurrencyRate *domain.StartRate
}

// EnqueueBatch is what the bulk enqueue use case asks storage to write:
// items of one definition into one workspace.
type EnqueueBatch struct {
	WorkspaceID  domain.ID
	DefinitionID domain.ID
	Items        []EnqueueBatchItem
	Actor        domain.Actor
	// ConcurrencyRate is the definition's key rate, stored on every keyed
	// item; nil for none.
	ConcurrencyRate *domain.StartRate
}

// EnqueueBatchItem is one item of a bulk enqueue.
type EnqueueBatchItem struct {
	ID       domain.ID
	Input    json.RawMessage
	Priority int
	// NotBefore is as ItemToEnqueue's.
	NotBefore *time.Time
	// IdempotencyKey is empty when the item has none; keys are distinct
	// within a batch.
	IdempotencyKey string
	RequestHash    []byte
	// ConcurrencyKey and ConcurrencyLimit are as ItemToEnqueue's.
	ConcurrencyKey   *string
	ConcurrencyLimit int
}

// EnqueueResult is what a bulk enqueue did with one item.
type EnqueueResult struct {
	QueueID domain.ID
	Status  domain.QueueStatus
	// Replayed says the item's key was used before with the same request:
	// QueueID is the original item.
	Replayed bool
}

// QueueStore is the API's side of the dispatch queue.
type QueueStore interface {
	// Enqueue writes the queue item, its audit row and its idempotency
	// record in one transaction and wakes the dispatchers. With a key
	// already used for the same request hash it returns the original item
	// and replayed=true; with a different hash, ErrConflict.
	Enqueue(ctx context.Context, e ItemToEnqueue) (item domain.QueueItem, replayed bool, err error)
	// EnqueueBatch writes a bulk enqueue's items and their audit rows in
	// one statement, in one transaction with their idempotency records,
	// after checking the batch's size against the quotas under the
	// workspace's counter lock: all of it or none. A key already used for
	// the same request hash answers its original item (Replayed); with a
	// different hash the whole batch is refused with ErrConflict. Results
	// are in the order of the items.
	EnqueueBatch(ctx context.Context, b EnqueueBatch) ([]EnqueueResult, error)
	GetQueueItem(ctx context.Context, id domain.ID) (domain.QueueItem, error)
	// WaitFigures reads what the workspace's PENDING items wait on: its
	// limit and RUNNING count, and the RUNNING count of each key.
	WaitFigures(ctx context.Context, workspaceID domain.ID, keys []string) (domain.WaitFigures, error)
	// ListQueue lists a workspace's items in the order the claim takes
	// them (priority, then age, then id), from after on.
	ListQueue(ctx context.Context, workspaceID domain.ID, status *domain.QueueStatus, limit int, after *QueueCursor) ([]domain.QueueItem, error)
	// UpdateQueueItem loads the item under its row lock, rejecting a row
	// that is not a valid state, lets update apply domain transitions to
	// it, and writes the result guarded by the state it was loaded in, in
	// one transaction. An error from update writes nothing and is returned
	// as it is. The item as written is returned.
	UpdateQueueItem(ctx context.Context, id domain.ID, update func(*domain.QueueItem) error) (domain.QueueItem, error)
}

// QueueCursor is the keyset position of the last queue item of a page, in
// the claim's order.
type QueueCursor struct {
	Priority  int
	CreatedAt time.Time
	ID        domain.ID
}

// ExecutionFilter narrows a workspace's executions; a nil field does not
// filter.
type ExecutionFilter struct {
	Status       *domain.ExecutionStatus
	DefinitionID *domain.ID
	// QueueID names the item an execution was started from: at most one
	// execution matches.
	QueueID *domain.ID
	// WaitingForEvent keeps only RUNNING executions with a WAIT_FOR_EVENT
	// node waiting.
	WaitingForEvent bool
}

// IdempotencyKeyStore keeps the API's Idempotency-Keys, which Enqueue
// writes.
type IdempotencyKeyStore interface {
	// PurgeIdempotencyKeys forgets keys past their retention and returns
	// how many it forgot.
	PurgeIdempotencyKeys(ctx context.Context) (int64, error)
}

// ExecutionCursor is the keyset position of the last execution of a page.
type ExecutionCursor struct {
	AdmittedAt time.Time
	ID         domain.ID
}

// ExecutionReader shows executions and their node records: the owner
// first, so that nothing of another workspace's run is loaded, and the
// node records a page at a time, so that no read grows with the run.
type ExecutionReader interface {
	ExecutionWorkspace(ctx context.Context, id domain.ID) (domain.ID, error)
	GetExecutionWithoutNodes(ctx context.Context, id domain.ID) (domain.Execution, error)
	// ListNodes returns up to limit node records of an execution in key
	// order, after afterKey ("" for the first page).
	ListNodes(ctx context.Context, executionID domain.ID, limit int, afterKey string) ([]domain.NodeRecord, error)
	ListExecutions(ctx context.Context, workspaceID domain.ID, filter ExecutionFilter, limit int, before *ExecutionCursor) ([]domain.Execution, error)
}

// RetentionStore deletes what is past its retention period, a small batch
// at a time, for the retention job.
type RetentionStore interface {
	// DeleteExpired deletes at most limit rows of kind belonging to plan's
	// workspaces (plan "": rows of no existing workspace) whose age mark is
	// before before, and returns how many it deleted. Each call is one
	// short statement.
	DeleteExpired(ctx context.Context, kind domain.RetainedKind, plan domain.Plan, before time.Time, limit int) (int, error)
	// OldestKept returns each kind's oldest age mark still stored.
	OldestKept(ctx context.Context) (map[domain.RetainedKind]time.Time, error)
	// RetentionDays returns each plan's retention as stored now.
	RetentionDays(ctx context.Context) (map[domain.Plan]int, error)
	// DeleteAdmissionLimitsHistory deletes the admission limits (the
	// pool's, the plans', each workspace's plan and own limits) that
	// stood before the ones in force at before (those are kept, with
	// every later edit) and returns how many rows it deleted: a statement
	// per history table, which only admin edits write.
	DeleteAdmissionLimitsHistory(ctx context.Context, before time.Time) (int, error)
}
