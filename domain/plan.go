package domain

import (
	"errors"
	"fmt"
	"time"
)

// Plan is a workspace's billing plan. It lives in the domain because the plan
// decides how many executions a workspace may run at once (see PlanLimits).
type Plan string

const (
	// PlanFree is the free plan. Its limits are seeded smallest (one
	// concurrent execution), so free workspaces cannot crowd out paying ones.
	PlanFree Plan = "FREE"
	// PlanPro is the paid plan for teams.
	PlanPro Plan = "PRO"
	// PlanEnterprise is the largest plan.
	PlanEnterprise Plan = "ENTERPRISE"
)

// ErrUnknownPlan is wrapped by every error about a plan name that is not one of
// Plans, so callers can tell bad data or configuration (errors.Is) from other
// failures.
var ErrUnknownPlan = errors.New("unknown plan")

// Plans lists every plan in ascending order of size. It returns a new slice so
// callers (configuration, API enums, tests) may keep or change it freely.
func Plans() []Plan {
	return []Plan{PlanFree, PlanPro, PlanEnterprise}
}

// planIndex maps a plan to its index in Plans.
func planIndex(p Plan) (int, bool) {
	switch p {
	case PlanFree:
		return 0, true
	case PlanPro:
		return 1, true
	case PlanEnterprise:
		return 2, true
	}
	return 0, false
}

// Valid reports whether p is one of Plans. It lets adapters check a stored
// plan without building an error.
func (p Plan) Valid() bool {
	_, ok := planIndex(p)
	return ok
}

// ParsePlan turns a stored or configured plan name into a Plan. Names are
// exact and upper-case, as stored; anything else is an error wrapping
// ErrUnknownPlan, because silently mapping an unknown plan to some limit would
// give a workspace the wrong capacity.
func ParsePlan(s string) (Plan, error) {
	p := Plan(s)
	if !p.Valid() {
		return "", fmt.Errorf("%w %q (want FREE, PRO or ENTERPRISE)", ErrUnknownPlan, s)
	}
	return p, nil
}

// MaxRunningCeiling is the largest concurrency limit a plan or a workspace
// may be given: far above any one tenant's fair share of a Temporal
// cluster, and it keeps a typo from reading as "unlimited".
const MaxRunningCeiling = 100_000

// PlanLimits are the limits a plan sets for every workspace on it that has
// none of its own. They are data, edited by the admin; every dispatcher
// reads them in its claim transaction.
type PlanLimits struct {
	// Plan is the plan they belong to.
	Plan Plan
	// MaxRunning is how many RUNNING executions a workspace may have: its
	// ceiling in the pool.
	MaxRunning int
	// Floor is how many RUNNING executions each workspace on the plan is
	// guaranteed in the pool (see Pool).
	Floor int
	// Weight is how the plan's workspaces share borrowed capacity with
	// other borrowers (see Pool).
	Weight int
	// Quotas are the plan's other figures.
	Quotas PlanQuotas
	// RetentionDays is how long its workspaces' history is kept; a plan
	// figure only, as retention deletes plan by plan.
	RetentionDays int
	// UpdatedAt is when the admin last changed them.
	UpdatedAt time.Time
	// StartRate limits how often a workspace on the plan starts
	// executions; nil is no rate.
	StartRate *StartRate
}

// PlanChange is an edit of a plan's limits: a nil figure is left as it
// is.
type PlanChange struct {
	// MaxRunning replaces the plan's when set.
	MaxRunning *int
	// Floor replaces the plan's when set.
	Floor *int
	// Weight replaces the plan's when set.
	Weight *int
	// Quotas are the other figures to replace.
	Quotas QuotaOverrides
	// RetentionDays replaces the plan's when set.
	RetentionDays *int
	// StartRate is what the change does to the plan's start rate.
	StartRate StartRateEdit
}

// StartRateEdit is what an edit does to a start rate.
type StartRateEdit struct {
	// Keep leaves the stored rate as it is.
	Keep bool
	// Rate replaces the stored rate unless Keep is set; nil removes it.
	Rate *StartRate
}

// WorkspaceLimits are one workspace's own limits, over its plan's. A nil
// field keeps the plan's value.
type WorkspaceLimits struct {
	// WorkspaceID is the workspace they belong to.
	WorkspaceID ID
	// MaxRunning replaces the plan's MaxRunning when set.
	MaxRunning *int
	// Floor replaces the plan's Floor when set.
	Floor *int
	// Quotas replace the plan's quotas where set.
	Quotas QuotaOverrides
	// UpdatedAt is when the admin last changed them; zero when never set.
	UpdatedAt time.Time
	// StartRate replaces the plan's StartRate when set.
	StartRate *StartRate
}

// CheckMaxRunning refuses a concurrency limit outside 1 to
// MaxRunningCeiling, naming field: a limit of 0 would queue a workspace's
// executions forever.
func CheckMaxRunning(n int, field string) error {
	if n < 1 || n > MaxRunningCeiling {
		e := &ValidationError{}
		e.add(field, "must be from 1 to %d, got %d", MaxRunningCeiling, n)
		return e
	}
	return nil
}

// FreeSlots is the admission rule: how many more executions a workspace
// with active RUNNING executions may start under limit. Lowering a limit
// below active leaves no slot and cancels nothing: the workspace admits
// again once enough of its runs end. A retry needs no exception: its
// earlier attempt's execution row is dropped when the attempt is released,
// so it never counts against the retry.
func FreeSlots(limit, active int) int {
	return max(0, limit-active)
}
