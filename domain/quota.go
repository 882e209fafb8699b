package domain

import (
	"fmt"
	"time"
)

// Quotas bound what one workspace may keep in the shared service, beside
// its concurrency limit: how much work may wait in the queue, how many
// queue items, definitions and definition versions it may store, and how
// large one graph may be. What is stored counts until it is gone: a
// cancelled or failed item, a superseded version and a deleted definition
// count until retention deletes them, so no loop of create and delete
// walks around a quota. A request past a quota is refused whole; nothing
// already stored is touched.
type Quotas struct {
	// PendingItems caps a workspace's PENDING queue items, per plan.
	PendingItems map[Plan]int
	// StoredItems caps a workspace's queue items of any status, per plan.
	StoredItems map[Plan]int
	// Definitions caps a workspace's definitions, live or deleted, per plan.
	Definitions map[Plan]int
	// DefinitionVersions caps the versions of all a workspace's
	// definitions together, per plan.
	DefinitionVersions map[Plan]int
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
	// Schedules caps a workspace's schedules, paused ones included, per
	// plan.
	Schedules map[Plan]int
	// ScheduleMinInterval is the shortest time a plan's schedules may leave
	// between two fire times.
	ScheduleMinInterval map[Plan]time.Duration
}

// DefaultQuotas lets a FREE workspace queue 1,000 items, store 2,000, and
// keep 20 definitions with 200 versions; PRO ten times as many and
// ENTERPRISE a hundred times. A graph has at most 500 nodes. An item may
// wait at most 30 days for its notBefore, and a bulk enqueue carries at
// most 1,000 items. A FREE workspace keeps 5 schedules firing at most once
// a minute, PRO 50 at most every 10 seconds, ENTERPRISE 500 at most every
// second.
func DefaultQuotas() Quotas {
	return Quotas{
		PendingItems:       map[Plan]int{PlanFree: 1_000, PlanPro: 10_000, PlanEnterprise: 100_000},
		StoredItems:        map[Plan]int{PlanFree: 2_000, PlanPro: 20_000, PlanEnterprise: 200_000},
		Definitions:        map[Plan]int{PlanFree: 20, PlanPro: 200, PlanEnterprise: 2_000},
		DefinitionVersions: map[Plan]int{PlanFree: 200, PlanPro: 2_000, PlanEnterprise: 20_000},
		NodesPerGraph:      500,

		NotBeforeHorizon:    30 * 24 * time.Hour,
		BatchItems:          1_000,
		Schedules:           map[Plan]int{PlanFree: 5, PlanPro: 50, PlanEnterprise: 500},
		ScheduleMinInterval: map[Plan]time.Duration{PlanFree: time.Minute, PlanPro: 10 * time.Second, PlanEnterprise: time.Second},
	}
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
	// Limit is the quota's value for the workspace's plan.
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
func (q Quotas) CheckGraph(g Graph, field string) error {
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

// CheckEnqueue refuses n more queue items (1 for a single enqueue, the
// batch's size for a bulk one) when they would take the workspace past its
// plan's number of PENDING items, or of stored items of any status. Both
// are counted under the workspace's lock by the caller. A batch passes
// whole or not at all.
func (q Quotas) CheckEnqueue(plan Plan, pending, stored, n int) error {
	if limit, ok := q.PendingItems[plan]; ok && pending+n > limit {
		return &QuotaError{Quota: "pending queue items", Limit: limit, RetryAfter: PendingRetryAfter}
	}
	if limit, ok := q.StoredItems[plan]; ok && stored+n > limit {
		return &QuotaError{Quota: "stored queue items", Limit: limit, RetryAfter: StoredRetryAfter}
	}
	return nil
}

// CheckDefinitions refuses a new definition when the workspace already
// stores its plan's number of them, live or deleted.
func (q Quotas) CheckDefinitions(plan Plan, stored int) error {
	if limit, ok := q.Definitions[plan]; ok && stored >= limit {
		return &QuotaError{Quota: "definitions", Limit: limit}
	}
	return nil
}

// CheckDefinitionVersions refuses a new definition version (a new
// definition's first included) when the workspace's definitions already
// store its plan's number of versions.
func (q Quotas) CheckDefinitionVersions(plan Plan, stored int) error {
	if limit, ok := q.DefinitionVersions[plan]; ok && stored >= limit {
		return &QuotaError{Quota: "definition versions", Limit: limit}
	}
	return nil
}

// CheckBatch refuses a bulk enqueue of more than BatchItems items, naming
// field (the items array).
func (q Quotas) CheckBatch(n int, field string) error {
	if q.BatchItems > 0 && n > q.BatchItems {
		return &FieldError{Field: field, Message: fmt.Sprintf("at most %d items in one request", q.BatchItems)}
	}
	return nil
}

// CheckNotBefore refuses a notBefore more than NotBeforeHorizon after now,
// naming field. A time already past is accepted: the item is due at once.
func (q Quotas) CheckNotBefore(now, notBefore time.Time, field string) error {
	if q.NotBeforeHorizon > 0 && notBefore.Sub(now) > q.NotBeforeHorizon {
		return &FieldError{Field: field, Message: fmt.Sprintf("at most %s ahead", q.NotBeforeHorizon)}
	}
	return nil
}

// CheckSchedules refuses one more schedule when the workspace already keeps
// its plan's number of them.
func (q Quotas) CheckSchedules(plan Plan, stored int) error {
	if limit, ok := q.Schedules[plan]; ok && stored >= limit {
		return &QuotaError{Quota: "schedules", Limit: limit}
	}
	return nil
}

// CheckScheduleInterval refuses a schedule whose shortest gap between fire
// times is below its plan's ScheduleMinInterval, naming field.
func (q Quotas) CheckScheduleInterval(plan Plan, shortest time.Duration, field string) error {
	if limit, ok := q.ScheduleMinInterval[plan]; ok && shortest < limit {
		return &FieldError{Field: field, Message: fmt.Sprintf("fires every %s at times; the %s plan allows at least %s between fire times", shortest, plan, limit)}
	}
	return nil
}
