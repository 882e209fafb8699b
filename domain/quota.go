package domain

import (
	"fmt"
	"time"
)

// ProcessQuotas are the process-wide bounds on what one request may carry, the
// same for every plan: how large one graph may be, how far ahead an item
// may wait, how many items one bulk enqueue carries. What varies by plan
// (how much a workspace may store and queue, its policy caps) is data:
// PlanQuotas. A request past a quota is refused whole; nothing already
// stored is touched.
type ProcessQuotas struct {
	// NodesPerGraph caps the nodes of one definition version.
	NodesPerGraph int
	// NotBeforeHorizon caps how far ahead an enqueue's notBefore may be, so
	// no item is parked in the queue (counting against the pending quota)
	// longer than that.
	NotBeforeHorizon time.Duration
	// BatchItems caps the items of one bulk enqueue, so one request's cost
	// and the time its transaction holds the workspace's counter lock stay
	// bounded.
	BatchItems int
	// SubWorkflowCheck bounds the time a definition save spends walking
	// the tree of definitions its SUB_WORKFLOWs reach (CheckSubWorkflows);
	// a save whose walk takes longer is refused, naming it.
	SubWorkflowCheck time.Duration
	// EventBytesPerRun caps the payload bytes of the events one run
	// accepts, together: each event is a signal in the run's Temporal
	// history as soon as it is sent, whether or not its node has started,
	// so without it 500 WAIT_FOR_EVENT nodes of 1 MiB events would take a
	// run past Temporal's history limit before the workflow could refuse.
	EventBytesPerRun int
}

// DefaultProcessQuotas are these: a graph has at most 500 nodes, an item
// may wait at most 30 days for its notBefore, a bulk enqueue carries at most 1,000
// items, a save's sub-workflow walk takes at most 2 s, and a run's events
// carry at most 8 MiB together (a quarter of the history budget).
func DefaultProcessQuotas() ProcessQuotas {
	return ProcessQuotas{NodesPerGraph: 500, NotBeforeHorizon: 30 * 24 * time.Hour, BatchItems: 1_000, SubWorkflowCheck: 2 * time.Second,
		EventBytesPerRun: 8 << 20}
}

// CheckEventBytes refuses an event of n payload bytes when the run's
// events accepted so far, taken bytes, leave no room for it. Waiting will
// not help: a run's events are never taken back once sent.
func (q ProcessQuotas) CheckEventBytes(taken, n int) error {
	if q.EventBytesPerRun > 0 && taken+n > q.EventBytesPerRun {
		return &QuotaError{Quota: "event payload bytes in one run", Limit: q.EventBytesPerRun, Field: "/payload"}
	}
	return nil
}

// PendingRetryAfter is what a caller refused by the pending-items quota is
// told to wait: the queue drains as executions finish, so trying again
// later can succeed.
const PendingRetryAfter = 10 * time.Second

// QuotaError reports a request that would pass a quota.
type QuotaError struct {
	// Quota names the quota: "pending queue items", "definitions" or
	// "nodes per graph".
	Quota string
	// Limit is the quota's value in force for the workspace.
	Limit int
	// Field is the JSON pointer of the request field at fault, if any.
	Field string
	// RetryAfter is how long to wait before the same request may pass;
	// zero when waiting alone will not help.
	RetryAfter time.Duration
}

// Error says which quota and its limit.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("quota exceeded: at most %d %s", e.Limit, e.Quota)
}

// CheckGraph refuses a graph with more nodes than NodesPerGraph.
func (q ProcessQuotas) CheckGraph(g Graph, field string) error {
	if q.NodesPerGraph > 0 && len(g.Nodes) > q.NodesPerGraph {
		return &QuotaError{Quota: "nodes per graph", Limit: q.NodesPerGraph, Field: field + "/nodes"}
	}
	return nil
}

// StoredRetryAfter is what a caller refused by the stored-items quota is
// told to wait: items leave as their runs complete, but cancelled and
// failed ones only when retention deletes them, so a minute is a fair
// first guess.
const StoredRetryAfter = time.Minute

// CheckBatch refuses a bulk enqueue of more than BatchItems items, naming
// field (the items array).
func (q ProcessQuotas) CheckBatch(n int, field string) error {
	if q.BatchItems > 0 && n > q.BatchItems {
		return &FieldError{Field: field, Message: fmt.Sprintf("at most %d items in one request", q.BatchItems)}
	}
	return nil
}

// CheckNotBefore refuses a notBefore more than NotBeforeHorizon after now,
// naming field. A time already past is accepted: the item is due at once.
func (q ProcessQuotas) CheckNotBefore(now, notBefore time.Time, field string) error {
	if q.NotBeforeHorizon > 0 && notBefore.Sub(now) > q.NotBeforeHorizon {
		return &FieldError{Field: field, Message: fmt.Sprintf("at most %s ahead", q.NotBeforeHorizon)}
	}
	return nil
}
