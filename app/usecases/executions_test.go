package usecases

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// queueFake is one queue item behind the QueueStore port; UpdateQueueItem
// applies the closure as the store does, leaving the item alone on error.
type queueFake struct {
	ports.QueueStore
	item domain.QueueItem
}

func (q *queueFake) GetQueueItem(context.Context, domain.ID) (domain.QueueItem, error) {
	return q.item, nil
}

func (q *queueFake) UpdateQueueItem(_ context.Context, _ domain.ID, update func(*domain.QueueItem) error) (domain.QueueItem, error) {
	next := q.item
	if err := update(&next); err != nil {
		return domain.QueueItem{}, err
	}
	q.item = next
	return next, nil
}

// cancelEngine records the workflows it was asked to cancel, answering
// err.
type cancelEngine struct {
	ports.WorkflowEngine
	cancelled []domain.ID
	err       error
}

func (e *cancelEngine) CancelWorkflow(_ context.Context, id domain.ID) error {
	e.cancelled = append(e.cancelled, id)
	return e.err
}

func TestCancelQueueItemWithdrawsAQueuedItem(t *testing.T) {
	t.Parallel()
	now := time.Now()
	exec := domain.ID(uuid.New())
	for _, tc := range []struct {
		name string
		from domain.QueueState
		// wantWorkflowCancelled: a CLAIMED item's dispatcher may already
		// have started its workflow.
		wantWorkflowCancelled bool
	}{
		{name: "pending", from: domain.QueueState{Status: domain.QueuePending, LastError: "waited"}},
		{name: "claimed", from: domain.QueueState{Status: domain.QueueClaimed, ClaimedAt: &now, LastError: "waited"}, wantWorkflowCancelled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := domain.ID(uuid.New())
			queue := &queueFake{item: domain.QueueItem{ID: domain.ID(uuid.New()), WorkspaceID: ws, ExecutionID: &exec, QueueState: tc.from}}
			engine := &cancelEngine{}
			s := NewExecutions(queue, nil, nil, nil, engine, domain.ProcessQuotas{})
			outcome, err := s.CancelQueueItem(context.Background(), domain.Actor{WorkspaceID: ws}, queue.item.ID)
			if err != nil {
				t.Fatal(err)
			}
			if outcome != CancelDone {
				t.Errorf("cancel = %s, want the item CANCELLED", outcome)
			}
			if queue.item.Status != domain.QueueCancelled || queue.item.LastError != "waited" {
				t.Errorf("item = %+v, want CANCELLED keeping its last error", queue.item.QueueState)
			}
			if got := len(engine.cancelled) == 1 && engine.cancelled[0] == exec; got != tc.wantWorkflowCancelled {
				t.Errorf("workflows cancelled %v, want the item's cancelled: %v", engine.cancelled, tc.wantWorkflowCancelled)
			}
		})
	}
}

func TestCancelQueueItemKeepsAClaimedItemWhenItsWorkflowCannotBeCancelled(t *testing.T) {
	t.Parallel()
	now := time.Now()
	exec := domain.ID(uuid.New())
	ws := domain.ID(uuid.New())
	for _, tc := range []struct {
		name      string
		err       error
		wantErr   bool
		wantState domain.QueueStatus
	}{
		// A dispatcher died between the start and the mark: the workflow
		// runs, and only this cancel can stop it.
		{name: "Temporal unavailable", err: errors.New("unavailable"), wantErr: true, wantState: domain.QueueClaimed},
		// Never started: the item is cancelled, and a dispatcher that
		// starts it later cancels it when it marks it.
		{name: "never started", err: ports.ErrNotFound, wantState: domain.QueueCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			queue := &queueFake{item: domain.QueueItem{ID: domain.ID(uuid.New()), WorkspaceID: ws, ExecutionID: &exec,
				QueueState: domain.QueueState{Status: domain.QueueClaimed, ClaimedAt: &now}}}
			engine := &cancelEngine{err: tc.err}
			s := NewExecutions(queue, nil, nil, nil, engine, domain.ProcessQuotas{})
			_, err := s.CancelQueueItem(context.Background(), domain.Actor{WorkspaceID: ws}, queue.item.ID)
			if (err != nil) != tc.wantErr {
				t.Errorf("cancel: %v, want an error: %v", err, tc.wantErr)
			}
			if queue.item.Status != tc.wantState || len(engine.cancelled) != 1 || engine.cancelled[0] != exec {
				t.Errorf("item %s, workflows cancelled %v; want %s after cancelling %s", queue.item.Status, engine.cancelled, tc.wantState, exec)
			}
		})
	}
}

func TestCancelQueueItemRefusesAnotherWorkspacesItem(t *testing.T) {
	t.Parallel()
	queue := &queueFake{item: domain.QueueItem{ID: domain.ID(uuid.New()), WorkspaceID: domain.ID(uuid.New()), QueueState: domain.QueueState{Status: domain.QueuePending}}}
	s := NewExecutions(queue, nil, nil, nil, &cancelEngine{}, domain.ProcessQuotas{})
	if _, err := s.CancelQueueItem(context.Background(), domain.Actor{WorkspaceID: domain.ID(uuid.New())}, queue.item.ID); !errors.Is(err, ErrForbidden) {
		t.Errorf("cancel: %v, want ErrForbidden", err)
	}
	if queue.item.Status != domain.QueuePending {
		t.Errorf("item is %s, want it untouched", queue.item.Status)
	}
}

func TestCancelQueueItemRefusesAFinishedItem(t *testing.T) {
	t.Parallel()
	ws := domain.ID(uuid.New())
	queue := &queueFake{item: domain.QueueItem{ID: domain.ID(uuid.New()), WorkspaceID: ws, QueueState: domain.QueueState{Status: domain.QueueFailed}}}
	s := NewExecutions(queue, nil, nil, nil, &cancelEngine{}, domain.ProcessQuotas{})
	if _, err := s.CancelQueueItem(context.Background(), domain.Actor{WorkspaceID: ws}, queue.item.ID); !errors.Is(err, ErrFinished) {
		t.Errorf("cancel: %v, want ErrFinished", err)
	}
}
