package httpapi

import (
	"context"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// ListOutboundLimits lists a workspace's host limits.
func (s *Server) ListOutboundLimits(ctx context.Context, req api.ListOutboundLimitsRequestObject) (api.ListOutboundLimitsResponseObject, error) {
	o, err := served(s.app.Outbound, "outbound limits")
	if err != nil {
		return nil, err
	}
	ls, err := o.ListOutboundLimits(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID))
	if err != nil {
		return nil, err
	}
	out := make(api.ListOutboundLimits200JSONResponse, len(ls))
	for i, l := range ls {
		out[i] = outboundLimitOut(l)
	}
	return out, nil
}

// ListOutboundPauses lists a workspace's hosts paused now.
func (s *Server) ListOutboundPauses(ctx context.Context, req api.ListOutboundPausesRequestObject) (api.ListOutboundPausesResponseObject, error) {
	o, err := served(s.app.Outbound, "outbound limits")
	if err != nil {
		return nil, err
	}
	ps, err := o.ListOutboundPauses(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID))
	if err != nil {
		return nil, err
	}
	out := make(api.ListOutboundPauses200JSONResponse, len(ps))
	for i, p := range ps {
		out[i] = api.OutboundPause{Host: p.Host, PausedUntil: p.Until}
	}
	return out, nil
}

// SetOutboundLimit sets a workspace's limit for one host.
func (s *Server) SetOutboundLimit(ctx context.Context, req api.SetOutboundLimitRequestObject) (api.SetOutboundLimitResponseObject, error) {
	o, err := served(s.app.Outbound, "outbound limits")
	if err != nil {
		return nil, err
	}
	l, err := o.SetOutboundLimit(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), req.Host, req.Body.RequestsPerSecond, req.Body.Burst)
	if err != nil {
		return nil, err
	}
	return api.SetOutboundLimit200JSONResponse(outboundLimitOut(l)), nil
}

// DeleteOutboundLimit removes a workspace's limit for one host.
func (s *Server) DeleteOutboundLimit(ctx context.Context, req api.DeleteOutboundLimitRequestObject) (api.DeleteOutboundLimitResponseObject, error) {
	o, err := served(s.app.Outbound, "outbound limits")
	if err != nil {
		return nil, err
	}
	if err := o.DeleteOutboundLimit(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), req.Host); err != nil {
		return nil, err
	}
	return api.DeleteOutboundLimit204Response{}, nil
}

func outboundLimitOut(l ports.StoredOutboundLimit) api.OutboundLimit {
	return api.OutboundLimit{Host: l.Host, RequestsPerSecond: l.RatePerSecond, Burst: l.Burst, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt}
}
