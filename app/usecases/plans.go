package usecases

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Plans are the use cases of limits as data: the admin reads and edits
// each plan's limits and sets a workspace's own; a workspace key may read
// its own workspace's limits, and nothing else here.
type Plans struct {
	plans      ports.PlanStore
	workspaces ports.WorkspaceStore
	worker     ExternalWorker
}

// ExternalWorker is what the API knows of the external-API worker, so an
// admin who gives a workspace more of it than one worker has is told
// (domain.WorkerShareWarning).
type ExternalWorker struct {
	// Slots is one worker's external-API slots
	// (SLUICE_WORKER_EXTERNAL_API_CONCURRENCY as this process reads it);
	// zero when unknown, and then nothing is said.
	Slots int
	// Log gets a line for each warned edit; nil logs nothing.
	Log *slog.Logger
	// Warned counts the warned edits; nil counts nothing.
	Warned prometheus.Counter
}

// NewExternalWorker is an ExternalWorker of slots whose warnings are
// logged to log and counted in limits_worker_share_warnings_total,
// registered with reg.
func NewExternalWorker(slots int, reg prometheus.Registerer, log *slog.Logger) ExternalWorker {
	warned := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "limits_worker_share_warnings_total",
		Help: "Plan or workspace limit edits saved with a workspaceNodesInFlight above one external-API worker's slots.",
	})
	reg.MustRegister(warned)
	return ExternalWorker{Slots: slots, Log: log, Warned: warned}
}

// NewPlans builds the plan use cases; worker may be zero, and then no
// edit is warned about.
func NewPlans(plans ports.PlanStore, workspaces ports.WorkspaceStore, worker ExternalWorker) *Plans {
	return &Plans{plans: plans, workspaces: workspaces, worker: worker}
}

// warnings are the warnings of an edit that leaves a workspace share of
// share (nil: none set), logged and counted.
func (s *Plans) warnings(share *int, what string, attrs ...any) []string {
	if share == nil {
		return nil
	}
	w := domain.WorkerShareWarning(*share, s.worker.Slots)
	if w == "" {
		return nil
	}
	if s.worker.Log != nil {
		s.worker.Log.Warn("limits edited above the external worker's slots", append([]any{"limits", what, "warning", w}, attrs...)...)
	}
	if s.worker.Warned != nil {
		s.worker.Warned.Inc()
	}
	return []string{w}
}

// ListPlans returns every plan's limits. Admin only.
func (s *Plans) ListPlans(ctx context.Context, a domain.Actor) ([]domain.PlanLimits, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	return s.plans.ListPlans(ctx)
}

// UpdatePlan sets the figures the change gives: the concurrency limit is
// used by the next claim of every dispatcher, a quota by the next request
// that spends it. A lower figure cancels and deletes nothing: it refuses
// new admissions or spending until the workspaces are under it. Every
// figure is checked before anything is written. Admin only. The
// warnings say what the plan now allows that the service cannot give
// (see ExternalWorker); the edit is saved all the same.
func (s *Plans) UpdatePlan(ctx context.Context, a domain.Actor, plan domain.Plan, change domain.PlanChange) (domain.PlanLimits, []string, error) {
	if err := requireAdmin(a); err != nil {
		return domain.PlanLimits{}, nil, err
	}
	if _, err := domain.ParsePlan(string(plan)); err != nil {
		return domain.PlanLimits{}, nil, ports.ErrNotFound
	}
	if err := checkLimits(change.MaxRunning, change.Quotas, change.RetentionDays, shareFigure{change.Floor, domain.FloorBound}, shareFigure{change.Weight, domain.WeightBound}); err != nil {
		return domain.PlanLimits{}, nil, err
	}
	if r := change.StartRate; !r.Keep && r.Rate != nil {
		if err := domain.CheckStartRate(*r.Rate, "/startRate"); err != nil {
			return domain.PlanLimits{}, nil, err
		}
	}
	p, err := s.plans.UpdatePlan(ctx, plan, change, planFloorCheck(plan, change))
	if err != nil {
		return domain.PlanLimits{}, nil, err
	}
	return p, s.warnings(&p.Quotas.WorkspaceNodesInFlight, "plan", "plan", string(p.Plan)), nil
}

// WorkspaceLimits returns a workspace's own limits. The admin, or the
// workspace's own key.
func (s *Plans) WorkspaceLimits(ctx context.Context, a domain.Actor, id domain.ID) (domain.WorkspaceLimits, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, id); err != nil {
		return domain.WorkspaceLimits{}, err
	}
	if err := requireWorkspace(a, id, "workspace"); err != nil {
		return domain.WorkspaceLimits{}, err
	}
	return s.plans.WorkspaceLimits(ctx, id)
}

// SetWorkspaceLimits replaces a workspace's own limits (nil keeps its
// plan's). Admin only: a tenant cannot raise its own limits. The warnings
// are UpdatePlan's, for the workspace's own figures.
func (s *Plans) SetWorkspaceLimits(ctx context.Context, a domain.Actor, l domain.WorkspaceLimits) (domain.WorkspaceLimits, []string, error) {
	if err := requireAdmin(a); err != nil {
		return domain.WorkspaceLimits{}, nil, err
	}
	if err := checkLimits(l.MaxRunning, l.Quotas, nil, shareFigure{l.Floor, domain.FloorBound}); err != nil {
		return domain.WorkspaceLimits{}, nil, err
	}
	if l.StartRate != nil {
		if err := domain.CheckStartRate(*l.StartRate, "/startRate"); err != nil {
			return domain.WorkspaceLimits{}, nil, err
		}
	}
	saved, err := s.plans.SetWorkspaceLimits(ctx, l, workspaceFloorCheck(l))
	if err != nil {
		return domain.WorkspaceLimits{}, nil, err
	}
	return saved, s.warnings(saved.Quotas.WorkspaceNodesInFlight, "workspace", "workspace_id", saved.WorkspaceID.String()), nil
}

// shareFigure is a pool figure an edit may set (nil: not set), with its
// bound.
type shareFigure struct {
	v     *int
	bound domain.QuotaBound
}

// checkLimits refuses, in one 422 naming every field at fault, a
// concurrency limit, quota, retention or pool figure out of its range.
func checkLimits(maxRunning *int, quotas domain.QuotaOverrides, retentionDays *int, shares ...shareFigure) error {
	var problems []domain.Problem
	retention := error(nil)
	if retentionDays != nil {
		retention = domain.CheckRetentionDays(*retentionDays, "/retentionDays")
	}
	checks := []error{checkMaxRunning(maxRunning), quotas.Check(), retention}
	for _, f := range shares {
		if f.v != nil {
			checks = append(checks, f.bound.Check(*f.v, "/"+f.bound.Name))
		}
	}
	for _, err := range checks {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			problems = append(problems, ve.Problems...)
		} else if err != nil {
			return err
		}
	}
	if len(problems) > 0 {
		return &domain.ValidationError{Problems: problems}
	}
	return nil
}

func checkMaxRunning(n *int) error {
	if n == nil {
		return nil
	}
	return domain.CheckMaxRunning(*n, "/maxRunning")
}

// Pool returns the pool every workspace shares. Admin only.
func (s *Plans) Pool(ctx context.Context, a domain.Actor) (domain.Pool, error) {
	if err := requireAdmin(a); err != nil {
		return domain.Pool{}, err
	}
	return s.plans.Pool(ctx)
}

// UpdatePool sets the pool's capacity (nil: none), used by the next claim
// of every dispatcher. A capacity below a plan's floor is refused: that
// floor could never be met. A lower capacity cancels nothing. Admin only.
func (s *Plans) UpdatePool(ctx context.Context, a domain.Actor, capacity *int) (domain.Pool, error) {
	if err := requireAdmin(a); err != nil {
		return domain.Pool{}, err
	}
	if capacity != nil {
		if err := domain.PoolCapacityBound.Check(*capacity, "/capacity"); err != nil {
			return domain.Pool{}, err
		}
	}
	return s.plans.UpdatePool(ctx, capacity, poolFloorCheck(capacity))
}

// The floor checks below are the rule of every limits edit: a floor in
// force never above the ceiling it sits under, nor above the pool's
// capacity (domain.CheckFloor). The store runs each on the limits in force
// inside the edit's transaction (ports.LimitsCheck), so two edits that
// each pass alone, such as a capacity lowered while a floor is raised,
// cannot both be written when together they break it.

// poolFloorCheck refuses a capacity below any plan's floor.
func poolFloorCheck(capacity *int) ports.LimitsCheck {
	return func(in ports.LimitsInForce) error {
		if capacity == nil {
			return nil
		}
		for _, p := range in.Plans {
			if err := domain.CheckFloor(p.Floor, p.MaxRunning, capacity, "/capacity"); err != nil {
				return err
			}
		}
		return nil
	}
}

// planFloorCheck refuses a plan edit that leaves the plan's floor above
// its ceiling or the pool's capacity, naming the field the edit set (the
// floor when it set both).
func planFloorCheck(plan domain.Plan, change domain.PlanChange) ports.LimitsCheck {
	return func(in ports.LimitsInForce) error {
		if change.Floor == nil && change.MaxRunning == nil {
			return nil
		}
		cur, err := planIn(in, plan)
		if err != nil {
			return err
		}
		floor, ceiling, field := cur.Floor, cur.MaxRunning, "/maxRunning"
		if change.MaxRunning != nil {
			ceiling = *change.MaxRunning
		}
		if change.Floor != nil {
			floor, field = *change.Floor, "/floor"
		}
		return domain.CheckFloor(floor, ceiling, in.PoolCapacity, field)
	}
}

// workspaceFloorCheck refuses a workspace's own limits whose floor in
// force is above its limit in force or the pool's capacity
// (checkWorkspaceFloor), naming the field it set (the floor when it set
// both).
func workspaceFloorCheck(l domain.WorkspaceLimits) ports.LimitsCheck {
	return func(in ports.LimitsInForce) error {
		if l.Floor == nil && l.MaxRunning == nil {
			return nil
		}
		plan, err := planIn(in, in.WorkspacePlan)
		if err != nil {
			return err
		}
		field := "/maxRunning"
		if l.Floor != nil {
			field = "/floor"
		}
		return checkWorkspaceFloor(plan, l, in.PoolCapacity, field)
	}
}

// planChangeFloorCheck refuses moving a workspace to plan when, with its
// own limits as stored, its floor in force there would be above its limit
// in force there or the pool's capacity (checkWorkspaceFloor): an own
// floor set under a larger plan's ceiling, or a plan whose floor is above
// the workspace's own ceiling. It names /plan, the field the move set.
func planChangeFloorCheck(plan domain.Plan) ports.LimitsCheck {
	return func(in ports.LimitsInForce) error {
		p, err := planIn(in, plan)
		if err != nil {
			return err
		}
		return checkWorkspaceFloor(p, in.Workspace, in.PoolCapacity, "/plan")
	}
}

// checkWorkspaceFloor is domain.CheckFloor for a workspace on plan with
// own limits: its floor in force (its own, else its plan's) against its
// limit in force (likewise) and the pool's capacity, naming field.
func checkWorkspaceFloor(plan domain.PlanLimits, own domain.WorkspaceLimits, capacity *int, field string) error {
	floor, ceiling := plan.Floor, plan.MaxRunning
	if own.Floor != nil {
		floor = *own.Floor
	}
	if own.MaxRunning != nil {
		ceiling = *own.MaxRunning
	}
	return domain.CheckFloor(floor, ceiling, capacity, field)
}

// planIn is plan's limits among those in force.
func planIn(in ports.LimitsInForce, plan domain.Plan) (domain.PlanLimits, error) {
	for _, p := range in.Plans {
		if p.Plan == plan {
			return p, nil
		}
	}
	return domain.PlanLimits{}, ports.ErrNotFound
}
