package usecases

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Executions are the use cases of runs: commands enqueue and cancel them,
// queries show queue items and executions.
type Executions struct {
	queue       ports.QueueStore
	executions  ports.ExecutionReader
	definitions ports.DefinitionStore
	workspaces  ports.WorkspaceStore
	engine      ports.WorkflowEngine
	quotas      domain.ProcessQuotas
}

// NewExecutions builds the execution use cases. engine may be nil in a
// process that cannot reach Temporal; running executions then cannot be
// cancelled from it.
func NewExecutions(queue ports.QueueStore, executions ports.ExecutionReader, definitions ports.DefinitionStore,
	workspaces ports.WorkspaceStore, engine ports.WorkflowEngine, quotas domain.ProcessQuotas) *Executions {
	return &Executions{queue: queue, executions: executions, definitions: definitions, workspaces: workspaces, engine: engine, quotas: quotas}
}

// EnqueueRequest is the body of the start endpoint.
type EnqueueRequest struct {
	WorkspaceID    domain.ID
	DefinitionID   domain.ID
	Input          json.RawMessage
	Priority       int
	IdempotencyKey string
	// RunTimeout is the run's own deadline, 0 for none; at most the
	// plan's cap (PlanQuotas.RunTimeoutSeconds).
	RunTimeout time.Duration
	// retryOf and pinnedVersion make the enqueue a retry (Retry,
	// Requeue); a client's enqueue sets neither.
	retryOf       *domain.ID
	pinnedVersion int
	// NotBefore, when set, delays the item until then: at most the quotas'
	// NotBeforeHorizon ahead.
	NotBefore *time.Time
}

// Enqueue enqueues an execution. The definition must exist (404) and
// belong to the caller's workspace (403): no tenant runs another's graph.
func (s *Executions) Enqueue(ctx context.Context, a domain.Actor, req EnqueueRequest) (domain.QueueItem, bool, error) {
	if err := requireWorkspace(a, req.WorkspaceID, "workspace"); err != nil {
		return domain.QueueItem{}, false, err
	}
	owner, err := s.definitions.DefinitionWorkspace(ctx, req.DefinitionID)
	if err != nil {
		return domain.QueueItem{}, false, err
	}
	if owner != req.WorkspaceID {
		return domain.QueueItem{}, false, fmt.Errorf("%w: the workflow definition belongs to another workspace", ErrForbidden)
	}
	if req.RunTimeout > 0 {
		var quotas domain.PlanQuotas
		if quotas, err = s.workspaces.WorkspaceQuotas(ctx, req.WorkspaceID); err != nil {
			return domain.QueueItem{}, false, err
		}
		if err = quotas.PolicyCaps().CheckRunTimeout(req.RunTimeout, "/runTimeout"); err != nil {
			return domain.QueueItem{}, false, errors.Join(ErrPolicyCap, err)
		}
	}
	if req.NotBefore != nil {
		if err = s.quotas.CheckNotBefore(time.Now(), *req.NotBefore, "/notBefore"); err != nil {
			return domain.QueueItem{}, false, err
		}
	}
	// The key is that of the version the item runs.
	concurrency, err := s.definitions.DefinitionConcurrency(ctx, req.DefinitionID, req.pinnedVersion)
	if err != nil {
		return domain.QueueItem{}, false, err
	}
	e, err := queue.NewItem(ports.ItemToEnqueue{
		WorkspaceID: req.WorkspaceID, DefinitionID: req.DefinitionID,
		Input: req.Input, Priority: req.Priority, Actor: a, IdempotencyKey: req.IdempotencyKey,
		NotBefore: req.NotBefore, RetryOf: req.retryOf, PinnedVersion: req.pinnedVersion, RunTimeout: req.RunTimeout,
	}, concurrency)
	if err != nil {
		return domain.QueueItem{}, false, err
	}
	if req.IdempotencyKey != "" {
		// The hash of the content as stored: its defaults filled.
		req.Input, req.Priority = e.Input, e.Priority
		e.RequestHash = requestHash(req)
	}
	return s.queue.Enqueue(ctx, e)
}

// Retry enqueues a retry of a FAILED or CANCELLED execution from its
// failed nodes: a new item of the same definition with its input, through
// admission like any enqueue. The item pins the execution's version
// (PinnedVersion), which the claim runs however many versions were saved
// since (domain.QueueItem.RunsVersion). Its workflow reuses the outputs of
// the nodes that COMPLETED (engine: retry-from-node). Any other status is
// a conflict: a RUNNING execution has not failed yet, a COMPLETED one has
// nothing to retry.
func (s *Executions) Retry(ctx context.Context, a domain.Actor, id domain.ID) (domain.QueueItem, error) {
	if err := s.requireExecutionWorkspace(ctx, a, id); err != nil {
		return domain.QueueItem{}, err
	}
	e, err := s.executions.GetExecutionWithoutNodes(ctx, id)
	if err != nil {
		return domain.QueueItem{}, err
	}
	if e.Status != domain.ExecutionFailed && e.Status != domain.ExecutionCancelled {
		return domain.QueueItem{}, fmt.Errorf("%w: execution is %s; only a FAILED or CANCELLED one can be retried", ErrNotRetryable, e.Status)
	}
	q, _, err := s.Enqueue(ctx, a, EnqueueRequest{
		WorkspaceID: e.WorkspaceID, DefinitionID: e.DefinitionID, Input: e.Input, retryOf: &e.ID, pinnedVersion: e.Version,
	})
	return q, err
}

// Requeue enqueues a FAILED or CANCELLED queue item again: a new item of
// its definition, with its input and priority, and what it retries if it
// is a retry. It pins what the item pins and nothing more: a requeued
// retry still runs the version whose outputs it reuses, and any other item
// runs the current version, as the client's enqueue of that input would
// now. Any other status is a conflict: the item is still on its way, or
// its run completed and the item is gone.
func (s *Executions) Requeue(ctx context.Context, a domain.Actor, id domain.ID) (domain.QueueItem, error) {
	q, err := s.GetQueueItem(ctx, a, id)
	if err != nil {
		return domain.QueueItem{}, err
	}
	if q.Status != domain.QueueFailed && q.Status != domain.QueueCancelled {
		return domain.QueueItem{}, fmt.Errorf("%w: queue item is %s; only a FAILED or CANCELLED one can be requeued", ErrNotRetryable, q.Status)
	}
	next, _, err := s.Enqueue(ctx, a, EnqueueRequest{
		WorkspaceID: q.WorkspaceID, DefinitionID: q.DefinitionID, Input: q.Input, Priority: q.Priority,
		RunTimeout: q.RunTimeout, retryOf: q.RetryOf, pinnedVersion: q.PinnedVersion,
	})
	return next, err
}

// requestHash identifies an enqueue's content for Idempotency-Key checks.
// The input is compacted, not decoded: white space alone never makes a
// different body, while its values, digits included, are compared as
// stored. A notBefore is part of the content (a delayed enqueue is not the
// same request as an immediate one); without one the hash is what it
// always was, so keys stored before notBefore existed still match.
func requestHash(req EnqueueRequest) []byte {
	var input bytes.Buffer
	if err := json.Compact(&input, req.Input); err != nil {
		input.Write(req.Input)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n", req.WorkspaceID, req.DefinitionID, req.Priority)
	h.Write(input.Bytes())
	if req.RunTimeout > 0 {
		// Only when set, so the hashes of keys stored before runTimeout
		// existed still match.
		fmt.Fprintf(h, "\nrunTimeout=%d", req.RunTimeout)
	}
	if req.NotBefore != nil {
		fmt.Fprintf(h, "\nnotBefore=%d", req.NotBefore.UnixNano())
	}
	return h.Sum(nil)
}

// EnqueueBatchRequest is the body of the bulk start endpoint: items of one
// definition into one workspace.
type EnqueueBatchRequest struct {
	WorkspaceID  domain.ID
	DefinitionID domain.ID
	Items        []EnqueueBatchItem
}

// EnqueueBatchItem is one item of a bulk enqueue, as a single enqueue's
// body without its workspace and definition.
type EnqueueBatchItem struct {
	Input          json.RawMessage
	Priority       int
	IdempotencyKey string
	NotBefore      *time.Time
}

// EnqueueBatch enqueues a batch of executions of one definition in one
// statement, with the checks of a single enqueue (workspace, definition
// owner, notBefore horizon) and the batch's size against the quotas, whole:
// a batch is accepted entire or refused. Idempotency keys are per item and
// distinct within the batch.
func (s *Executions) EnqueueBatch(ctx context.Context, a domain.Actor, req EnqueueBatchRequest) ([]ports.EnqueueResult, error) {
	if err := requireWorkspace(a, req.WorkspaceID, "workspace"); err != nil {
		return nil, err
	}
	if err := s.quotas.CheckBatch(len(req.Items), "/items"); err != nil {
		return nil, err
	}
	owner, err := s.definitions.DefinitionWorkspace(ctx, req.DefinitionID)
	if err != nil {
		return nil, err
	}
	if owner != req.WorkspaceID {
		return nil, fmt.Errorf("%w: the workflow definition belongs to another workspace", ErrForbidden)
	}
	// As a single enqueue does, every item's concurrency key is resolved
	// now; one item whose input lacks it refuses the whole batch, naming
	// that item's input.
	concurrency, err := s.definitions.DefinitionConcurrency(ctx, req.DefinitionID, 0)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	keys := make(map[string]int, len(req.Items))
	b := ports.EnqueueBatch{WorkspaceID: req.WorkspaceID, DefinitionID: req.DefinitionID, Actor: a,
		Items: make([]ports.EnqueueBatchItem, len(req.Items))}
	if concurrency != nil {
		b.ConcurrencyRate = concurrency.StartRate
	}
	for i, it := range req.Items {
		if it.NotBefore != nil {
			if err := s.quotas.CheckNotBefore(now, *it.NotBefore, fmt.Sprintf("/items/%d/notBefore", i)); err != nil {
				return nil, err
			}
		}
		e, err := queue.NewItem(ports.ItemToEnqueue{WorkspaceID: req.WorkspaceID, DefinitionID: req.DefinitionID, Input: it.Input,
			Priority: it.Priority, Actor: a, IdempotencyKey: it.IdempotencyKey, NotBefore: it.NotBefore}, concurrency)
		if err != nil {
			return nil, domain.InputAt(err, fmt.Sprintf("/items/%d", i))
		}
		item := ports.EnqueueBatchItem{ID: e.ID, Input: e.Input, Priority: e.Priority, NotBefore: e.NotBefore,
			IdempotencyKey: e.IdempotencyKey, ConcurrencyKey: e.ConcurrencyKey, ConcurrencyLimit: e.ConcurrencyLimit}
		if it.IdempotencyKey != "" {
			if first, dup := keys[it.IdempotencyKey]; dup {
				return nil, &domain.FieldError{Field: fmt.Sprintf("/items/%d/idempotencyKey", i),
					Message: fmt.Sprintf("repeats the key of item %d; keys are distinct within a batch", first)}
			}
			keys[it.IdempotencyKey] = i
			// The same hash as a single enqueue of the same content, so a
			// key first used by one is replayed by the other.
			item.RequestHash = requestHash(EnqueueRequest{WorkspaceID: req.WorkspaceID, DefinitionID: req.DefinitionID,
				Input: e.Input, Priority: e.Priority, NotBefore: e.NotBefore})
		}
		b.Items[i] = item
	}
	return s.queue.EnqueueBatch(ctx, b)
}

// GetQueueItem shows a queue item.
func (s *Executions) GetQueueItem(ctx context.Context, a domain.Actor, id domain.ID) (domain.QueueItem, error) {
	q, err := s.queue.GetQueueItem(ctx, id)
	if err != nil {
		return domain.QueueItem{}, err
	}
	return q, requireWorkspace(a, q.WorkspaceID, "queue item")
}

// WaitingOn says what holds each of items back now (nil for items nothing
// holds), from figures read once per workspace of the items. The caller
// has read the items, so may see what they wait on.
func (s *Executions) WaitingOn(ctx context.Context, items []domain.QueueItem) (map[domain.ID]*domain.Waiting, error) {
	type wsKey struct {
		ws  domain.ID
		key string
	}
	keys := map[domain.ID][]string{}
	seen := map[wsKey]bool{}
	for _, q := range items {
		if q.Status != domain.QueuePending {
			continue
		}
		if _, ok := keys[q.WorkspaceID]; !ok {
			keys[q.WorkspaceID] = []string{}
		}
		if k := (wsKey{q.WorkspaceID, q.ConcurrencyKey}); k.key != "" && !seen[k] {
			seen[k] = true
			keys[q.WorkspaceID] = append(keys[q.WorkspaceID], q.ConcurrencyKey)
		}
	}
	figures := make(map[domain.ID]domain.WaitFigures, len(keys))
	for ws, ks := range keys {
		f, err := s.queue.WaitFigures(ctx, ws, ks)
		if err != nil {
			return nil, err
		}
		figures[ws] = f
	}
	now := time.Now()
	out := make(map[domain.ID]*domain.Waiting, len(items))
	for _, q := range items {
		if f, ok := figures[q.WorkspaceID]; ok {
			out[q.ID] = q.WaitingOn(f, now)
		}
	}
	return out, nil
}

// ListQueue lists a workspace's queue items in the order the dispatcher
// takes them.
func (s *Executions) ListQueue(ctx context.Context, a domain.Actor, workspaceID domain.ID, status *domain.QueueStatus, limit int, after *ports.QueueCursor) ([]domain.QueueItem, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.queue.ListQueue(ctx, workspaceID, status, limit, after)
}

// GetExecution shows an execution and the first page of its node records
// (ListNodes). Its workspace is checked before anything else is loaded.
func (s *Executions) GetExecution(ctx context.Context, a domain.Actor, id domain.ID, nodeLimit int) (domain.Execution, []domain.NodeRecord, error) {
	if err := s.requireExecutionWorkspace(ctx, a, id); err != nil {
		return domain.Execution{}, nil, err
	}
	e, err := s.executions.GetExecutionWithoutNodes(ctx, id)
	if err != nil {
		return domain.Execution{}, nil, err
	}
	nodes, err := s.executions.ListNodes(ctx, id, nodeLimit, "")
	if err != nil {
		return domain.Execution{}, nil, err
	}
	return e, nodes, nil
}

// ListNodes pages through an execution's node records in key order, after
// afterKey ("" for the first page). Its workspace is checked first.
func (s *Executions) ListNodes(ctx context.Context, a domain.Actor, id domain.ID, limit int, afterKey string) ([]domain.NodeRecord, error) {
	if err := s.requireExecutionWorkspace(ctx, a, id); err != nil {
		return nil, err
	}
	return s.executions.ListNodes(ctx, id, limit, afterKey)
}

// requireExecutionWorkspace checks that the actor may see the execution,
// from its owner alone.
func (s *Executions) requireExecutionWorkspace(ctx context.Context, a domain.Actor, id domain.ID) error {
	ws, err := s.executions.ExecutionWorkspace(ctx, id)
	if err != nil {
		return err
	}
	return requireWorkspace(a, ws, "execution")
}

// ListExecutions lists a workspace's executions, newest first. The filter
// narrows within the workspace, so a definition or queue item of another
// workspace matches nothing.
func (s *Executions) ListExecutions(ctx context.Context, a domain.Actor, workspaceID domain.ID, filter ports.ExecutionFilter, limit int, before *ports.ExecutionCursor) ([]domain.Execution, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.executions.ListExecutions(ctx, workspaceID, filter, limit, before)
}

// CancelOutcome says whether a cancel finished at once (a queued item) or
// was handed to the running workflow.
type CancelOutcome string

// The two outcomes of Cancel.
const (
	CancelDone      CancelOutcome = "CANCELLED"
	CancelRequested CancelOutcome = "CANCELLING"
)

// CancelQueueItem cancels what a queue item stands for. An item not yet
// dispatched is cancelled in place and never dispatched; a DISPATCHED
// item's execution is running, and is cancelled as CancelExecution does.
// An item that has FAILED or was CANCELLED is finished.
//
// A CLAIMED item's workflow may already have started (its dispatcher can
// die between the start and marking the item), so that workflow is
// cancelled first: if Temporal cannot be asked, the item is left as it was
// and the error returned for the caller to retry, rather than the item
// answered CANCELLED while its run goes on.
func (s *Executions) CancelQueueItem(ctx context.Context, a domain.Actor, id domain.ID) (CancelOutcome, error) {
	q, err := s.queue.GetQueueItem(ctx, id)
	if err != nil {
		return "", err
	}
	if err = requireWorkspace(a, q.WorkspaceID, "queue item"); err != nil {
		return "", err
	}
	if q.Status == domain.QueuePending || q.Status == domain.QueueClaimed {
		workflowCancelled := false
		if q.Status == domain.QueueClaimed {
			if err = s.cancelClaimedWorkflow(ctx, q); err != nil {
				return "", err
			}
			workflowCancelled = true
		}
		wasClaimed := false
		q, err = s.queue.UpdateQueueItem(ctx, id, func(q *domain.QueueItem) error {
			wasClaimed = q.Status == domain.QueueClaimed
			return q.Cancel()
		})
		if err == nil {
			if wasClaimed && !workflowCancelled {
				// Claimed between the read and the cancel. The item was
				// still CLAIMED, so its run had not been admitted: if this
				// cannot cancel the workflow, the run's admission finds
				// the item CANCELLED and ends it CANCELLED before any node
				// (ports.AdmissionCancelled), whoever sent its start.
				_ = s.cancelClaimedWorkflow(ctx, q)
			}
			return CancelDone, nil
		}
		if !errors.Is(err, domain.ErrIllegalTransition) {
			return "", err
		}
		// Dispatched meanwhile: cancel the execution instead.
		if q, err = s.queue.GetQueueItem(ctx, id); err != nil {
			return "", err
		}
	}
	if q.ExecutionID == nil || q.Status != domain.QueueDispatched {
		return "", fmt.Errorf("%w: queue item is %s", ErrFinished, q.Status)
	}
	return s.CancelExecution(ctx, a, *q.ExecutionID)
}

// CancelExecution asks a running execution's workflow to cancel; its
// completion records CANCELLED and frees the slot.
func (s *Executions) CancelExecution(ctx context.Context, a domain.Actor, id domain.ID) (CancelOutcome, error) {
	if err := s.requireExecutionWorkspace(ctx, a, id); err != nil {
		return "", err
	}
	e, err := s.executions.GetExecutionWithoutNodes(ctx, id)
	if err != nil {
		return "", err
	}
	if e.Status.Terminal() {
		return "", fmt.Errorf("%w: execution is %s", ErrFinished, e.Status)
	}
	if s.engine == nil {
		return "", errors.New("this process has no workflow engine to cancel running executions")
	}
	if err := s.engine.CancelWorkflow(ctx, e.ID); err != nil {
		return "", err
	}
	return CancelRequested, nil
}

// cancelClaimedWorkflow cancels the workflow a dispatcher may already have
// started for a CLAIMED item, so its first node does not run. A workflow
// that was never started is not an error: a dispatcher that starts it
// later finds the item CANCELLED when it marks it, and cancels it.
func (s *Executions) cancelClaimedWorkflow(ctx context.Context, q domain.QueueItem) error {
	if q.ExecutionID == nil {
		return nil
	}
	if s.engine == nil {
		return errors.New("this process has no workflow engine to cancel a claimed item's workflow")
	}
	if err := s.engine.CancelWorkflow(ctx, *q.ExecutionID); err != nil && !errors.Is(err, ports.ErrNotFound) {
		return fmt.Errorf("cancelling the workflow of claimed queue item %s: %w", q.ID, err)
	}
	return nil
}
