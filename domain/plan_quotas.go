package domain

import (
	"fmt"
	"time"
)

// PlanQuotas are the figures a plan sets beside its concurrency limit, or
// a workspace's own where the admin set one: what the workspace may store
// and queue, the caps on its definitions' policies, and how many of its
// nodes run at once. They are data (plans and workspace_limits), edited
// through the API, and read where each is enforced, so an edit applies
// without a restart. Lowering one refuses new spending only: nothing
// stored, queued or running is touched. Durations are whole seconds, as
// the API and the database keep them.
type PlanQuotas struct {
	// PendingItems caps the workspace's PENDING queue items.
	PendingItems int
	// StoredItems caps the workspace's queue items of any status.
	StoredItems int
	// Definitions caps the workspace's definitions, live or deleted.
	Definitions int
	// DefinitionVersions caps the versions of all its definitions.
	DefinitionVersions int
	// Schedules caps its schedules, paused ones included.
	Schedules int
	// ScheduleMinIntervalSeconds is the shortest time its schedules may
	// leave between two fire times.
	ScheduleMinIntervalSeconds int
	// NodeAttempts caps a node's retry/maxAttempts.
	NodeAttempts int
	// NodeTimeoutSeconds caps a node's timeout (one attempt).
	NodeTimeoutSeconds int
	// RunTimeoutSeconds caps a run deadline: a definition's runTimeout and
	// an enqueue's.
	RunTimeoutSeconds int
	// NodesInFlight caps the nodes of one execution that run at once.
	NodesInFlight int
	// WorkspaceNodesInFlight caps the HTTP nodes of all the workspace's
	// executions that hold or wait for an external-API worker slot.
	WorkspaceNodesInFlight int
	// ForEachItems caps the elements one FOR_EACH runs over.
	ForEachItems int
	// WebhookEndpoints caps the workspace's completion webhook endpoints.
	WebhookEndpoints int
	// OutboundHosts caps the workspace's outbound host limits.
	OutboundHosts int
	// SubWorkflowNodes caps the nodes of the child runs (SUB_WORKFLOW) of
	// one execution, every level together: each child run counts its
	// graph's nodes (at least one) as it starts, so the figure bounds both
	// the child workflows one admission starts and the node records they
	// write. CheckSubWorkflows refuses at save a definition whose tree
	// always passes it; a run checks it as each child starts.
	SubWorkflowNodes int
	// StoredExecutions caps the workspace's stored executions, with its
	// PENDING items that will each become one: an execution keeps its
	// input (up to the body limit) and its node records until retention.
	StoredExecutions int
}

// QuotaOverrides are optional PlanQuotas: a workspace's own figures (nil
// keeps its plan's), or a plan edit (nil leaves the figure as it is).
type QuotaOverrides struct {
	// PendingItems replaces PlanQuotas.PendingItems when set.
	PendingItems *int
	// StoredItems replaces PlanQuotas.StoredItems when set.
	StoredItems *int
	// Definitions replaces PlanQuotas.Definitions when set.
	Definitions *int
	// DefinitionVersions replaces PlanQuotas.DefinitionVersions when set.
	DefinitionVersions *int
	// Schedules replaces PlanQuotas.Schedules when set.
	Schedules *int
	// ScheduleMinIntervalSeconds replaces PlanQuotas.ScheduleMinIntervalSeconds when set.
	ScheduleMinIntervalSeconds *int
	// NodeAttempts replaces PlanQuotas.NodeAttempts when set.
	NodeAttempts *int
	// NodeTimeoutSeconds replaces PlanQuotas.NodeTimeoutSeconds when set.
	NodeTimeoutSeconds *int
	// RunTimeoutSeconds replaces PlanQuotas.RunTimeoutSeconds when set.
	RunTimeoutSeconds *int
	// NodesInFlight replaces PlanQuotas.NodesInFlight when set.
	NodesInFlight *int
	// WorkspaceNodesInFlight replaces PlanQuotas.WorkspaceNodesInFlight when set.
	WorkspaceNodesInFlight *int
	// ForEachItems replaces PlanQuotas.ForEachItems when set.
	ForEachItems *int
	// WebhookEndpoints replaces PlanQuotas.WebhookEndpoints when set.
	WebhookEndpoints *int
	// OutboundHosts replaces PlanQuotas.OutboundHosts when set.
	OutboundHosts *int
	// SubWorkflowNodes replaces PlanQuotas.SubWorkflowNodes when set.
	SubWorkflowNodes *int
	// StoredExecutions replaces PlanQuotas.StoredExecutions when set.
	StoredExecutions *int
}

// QuotaBound is one quota's API name and the range it may be set to. The
// ranges are the migration's CHECK bounds: wide enough for any tenant,
// and they keep a typo from reading as unlimited or as zero.
type QuotaBound struct {
	// Name is the figure's JSON field.
	Name string
	// Min is the smallest value it may be set to.
	Min int
	// Max is the largest.
	Max int
}

// The bounds of the pool's figures, beside the quotas' (overrideFields)
// in the one table of plan-limit bounds: a plan's or a workspace's floor
// (0 reserves nothing; at most a limit can be), a plan's weight (a
// thousandfold between plans is more than any offer needs, and it keeps
// a typo from starving every other plan's borrowers), and the pool's
// capacity.
var (
	// FloorBound bounds a floor.
	FloorBound = QuotaBound{Name: "floor", Min: 0, Max: MaxRunningCeiling}
	// WeightBound bounds a plan's weight.
	WeightBound = QuotaBound{Name: "weight", Min: 1, Max: 1_000}
	// PoolCapacityBound bounds the pool's capacity.
	PoolCapacityBound = QuotaBound{Name: "capacity", Min: 1, Max: 10_000_000}
)

// Check refuses v outside b, as a ValidationError naming field.
func (b QuotaBound) Check(v int, field string) error {
	if v < b.Min || v > b.Max {
		e := &ValidationError{}
		e.add(field, "must be from %d to %d, got %d", b.Min, b.Max, v)
		return e
	}
	return nil
}

// overrideFields pairs each figure of o with its bound, in the API's order.
func (o *QuotaOverrides) overrideFields() []struct {
	QuotaBound
	v **int
} {
	type f = struct {
		QuotaBound
		v **int
	}
	return []f{
		{QuotaBound{Name: "pendingItems", Min: 1, Max: 10_000_000}, &o.PendingItems},
		{QuotaBound{Name: "storedItems", Min: 1, Max: 10_000_000}, &o.StoredItems},
		{QuotaBound{Name: "definitions", Min: 1, Max: 1_000_000}, &o.Definitions},
		{QuotaBound{Name: "definitionVersions", Min: 1, Max: 10_000_000}, &o.DefinitionVersions},
		{QuotaBound{Name: "schedules", Min: 1, Max: 100_000}, &o.Schedules},
		{QuotaBound{Name: "scheduleMinIntervalSeconds", Min: 1, Max: 86_400}, &o.ScheduleMinIntervalSeconds},
		{QuotaBound{Name: "nodeAttempts", Min: 1, Max: 100}, &o.NodeAttempts},
		{QuotaBound{Name: "nodeTimeoutSeconds", Min: 1, Max: 7 * 86_400}, &o.NodeTimeoutSeconds},
		{QuotaBound{Name: "runTimeoutSeconds", Min: 1, Max: 365 * 86_400}, &o.RunTimeoutSeconds},
		{QuotaBound{Name: "nodesInFlight", Min: 1, Max: 1_000}, &o.NodesInFlight},
		{QuotaBound{Name: "workspaceNodesInFlight", Min: 1, Max: 10_000}, &o.WorkspaceNodesInFlight},
		{QuotaBound{Name: "forEachItems", Min: 1, Max: 100_000}, &o.ForEachItems},
		{QuotaBound{Name: "webhookEndpoints", Min: 1, Max: 1_000}, &o.WebhookEndpoints},
		{QuotaBound{Name: "outboundHosts", Min: 1, Max: 10_000}, &o.OutboundHosts},
		{QuotaBound{Name: "subWorkflowNodes", Min: 1, Max: 1_000_000}, &o.SubWorkflowNodes},
		{QuotaBound{Name: "storedExecutions", Min: 1, Max: 100_000_000}, &o.StoredExecutions},
	}
}

// Check refuses, as one ValidationError naming each field (a JSON pointer
// at the request's top level), every figure set outside its bound.
func (o QuotaOverrides) Check() error {
	ve := &ValidationError{}
	for _, f := range o.overrideFields() {
		if v := *f.v; v != nil && (*v < f.Min || *v > f.Max) {
			ve.add("/"+f.Name, "must be from %d to %d, got %d", f.Min, f.Max, *v)
		}
	}
	if len(ve.Problems) > 0 {
		return ve
	}
	return nil
}

// PolicyCaps are the caps on node and run policies.
func (q PlanQuotas) PolicyCaps() PolicyCaps {
	return PolicyCaps{NodeAttempts: q.NodeAttempts, NodeTimeout: seconds(q.NodeTimeoutSeconds), RunTimeout: seconds(q.RunTimeoutSeconds)}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// CheckEnqueue refuses n more queue items (1 for a single enqueue, the
// batch's size for a bulk one) when they would take the workspace past its
// number of PENDING items, of stored items of any status, or of stored
// executions (executions, counting each PENDING item as the execution it
// will become). All are counted under the workspace's lock by the caller.
// A batch passes whole or not at all.
func (q PlanQuotas) CheckEnqueue(pending, stored, executions, n int) error {
	if pending+n > q.PendingItems {
		return &QuotaError{Quota: "pending queue items", Limit: q.PendingItems, RetryAfter: PendingRetryAfter}
	}
	if stored+n > q.StoredItems {
		return &QuotaError{Quota: "stored queue items", Limit: q.StoredItems, RetryAfter: StoredRetryAfter}
	}
	if executions+pending+n > q.StoredExecutions {
		return &QuotaError{Quota: "stored executions", Limit: q.StoredExecutions, RetryAfter: StoredRetryAfter}
	}
	return nil
}

// CheckDefinitions refuses a new definition when the workspace already
// stores its number of them, live or deleted.
func (q PlanQuotas) CheckDefinitions(stored int) error {
	if stored >= q.Definitions {
		return &QuotaError{Quota: "definitions", Limit: q.Definitions}
	}
	return nil
}

// CheckDefinitionVersions refuses a new definition version (a new
// definition's first included) when the workspace's definitions already
// store its number of versions.
func (q PlanQuotas) CheckDefinitionVersions(stored int) error {
	if stored >= q.DefinitionVersions {
		return &QuotaError{Quota: "definition versions", Limit: q.DefinitionVersions}
	}
	return nil
}

// CheckSchedules refuses one more schedule when the workspace already
// keeps its number of them.
func (q PlanQuotas) CheckSchedules(stored int) error {
	if stored >= q.Schedules {
		return &QuotaError{Quota: "schedules", Limit: q.Schedules}
	}
	return nil
}

// CheckScheduleInterval refuses a schedule whose shortest gap between fire
// times is below ScheduleMinIntervalSeconds, naming field.
func (q PlanQuotas) CheckScheduleInterval(shortest time.Duration, field string) error {
	if limit := seconds(q.ScheduleMinIntervalSeconds); shortest < limit {
		return &FieldError{Field: field, Message: fmt.Sprintf("fires every %s at times; the workspace's quota allows at least %s between fire times", shortest, limit)}
	}
	return nil
}

// With is q with o's figures where o sets them: a workspace's quotas in
// force, from its plan's and its own.
func (q PlanQuotas) With(o QuotaOverrides) PlanQuotas {
	targets := []*int{&q.PendingItems, &q.StoredItems, &q.Definitions, &q.DefinitionVersions, &q.Schedules,
		&q.ScheduleMinIntervalSeconds, &q.NodeAttempts, &q.NodeTimeoutSeconds, &q.RunTimeoutSeconds,
		&q.NodesInFlight, &q.WorkspaceNodesInFlight, &q.ForEachItems, &q.WebhookEndpoints, &q.OutboundHosts, &q.SubWorkflowNodes, &q.StoredExecutions}
	for i, f := range o.overrideFields() {
		if v := *f.v; v != nil {
			*targets[i] = *v
		}
	}
	return q
}
