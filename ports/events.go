package ports

import (
	"context"
	"encoding/json"

	"github.com/sluicehq/sluice/domain"
)

// EventStore keeps the events accepted for executions' WAIT_FOR_EVENT
// nodes, one per node, so that each is signalled at most once.
type EventStore interface {
	// AcceptEvent notes event name, of bytes payload bytes, for node
	// nodeKey of a RUNNING execution whose node has no final record and no
	// event yet, and reports false when one of those does not hold. Under
	// the execution's row lock it first hands check the payload bytes of
	// the run's events accepted so far; an error from check refuses the
	// event, and is returned.
	AcceptEvent(ctx context.Context, executionID domain.ID, name, nodeKey string, bytes int, check func(taken int) error) (bool, error)
	// ForgetEvent takes back an accepted event whose signal was not sent.
	ForgetEvent(ctx context.Context, executionID domain.ID, name string) error
}

// EventSender delivers an event to a running execution's workflow.
type EventSender interface {
	SendEvent(ctx context.Context, executionID domain.ID, name string, payload json.RawMessage) error
}
