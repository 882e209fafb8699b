package app

import (
	"context"
	"errors"

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

// UpdatePlan sets the figures the change gives: the concurrency limit is
// used by the next claim of every dispatcher, a quota by the next request
// that spends it. A lower figure cancels and deletes nothing: it refuses
// new admissions or spending until the workspaces are under it. Every
// figure is checked before anything is written. Admin only.
func (s *Plans) UpdatePlan(ctx context.Context, a domain.Actor, plan domain.Plan, change domain.PlanChange) (domain.PlanLimits, error) {
	if err := requireAdmin(a); err != nil {
		return domain.PlanLimits{}, err
	}
	if _, err := domain.ParsePlan(string(plan)); err != nil {
		return domain.PlanLimits{}, ports.ErrNotFound
	}
	if err := checkLimits(change.MaxRunning, change.Quotas, change.RetentionDays); err != nil {
		return domain.PlanLimits{}, err
	}
	if r := change.StartRate; !r.Keep && r.Rate != nil {
		if err := domain.CheckStartRate(*r.Rate, "/startRate"); err != nil {
			return domain.PlanLimits{}, err
		}
	}
	return s.plans.UpdatePlan(ctx, plan, change)
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
	if err := checkLimits(l.MaxRunning, l.Quotas, nil); err != nil {
		return domain.WorkspaceLimits{}, err
	}
	if l.StartRate != nil {
		if err := domain.CheckStartRate(*l.StartRate, "/startRate"); err != nil {
			return domain.WorkspaceLimits{}, err
		}
	}
	return s.plans.SetWorkspaceLimits(ctx, l)
}

// checkLimits refuses, in one 422 naming every field at fault, a
// concurrency limit, quota or retention out of its range.
func checkLimits(maxRunning *int, quotas domain.QuotaOverrides, retentionDays *int) error {
	var problems []domain.Problem
	retention := error(nil)
	if retentionDays != nil {
		retention = domain.CheckRetentionDays(*retentionDays, "/retentionDays")
	}
	for _, err := range []error{checkMaxRunning(maxRunning), quotas.Check(), retention} {
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
