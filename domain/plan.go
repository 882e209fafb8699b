package domain

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Plan is a workspace's billing plan. It lives in the domain because the plan
// decides how many executions a workspace may run at once (see TierPolicy).
type Plan string

const (
	// PlanFree is the free plan. It allows one concurrent execution by default,
	// so free workspaces cannot crowd out paying ones.
	PlanFree Plan = "FREE"
	// PlanPro is the paid plan for teams; five concurrent executions by default.
	PlanPro Plan = "PRO"
	// PlanEnterprise is the largest plan; twenty concurrent executions by default.
	PlanEnterprise Plan = "ENTERPRISE"
)

// defaultLimits holds the default concurrency per plan, in the order of Plans.
var defaultLimits = [...]int{1, 5, 20}

// ErrUnknownPlan is wrapped by every error about a plan name that is not one of
// Plans, so callers can tell bad data or configuration (errors.Is) from other
// failures.
var ErrUnknownPlan = errors.New("unknown plan")

// Plans lists every plan in ascending order of size. It returns a new slice so
// callers (configuration, API enums, tests) may keep or change it freely.
func Plans() []Plan {
	return []Plan{PlanFree, PlanPro, PlanEnterprise}
}

// planIndex maps a plan to its index in Plans and defaultLimits.
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

// TierPolicy maps each plan to its concurrency limit: the number of RUNNING
// executions a workspace on that plan may have. It is a small immutable value,
// safe to copy and share; the zero value is the default policy.
type TierPolicy struct {
	// limits is indexed like Plans; 0 means "use the default", which makes the
	// zero value usable.
	limits [len(defaultLimits)]int
}

// DefaultTierPolicy returns the limits the product is sold with: FREE 1,
// PRO 5, ENTERPRISE 20.
func DefaultTierPolicy() TierPolicy {
	return TierPolicy{limits: defaultLimits}
}

// NewTierPolicy returns the default policy with the given limits overriding
// the defaults, so operators can change one plan's limit by configuration
// without restating the others. Every limit must be at least 1 (a limit of 0
// would queue a workspace's executions forever) and every plan must be known.
// All bad entries are reported together.
func NewTierPolicy(limits map[Plan]int) (TierPolicy, error) {
	p := DefaultTierPolicy()
	plans := make([]Plan, 0, len(limits))
	for plan := range limits {
		plans = append(plans, plan)
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i] < plans[j] })
	var errs []error
	for _, plan := range plans {
		i, ok := planIndex(plan)
		if !ok {
			errs = append(errs, fmt.Errorf("tier policy: %w %q", ErrUnknownPlan, plan))
			continue
		}
		if n := limits[plan]; n < 1 {
			errs = append(errs, fmt.Errorf("tier policy: plan %s: limit %d must be at least 1", plan, n))
			continue
		}
		p.limits[i] = limits[plan]
	}
	if err := errors.Join(errs...); err != nil {
		return TierPolicy{}, err
	}
	return p, nil
}

// ParsePerPlan parses a per-plan setting from configuration (tier limits,
// quotas, nodes in flight), written as "FREE=1,PRO=5,ENTERPRISE=20". Every
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

// Limit returns the concurrency limit of plan. An unknown plan is an error
// wrapping ErrUnknownPlan rather than some fallback limit, so bad data is
// noticed instead of quietly granting or denying capacity.
func (p TierPolicy) Limit(plan Plan) (int, error) {
	i, ok := planIndex(plan)
	if !ok {
		return 0, fmt.Errorf("tier policy: %w %q", ErrUnknownPlan, plan)
	}
	if n := p.limits[i]; n > 0 {
		return n, nil
	}
	return defaultLimits[i], nil
}

// Limits returns every plan's effective limit, for logging the configuration
// a process runs with.
func (p TierPolicy) Limits() map[Plan]int {
	out := make(map[Plan]int, len(defaultLimits))
	for _, plan := range Plans() {
		out[plan], _ = p.Limit(plan)
	}
	return out
}

// Admission is the outcome of TierPolicy.Admit. It carries the numbers the
// decision was made from, so the caller can log "at capacity (5/5)" without
// recomputing them.
type Admission struct {
	// Admitted is true when the workspace may start one more execution now.
	Admitted bool
	// Limit is the plan's concurrency limit.
	Limit int
	// Active is the RUNNING count the decision saw, as passed to Admit.
	Active int
}

// Admit decides whether a workspace on plan with active RUNNING executions
// may start one more. This is the only place the capacity rule lives, so
// the dispatcher and any API preview agree. A retry needs no exception: its
// earlier attempt's execution row is dropped when the attempt is released,
// so it never counts against the retry. A negative active is an
// inconsistent count and an error.
func (p TierPolicy) Admit(plan Plan, active int) (Admission, error) {
	limit, err := p.Limit(plan)
	if err != nil {
		return Admission{}, err
	}
	if active < 0 {
		return Admission{}, fmt.Errorf("admit: active count %d is negative", active)
	}
	return Admission{Admitted: active < limit, Limit: limit, Active: active}, nil
}
