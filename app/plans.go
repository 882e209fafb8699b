package app

import (
	"context"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Plans are the use cases of limits as data: the admin reads and edits
// each plan's limits and sets a workspace's own; a workspace key may read
// its own workspace's limits, and nothing else here.
type Plans struct {
	plans      ports.PlanStore
	workspaces ports.WorkspaceStore
}

// NewPlans builds the plan use cases.
func NewPlans(plans ports.PlanStore, workspaces ports.WorkspaceStore) *Plans {
	return &Plans{plans: plans, workspaces: workspaces}
}

// ListPlans returns every plan's limits. Admin only.
func (s *Plans) ListPlans(ctx context.Context, a domain.Actor) ([]domain.PlanLimits, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	return s.plans.ListPlans(ctx)
}

// UpdatePlan sets a plan's concurrency limit and, unless rate keeps it,
// its start rate; the next claim of every
// dispatcher uses it. A lower limit cancels nothing: it stops admissions
// until the workspaces are under it. Admin only.
func (s *Plans) UpdatePlan(ctx context.Context, a domain.Actor, plan domain.Plan, maxRunning int, rate ports.StartRateEdit) (domain.PlanLimits, error) {
	if err := requireAdmin(a); err != nil {
		return domain.PlanLimits{}, err
	}
	if _, err := domain.ParsePlan(string(plan)); err != nil {
		return domain.PlanLimits{}, ports.ErrNotFound
	}
	if err := domain.CheckMaxRunning(maxRunning, "/maxRunning"); err != nil {
		return domain.PlanLimits{}, err
	}
	if !rate.Keep && rate.Rate != nil {
		if err := domain.CheckStartRate(*rate.Rate, "/startRate"); err != nil {
			return domain.PlanLimits{}, err
		}
	}
	return s.plans.UpdatePlan(ctx, plan, maxRunning, rate)
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
// plan's). Admin only: a tenant cannot raise its own limits.
func (s *Plans) SetWorkspaceLimits(ctx context.Context, a domain.Actor, l domain.WorkspaceLimits) (domain.WorkspaceLimits, error) {
	if err := requireAdmin(a); err != nil {
		return domain.WorkspaceLimits{}, err
	}
	if l.MaxRunning != nil {
		if err := domain.CheckMaxRunning(*l.MaxRunning, "/maxRunning"); err != nil {
			return domain.WorkspaceLimits{}, err
		}
	}
	if l.StartRate != nil {
		if err := domain.CheckStartRate(*l.StartRate, "/startRate"); err != nil {
			return domain.WorkspaceLimits{}, err
		}
	}
	return s.plans.SetWorkspaceLimits(ctx, l)
}
