package queue

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// FinishExecution ends an execution through the store with the one rule
// for its queue item (AtEnd). The worker's completion, the dispatcher's
// end of an item cancelled before its workflow started, and the
// maintenance reconciler all end executions through it. errMax
// bounds the error message as a record's value is bounded: the worker's
// configured bound, or domain.DefaultRecordValueMax where the caller does
// not know it.
func FinishExecution(ctx context.Context, store ports.ExecutionStore, log *slog.Logger, id domain.ID,
	status domain.ExecutionStatus, errMsg string, errMax int, nodes ...domain.NodeRecord) (bool, error) {
	var msg *string
	if errMsg != "" {
		// The message can quote a node's error or Temporal's: storable and
		// bounded like a record's, or Postgres could refuse the write that
		// frees the slot.
		errMsg = domain.BoundedText(errMsg, errMax)
		msg = &errMsg
	}
	return store.FinishExecution(ctx, id, status, msg, AtEnd(status, errMsg, log), nodes...)
}

// AtEnd is what an execution that ended with status does to its
// queue item: a completed run deletes it, so it can never be started
// again; a failed or cancelled one records the outcome on it
// (RecordOutcome). An item that is already FAILED or CANCELLED keeps its
// own end, and one that cannot take the outcome is left as it is and
// logged: the execution's end is recorded either way. Only an item the
// run was admitted for is changed, CLAIMED or DISPATCHED: a PENDING one
// is waiting for a claim of its own, whatever ended (a release takes the
// released claim's execution id off the item, so this is a defence in
// depth), and is never deleted by a run that has no record of it.
func AtEnd(status domain.ExecutionStatus, reason string, log *slog.Logger) ports.ItemAtEndFunc {
	return func(item *domain.QueueItem) (ports.ItemAtEnd, error) {
		if item.Status.Terminal() {
			return ports.KeepItem, nil
		}
		if item.Status != domain.QueueClaimed && item.Status != domain.QueueDispatched {
			log.Warn("a run ended for a queue item it was not admitted for; leaving the item", "queue_item_id", item.ID,
				"status", item.Status, "execution_status", status)
			return ports.KeepItem, nil
		}
		if status == domain.ExecutionCompleted {
			return ports.DeleteItem, nil
		}
		if err := item.RecordOutcome(status, reason); err != nil {
			log.Warn("queue item cannot take the execution's outcome; leaving it", "queue_item_id", item.ID, "status", item.Status, "error", err)
			return ports.KeepItem, nil
		}
		return ports.WriteItem, nil
	}
}
