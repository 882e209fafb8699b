package domain

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// ParsePerPlan parses a per-plan setting from configuration (quotas, nodes
// in flight, retention), written as "FREE=1,PRO=5,ENTERPRISE=20". Every
// value must be a positive integer. Any subset of plans may be given, and
// spaces around parts are ignored; an empty string means no overrides. Each
// error names the part that is wrong, because a typo in an environment
// variable is otherwise hard to find.
func ParsePerPlan(s string) (map[Plan]int, error) {
	out := map[Plan]int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	var errs []error
	for i, raw := range strings.Split(s, ",") {
		part := strings.TrimSpace(raw)
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("part %d %q: %s", i+1, part, fmt.Sprintf(format, args...)))
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			bad("want PLAN=N")
			continue
		}
		plan, err := ParsePlan(strings.TrimSpace(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("part %d %q: %w", i+1, part, err))
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil {
			bad("value %q is not an integer", strings.TrimSpace(value))
			continue
		}
		if n < 1 {
			bad("value %d must be at least 1", n)
			continue
		}
		if _, dup := out[plan]; dup {
			bad("plan %s is given more than once", plan)
			continue
		}
		out[plan] = n
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
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
	// MaxRunning is how many RUNNING executions a workspace may have.
	MaxRunning int
	// Quotas are the plan's other figures.
	Quotas PlanQuotas
	// UpdatedAt is when the admin last changed them.
	UpdatedAt time.Time
}

// PlanChange is an edit of a plan's limits: a nil figure is left as it
// is.
type PlanChange struct {
	// MaxRunning replaces the plan's when set.
	MaxRunning *int
	// Quotas are the other figures to replace.
	Quotas QuotaOverrides
}

// WorkspaceLimits are one workspace's own limits, over its plan's. A nil
// field keeps the plan's value.
type WorkspaceLimits struct {
	// WorkspaceID is the workspace they belong to.
	WorkspaceID ID
	// MaxRunning replaces the plan's MaxRunning when set.
	MaxRunning *int
	// Quotas replace the plan's quotas where set.
	Quotas QuotaOverrides
	// UpdatedAt is when the admin last changed them; zero when never set.
	UpdatedAt time.Time
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
