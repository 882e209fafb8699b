package domain

import (
	"fmt"
	"time"
)

// Quotas bound what one workspace may keep in the shared service, beside
// its concurrency limit: how much work may wait in the queue, how many
// definitions it may store, and how large one graph may be. A request past
// a quota is refused whole; nothing already stored is touched.
type Quotas struct {
	// PendingItems caps a workspace's PENDING queue items, per plan.
	PendingItems map[Plan]int
	// Definitions caps a workspace's live definitions, per plan.
	Definitions map[Plan]int
	// NodesPerGraph caps the nodes of one definition version.
	NodesPerGraph int
}

// DefaultQuotas lets a FREE workspace queue 1,000 items and keep 20
// definitions, PRO 10,000 and 200, ENTERPRISE 100,000 and 2,000; a graph
// has at most 500 nodes.
func DefaultQuotas() Quotas {
	return Quotas{
		PendingItems:  map[Plan]int{PlanFree: 1_000, PlanPro: 10_000, PlanEnterprise: 100_000},
		Definitions:   map[Plan]int{PlanFree: 20, PlanPro: 200, PlanEnterprise: 2_000},
		NodesPerGraph: 500,
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

// CheckDefinitions refuses a new definition when the workspace already has
// its plan's number of live ones.
func (q Quotas) CheckDefinitions(plan Plan, live int) error {
	if limit, ok := q.Definitions[plan]; ok && live >= limit {
		return &QuotaError{Quota: "definitions", Limit: limit}
	}
	return nil
}
