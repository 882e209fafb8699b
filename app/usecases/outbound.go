package usecases

import (
	"context"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// OutboundLimits are the use cases of a workspace's limits per target
// host of its HTTP_REQUEST nodes. The admin and the workspace's own keys
// may read and change them; another workspace's key gets ErrForbidden.
type OutboundLimits struct {
	limits     ports.OutboundLimitStore
	workspaces ports.WorkspaceStore
}

// NewOutboundLimits builds the use cases. How many host limits a
// workspace may keep is its outboundHosts quota, read by the store.
func NewOutboundLimits(limits ports.OutboundLimitStore, workspaces ports.WorkspaceStore) *OutboundLimits {
	return &OutboundLimits{limits: limits, workspaces: workspaces}
}

// Request fields a bad limit is reported under.
const (
	outboundHostField  = "/path/host"
	outboundRateField  = "/requestsPerSecond"
	outboundBurstField = "/burst"
)

// ListOutboundLimits lists the workspace's host limits.
func (s *OutboundLimits) ListOutboundLimits(ctx context.Context, a domain.Actor, workspaceID domain.ID) ([]ports.StoredOutboundLimit, error) {
	if err := s.authorize(ctx, a, workspaceID); err != nil {
		return nil, err
	}
	return s.limits.ListOutboundLimits(ctx, workspaceID)
}

// ListOutboundPauses lists the workspace's hosts paused now by an
// upstream's Retry-After, with when each pause ends.
func (s *OutboundLimits) ListOutboundPauses(ctx context.Context, a domain.Actor, workspaceID domain.ID) ([]ports.OutboundPause, error) {
	if err := s.authorize(ctx, a, workspaceID); err != nil {
		return nil, err
	}
	return s.limits.ListOutboundPauses(ctx, workspaceID)
}

// SetOutboundLimit sets the workspace's limit for a host, checked by
// domain.NewOutboundLimit before anything is stored.
func (s *OutboundLimits) SetOutboundLimit(ctx context.Context, a domain.Actor, workspaceID domain.ID, host string, rate float64, burst int) (ports.StoredOutboundLimit, error) {
	if err := s.authorize(ctx, a, workspaceID); err != nil {
		return ports.StoredOutboundLimit{}, err
	}
	l, err := domain.NewOutboundLimit(host, rate, burst, outboundHostField, outboundRateField, outboundBurstField)
	if err != nil {
		return ports.StoredOutboundLimit{}, err
	}
	return s.limits.PutOutboundLimit(ctx, workspaceID, l)
}

// DeleteOutboundLimit removes the workspace's limit for a host.
func (s *OutboundLimits) DeleteOutboundLimit(ctx context.Context, a domain.Actor, workspaceID domain.ID, host string) error {
	if err := s.authorize(ctx, a, workspaceID); err != nil {
		return err
	}
	canonical, err := domain.ParseOutboundHost(host)
	if err != nil {
		return &domain.ValidationError{Problems: []domain.Problem{{Path: outboundHostField, Message: err.Error()}}}
	}
	return s.limits.DeleteOutboundLimit(ctx, workspaceID, canonical)
}

// authorize finds the workspace (ErrNotFound) and checks the caller may
// touch it (ErrForbidden), as the workspace's other use cases do.
func (s *OutboundLimits) authorize(ctx context.Context, a domain.Actor, workspaceID domain.ID) error {
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return err
	}
	return requireWorkspace(a, workspaceID, "workspace")
}
