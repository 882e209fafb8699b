package queue

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// DefaultPriority is the priority of an enqueue that names none.
const DefaultPriority = 2

// NewItem builds the queue item of every way in: a client's single
// or bulk enqueue, a retry, a requeue and a schedule's tick. Each way
// checks what is its own (its workspace, quotas, notBefore horizon) and
// hands in what it knows of the item; this mints the item's id, fills the
// defaults (priority 2, input {}), and resolves the definition's
// concurrency key over the input, so the claim compares stored text. An
// input that lacks what the key reads is refused (a *domain.InputError at
// /input) rather than run unkeyed. concurrency is the concurrency of the
// version the item runs, nil for none.
func NewItem(e ports.ItemToEnqueue, concurrency *domain.Concurrency) (ports.ItemToEnqueue, error) {
	e.ID = newQueueID()
	if e.Priority == 0 {
		e.Priority = DefaultPriority
	}
	if len(e.Input) == 0 {
		e.Input = json.RawMessage("{}")
	}
	e.ConcurrencyKey, e.ConcurrencyLimit, e.ConcurrencyRate = nil, 0, nil
	if concurrency != nil {
		key, err := concurrency.ResolveKey(e.Input)
		if err != nil {
			return ports.ItemToEnqueue{}, err
		}
		e.ConcurrencyKey, e.ConcurrencyLimit, e.ConcurrencyRate = &key, concurrency.Limit, concurrency.StartRate
	}
	return e, nil
}

// newQueueID mints a queue item's id: a UUIDv7, whose bytes order as the
// time it was minted, and which this process mints strictly increasing
// (github.com/google/uuid's NewV7 orders the ids of one process). The
// claim takes items by (priority, created_at, id), and every item of one
// bulk enqueue has the same created_at (its transaction's now()), so the
// id is what keeps a batch in the order sent; a later batch has a later
// created_at. A random id (v4) ran a batch in a random order.
func newQueueID() domain.ID {
	return domain.ID(uuid.Must(uuid.NewV7()))
}
