package httpapi

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/domain"
)

// ListPlans lists every plan's limits.
func (s *Server) ListPlans(ctx context.Context, _ api.ListPlansRequestObject) (api.ListPlansResponseObject, error) {
	plans, err := s.app.Plans.ListPlans(ctx, actorFrom(ctx))
	if err != nil {
		return nil, err
	}
	out := make(api.ListPlans200JSONResponse, len(plans))
	for i, p := range plans {
		out[i] = planOut(p)
	}
	return out, nil
}

// UpdatePlan changes a plan's limits.
func (s *Server) UpdatePlan(ctx context.Context, req api.UpdatePlanRequestObject) (api.UpdatePlanResponseObject, error) {
	p, err := s.app.Plans.UpdatePlan(ctx, actorFrom(ctx), domain.Plan(req.Plan), planChangeIn(req.Body))
	if err != nil {
		return nil, err
	}
	return api.UpdatePlan200JSONResponse(planOut(p)), nil
}

// GetWorkspaceLimits shows a workspace's own limits.
func (s *Server) GetWorkspaceLimits(ctx context.Context, req api.GetWorkspaceLimitsRequestObject) (api.GetWorkspaceLimitsResponseObject, error) {
	l, err := s.app.Plans.WorkspaceLimits(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID))
	if err != nil {
		return nil, err
	}
	return api.GetWorkspaceLimits200JSONResponse(workspaceLimitsOut(l)), nil
}

// SetWorkspaceLimits replaces a workspace's own limits.
func (s *Server) SetWorkspaceLimits(ctx context.Context, req api.SetWorkspaceLimitsRequestObject) (api.SetWorkspaceLimitsResponseObject, error) {
	l, err := s.app.Plans.SetWorkspaceLimits(ctx, actorFrom(ctx), domain.WorkspaceLimits{
		WorkspaceID: domain.ID(req.WorkspaceID), MaxRunning: req.Body.MaxRunning, Quotas: workspaceQuotasIn(req.Body),
	})
	if err != nil {
		return nil, err
	}
	return api.SetWorkspaceLimits200JSONResponse(workspaceLimitsOut(l)), nil
}

func planOut(p domain.PlanLimits) api.PlanLimits {
	out := api.PlanLimits{Plan: api.Plan(p.Plan), MaxRunning: p.MaxRunning, UpdatedAt: p.UpdatedAt}
	planQuotasOut(&out, p.Quotas)
	out.RetentionDays = p.RetentionDays
	return out
}

func workspaceLimitsOut(l domain.WorkspaceLimits) api.WorkspaceLimits {
	out := api.WorkspaceLimits{WorkspaceID: uuid.UUID(l.WorkspaceID), MaxRunning: l.MaxRunning}
	workspaceQuotasOut(&out, l.Quotas)
	if !l.UpdatedAt.IsZero() {
		at := l.UpdatedAt
		out.UpdatedAt = &at
	}
	return out
}
