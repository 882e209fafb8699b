package usecases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// ErrNotWaiting means no node of the execution waits for the event: none
// waits for that name, it has ended, or its event was already sent.
var ErrNotWaiting = errors.New("no node waits for this event")

// Events are the use case of sending events to running executions'
// WAIT_FOR_EVENT nodes.
type Events struct {
	executions  ports.ExecutionReader
	definitions ports.DefinitionStore
	events      ports.EventStore
	sender      ports.EventSender
	quotas      domain.ProcessQuotas
}

// NewEvents builds the event use case. sender may be nil in a process that
// cannot reach Temporal; events then cannot be sent from it.
func NewEvents(executions ports.ExecutionReader, definitions ports.DefinitionStore, events ports.EventStore, sender ports.EventSender, quotas domain.ProcessQuotas) *Events {
	return &Events{executions: executions, definitions: definitions, events: events, sender: sender, quotas: quotas}
}

// Send delivers event name, with its payload, to the execution's
// WAIT_FOR_EVENT node of that name. The execution must be the caller's
// (403/404) and RUNNING, and the node must not have ended nor have had its
// event already (409, ErrNotWaiting or ErrFinished): each node takes one
// event, which bounds what a tenant can add to a run's history. A node
// that has not started yet keeps the event until it does, for as long as
// the run lives. The run's events together carry at most
// ProcessQuotas.EventBytesPerRun payload bytes (a QuotaError past it). The event
// is noted before it is signalled, and taken back if the signal fails, so
// that it can be sent again.
func (s *Events) Send(ctx context.Context, a domain.Actor, id domain.ID, name string, payload json.RawMessage) (string, error) {
	ws, err := s.executions.ExecutionWorkspace(ctx, id)
	if err != nil {
		return "", err
	}
	if err = requireWorkspace(a, ws, "execution"); err != nil {
		return "", err
	}
	e, err := s.executions.GetExecutionWithoutNodes(ctx, id)
	if err != nil {
		return "", err
	}
	if e.Status.Terminal() {
		return "", fmt.Errorf("%w: execution is %s", ErrFinished, e.Status)
	}
	v, err := s.definitions.GetDefinitionVersion(ctx, e.DefinitionID, e.Version)
	if err != nil {
		return "", err
	}
	key, ok := v.Graph.WaitsForEvent(name)
	if !ok {
		return "", fmt.Errorf("%w: the execution's graph has no WAIT_FOR_EVENT node for event %q", ErrNotWaiting, name)
	}
	if s.sender == nil {
		return "", errors.New("this process has no workflow engine to send events")
	}
	accepted, err := s.events.AcceptEvent(ctx, id, name, key, len(payload), func(taken int) error {
		return s.quotas.CheckEventBytes(taken, len(payload))
	})
	if err != nil {
		return "", err
	}
	if !accepted {
		return "", fmt.Errorf("%w: node %q no longer waits for event %q, or the event was already sent to it", ErrNotWaiting, key, name)
	}
	if err = s.sender.SendEvent(ctx, id, name, payload); err != nil {
		if ferr := s.events.ForgetEvent(context.WithoutCancel(ctx), id, name); ferr != nil {
			return "", errors.Join(err, ferr)
		}
		return "", err
	}
	return key, nil
}
