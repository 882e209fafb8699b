package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

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
	change := planChangeIn(req.Body)
	rate, err := startRateEdit(req.Body.StartRate)
	if err != nil {
		return nil, err
	}
	change.StartRate = rate
	p, err := s.app.Plans.UpdatePlan(ctx, actorFrom(ctx), domain.Plan(req.Plan), change)
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
		WorkspaceID: domain.ID(req.WorkspaceID), MaxRunning: req.Body.MaxRunning, Floor: req.Body.Floor, Quotas: workspaceQuotasIn(req.Body),
		StartRate: startRateIn(req.Body.StartRate),
	})
	if err != nil {
		return nil, err
	}
	return api.SetWorkspaceLimits200JSONResponse(workspaceLimitsOut(l)), nil
}

// GetPool shows the pool every workspace shares.
func (s *Server) GetPool(ctx context.Context, _ api.GetPoolRequestObject) (api.GetPoolResponseObject, error) {
	p, err := s.app.Plans.Pool(ctx, actorFrom(ctx))
	if err != nil {
		return nil, err
	}
	return api.GetPool200JSONResponse(poolOut(p)), nil
}

// UpdatePool sets the pool's capacity.
func (s *Server) UpdatePool(ctx context.Context, req api.UpdatePoolRequestObject) (api.UpdatePoolResponseObject, error) {
	p, err := s.app.Plans.UpdatePool(ctx, actorFrom(ctx), req.Body.Capacity)
	if err != nil {
		return nil, err
	}
	return api.UpdatePool200JSONResponse(poolOut(p)), nil
}

func poolOut(p domain.Pool) api.Pool {
	return api.Pool{Capacity: p.Capacity, Running: p.Running, Borrowed: p.Borrowed, UpdatedAt: p.UpdatedAt}
}

func planOut(p domain.PlanLimits) api.PlanLimits {
	out := api.PlanLimits{Plan: api.Plan(p.Plan), MaxRunning: p.MaxRunning, Floor: p.Floor, Weight: p.Weight, UpdatedAt: p.UpdatedAt, StartRate: startRateOut(p.StartRate)}
	planQuotasOut(&out, p.Quotas)
	out.RetentionDays = p.RetentionDays
	return out
}

func workspaceLimitsOut(l domain.WorkspaceLimits) api.WorkspaceLimits {
	out := api.WorkspaceLimits{WorkspaceID: uuid.UUID(l.WorkspaceID), MaxRunning: l.MaxRunning, Floor: l.Floor, StartRate: startRateOut(l.StartRate)}
	workspaceQuotasOut(&out, l.Quotas)
	if !l.UpdatedAt.IsZero() {
		at := l.UpdatedAt
		out.UpdatedAt = &at
	}
	return out
}

// startRateEdit reads a plan edit's startRate: absent keeps the plan's,
// null removes it. The request's schema has checked its shape and bounds.
func startRateEdit(raw json.RawMessage) (domain.StartRateEdit, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return domain.StartRateEdit{Keep: true}, nil
	case bytes.Equal(raw, []byte("null")):
		return domain.StartRateEdit{}, nil
	}
	var r api.StartRate
	if err := json.Unmarshal(raw, &r); err != nil {
		return domain.StartRateEdit{}, fmt.Errorf("startRate passed the request's schema but does not decode: %w", err)
	}
	return domain.StartRateEdit{Rate: startRateIn(&r)}, nil
}

// startRateIn is an API start rate in the domain's terms; an absent burst
// is the rate.
func startRateIn(r *api.StartRate) *domain.StartRate {
	if r == nil {
		return nil
	}
	out := &domain.StartRate{Rate: r.Rate, Per: domain.RatePeriod(r.Per), Burst: r.Rate}
	if r.Burst != nil {
		out.Burst = *r.Burst
	}
	return out
}

func startRateOut(r *domain.StartRate) *api.StartRate {
	if r == nil {
		return nil
	}
	burst := r.Burst
	return &api.StartRate{Rate: r.Rate, Per: api.StartRatePer(r.Per), Burst: &burst}
}
