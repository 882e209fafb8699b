package domain

import (
	"fmt"
	"time"
)

// RetainedKind is a kind of row that retention deletes once its period
// has passed. The values are the metrics' kind label, so they are few and
// fixed.
type RetainedKind string

const (
	// RetainedExecutions are finished executions, aged from completion;
	// their node records go with them.
	RetainedExecutions RetainedKind = "executions"
	// RetainedQueueItems are FAILED and CANCELLED queue items, aged from
	// their enqueue. (A COMPLETED run's item is deleted at completion.)
	RetainedQueueItems RetainedKind = "queue_items"
	// RetainedActivity are activity (audit) rows, aged from their writing.
	RetainedActivity RetainedKind = "activity"
	// RetainedDefinitionVersions are versions that are not their
	// definition's current one and that no stored execution uses, aged
	// from when a newer version replaced them.
	RetainedDefinitionVersions RetainedKind = "definition_versions"
	// RetainedDeletedDefinitions are deleted definitions that no stored
	// execution uses, with their versions, aged from their deletion.
	RetainedDeletedDefinitions RetainedKind = "deleted_definitions"
)

// RetainedKinds lists every kind in the order retention deletes them:
// executions first, since versions and definitions that executions still
// use are kept.
func RetainedKinds() []RetainedKind {
	return []RetainedKind{RetainedExecutions, RetainedQueueItems, RetainedActivity,
		RetainedDefinitionVersions, RetainedDeletedDefinitions}
}

// RetentionPolicy is how long each plan's workspaces keep what retention
// deletes. Rows of no workspace (activity of admin actions, queue items of
// a deleted workspace) keep the longest period of any plan.
type RetentionPolicy struct {
	periods map[Plan]time.Duration
}

// DefaultRetentionDays keeps a FREE workspace's history 7 days, PRO 30 and
// ENTERPRISE 90, as migration 00017 seeds the plans' retention_days; a
// plan the policy is not given keeps its default.
func DefaultRetentionDays() map[Plan]int {
	return map[Plan]int{PlanFree: 7, PlanPro: 30, PlanEnterprise: 90}
}

// MaxRetentionDays bounds a plan's retention: ten years, far past any
// plan's need, and it keeps a typo from reading as forever.
const MaxRetentionDays = 3650

// CheckRetentionDays refuses a retention outside 1 to MaxRetentionDays,
// naming field.
func CheckRetentionDays(n int, field string) error {
	if n < 1 || n > MaxRetentionDays {
		e := &ValidationError{}
		e.add(field, "must be from 1 to %d, got %d", MaxRetentionDays, n)
		return e
	}
	return nil
}

// NewRetentionPolicy builds the policy from days per plan, over the
// defaults. Every period is at least a day.
func NewRetentionPolicy(days map[Plan]int) (RetentionPolicy, error) {
	p := RetentionPolicy{periods: map[Plan]time.Duration{}}
	for plan, d := range DefaultRetentionDays() {
		p.periods[plan] = time.Duration(d) * 24 * time.Hour
	}
	for plan, d := range days {
		if !plan.Valid() {
			return RetentionPolicy{}, fmt.Errorf("retention: %w %q", ErrUnknownPlan, plan)
		}
		if d < 1 {
			return RetentionPolicy{}, fmt.Errorf("retention: plan %s: %d days must be at least 1", plan, d)
		}
		p.periods[plan] = time.Duration(d) * 24 * time.Hour
	}
	return p, nil
}

// Period is how long plan's rows are kept; for the empty plan (rows of no
// workspace), the longest period of any plan.
func (p RetentionPolicy) Period(plan Plan) time.Duration {
	if plan == "" {
		var longest time.Duration
		for _, d := range p.periods {
			longest = max(longest, d)
		}
		return longest
	}
	return p.periods[plan]
}

// Cutoff is the time before which plan's rows are past their period at now.
func (p RetentionPolicy) Cutoff(plan Plan, now time.Time) time.Time {
	return now.Add(-p.Period(plan))
}
