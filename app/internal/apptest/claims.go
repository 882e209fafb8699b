package apptest

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// DescribingEngine answers DescribeWorkflow from a map; an execution it
// lacks was never started.
type DescribingEngine struct {
	ports.WorkflowEngine
	States map[domain.ID]ports.WorkflowState
	Errs   map[domain.ID]error
}

// DescribeWorkflow answers from States and Errs (ports.WorkflowEngine).
func (e DescribingEngine) DescribeWorkflow(_ context.Context, id domain.ID) (ports.WorkflowState, error) {
	if err := e.Errs[id]; err != nil {
		return "", err
	}
	if s, ok := e.States[id]; ok {
		return s, nil
	}
	return ports.WorkflowNotFound, nil
}

// CheckHealth answers that the frontend serves (ports.WorkflowEngine): an
// unanswered describe is then about that workflow alone, which stale
// recovery goes past.
func (DescribingEngine) CheckHealth(context.Context) error { return nil }

// StaleItem is a CLAIMED item, claimed claimedAgo, with its execution id
// and one attempt: what stale recovery and the takeover settle.
func StaleItem(claimedAgo time.Duration) domain.QueueItem {
	at := time.Now().Add(-claimedAgo)
	exec := domain.ID(uuid.New())
	return domain.QueueItem{ID: domain.ID(uuid.New()), ExecutionID: &exec,
		QueueState: domain.QueueState{Status: domain.QueueClaimed, ClaimedAt: &at, AttemptCount: 1}}
}
