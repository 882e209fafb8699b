// Package worker holds the worker's use cases, which the engine's Temporal
// activities call: Runs (what a run records, its node slots and outbound
// turns, its sub-workflows and TEMPORAL_WORKFLOW allow-list check, and what
// its end does to its queue item, through queue.FinishExecution) and
// QuotaSnapshot (the quotas a workflow reads from memory). It is apart from
// the API's use cases and the dispatcher because only the worker role runs
// it: a reader of the engine adapter opens this package alone.
package worker
