package engine

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Temporal's own limits on one workflow run, past which the server ends
// it (terminates it, or fails its task for ever) with none of Sluice's
// code running: no completion written, no slot freed but by the
// reconciler. Sluice's limits stay below them with a margin, so that the
// run ends itself first, with a recorded error naming the limit.
const (
	// temporalHistoryEventsMax is the server's history count limit
	// (limit.historyCount.error); it warns at 10,240 events.
	temporalHistoryEventsMax = 51_200
	// temporalHistoryBytesMax is the server's history size limit
	// (limit.historySize.error); it warns at 10 MB.
	temporalHistoryBytesMax = 50 << 20
)

// DefaultHistoryEventsLimit leaves 6,200 events below Temporal's for
// what a run adds once it may start nothing more, which the budget cannot
// refuse: the nodes in flight ending (a few events each, 25 at most), the
// events a tenant signals (one per WAIT_FOR_EVENT node, 500 at most),
// records and the completion. It keeps a FOR_EACH of ENTERPRISE's 5,000
// HTTP iterations (about 7.7 events each, measured) within it. The bytes
// limit (DefaultHistoryLimit) leaves 18 MB for a workflow task (TaskLimit)
// and the results of the nodes then in flight: that covers up to 10 of
// them at the payload limit, not 25 (ENTERPRISE's nodes in flight) all
// returning 1.5 MB at the last moment.
const DefaultHistoryEventsLimit = 45_000

// historyLimitErrorType is the application error type of a step the
// history budget refused.
const historyLimitErrorType = "history_limit"

// historyRoom is the run's history budget, the one check every path that
// adds to the history makes before it adds: a node's start, a FOR_EACH
// iteration, a Retry-After round, a wait for a host's turn or a share's
// slot, an event taken from a signal, a child's start. adding is the
// payload bytes the step hands to Temporal (an activity's input: a node's
// config and the data its templates read), 0 when it carries none of the
// tenant's data; it is the one check of an input against the payload
// limit.
//
// It refuses (a non-retryable error naming the limit and its variable,
// which fails the step's node and so the run, recorded by Sluice) when the
// payload is over the blob limit (PayloadLimit, below Temporal's 2 MB),
// when the history already holds HistoryEventsLimit events, or when the
// payload would take its size past HistoryLimit. The figures are those at
// the start of the current workflow task with what the task has added so
// far as Sluice counts it (taskLoad: a node's marker or command and its
// data, a records write), so a task that runs many pure nodes (a FOR_EACH
// whose iterations all end in one task) is held to the budget as it goes;
// the limits keep a task's worth (TaskLimit) of margin below Temporal's
// for what Sluice does not count.
//
// A run that would pass the budget fails rather than continue as new: a
// run's state (outputs held for later nodes, records, slots) is not
// carried across runs, and the plans' caps (FOR_EACH items, nodes) keep a
// legitimate run within the budget.
func (r *executionRun) historyRoom(what string, adding int) error {
	info := workflow.GetInfo(r.ctx)
	r.observeTask()
	events, size := info.GetCurrentHistoryLength()+r.task.events, info.GetCurrentHistorySize()+r.task.used
	var msg string
	switch {
	case adding > r.limits.PayloadLimit:
		msg = fmt.Sprintf("the node's config and the data its templates read are %d bytes, over the payload limit of %d (SLUICE_ENGINE_PAYLOAD_LIMIT): %s is refused",
			adding, r.limits.PayloadLimit, what)
	case events >= r.limits.HistoryEventsLimit:
		msg = fmt.Sprintf("the execution's history holds %d events, at the limit of %d (SLUICE_ENGINE_HISTORY_EVENTS_LIMIT; Temporal ends a run at %d): %s is refused",
			events, r.limits.HistoryEventsLimit, temporalHistoryEventsMax, what)
	case size+adding > r.limits.HistoryLimit:
		msg = fmt.Sprintf("the execution's history is %d bytes, and %s would take it past the limit of %d (SLUICE_ENGINE_HISTORY_LIMIT; Temporal ends a run at %d)",
			size, what, r.limits.HistoryLimit, temporalHistoryBytesMax)
	default:
		return nil
	}
	return temporal.NewNonRetryableApplicationError(msg, historyLimitErrorType, nil)
}
