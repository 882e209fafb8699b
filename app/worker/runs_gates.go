package worker

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// WithNodeSlots keeps the workspaces' shares of the external-API worker in
// slots; without it every slot is granted.
func WithNodeSlots(slots ports.NodeSlots) RunsOption {
	return func(r *Runs) { r.slots = slots }
}

// WithOutboundGate holds HTTP nodes to their workspace's host limits and
// pauses in gate; without it every call goes at once.
func WithOutboundGate(gate ports.OutboundGate) RunsOption {
	return func(r *Runs) { r.outbound = gate }
}

// AcquireNodeSlot takes a slot of s's workspace's share (share slots at
// most), held for lease at most, and reports false when the workspace
// holds its whole share: the run then waits, holding no worker slot, and
// asks again.
func (r *Runs) AcquireNodeSlot(ctx context.Context, s ports.NodeSlot, share int, lease time.Duration) (bool, error) {
	if r.slots == nil {
		return true, nil
	}
	return r.slots.AcquireNodeSlot(ctx, s, share, lease)
}

// ReleaseNodeSlot gives s's slot back once its node's activity has ended.
func (r *Runs) ReleaseNodeSlot(ctx context.Context, s ports.NodeSlot) error {
	if r.slots == nil {
		return nil
	}
	return r.slots.ReleaseNodeSlot(ctx, s)
}

// OutboundTurn asks for a node's turn at host, the workspace's limits for
// it and its pause: zero Wait lets it go.
func (r *Runs) OutboundTurn(ctx context.Context, workspaceID domain.ID, host string, holdsSlot bool) (ports.OutboundTurn, error) {
	if r.outbound == nil {
		return ports.OutboundTurn{}, nil
	}
	return r.outbound.TakeOutboundTurn(ctx, workspaceID, host, holdsSlot)
}

// AdmitOutboundCall admits a node's call at host just before it goes:
// zero lets it go, counted; otherwise it waits that long and asks again.
func (r *Runs) AdmitOutboundCall(ctx context.Context, workspaceID domain.ID, host string) (time.Duration, error) {
	if r.outbound == nil {
		return 0, nil
	}
	return r.outbound.AdmitOutboundCall(ctx, workspaceID, host)
}

// PauseOutboundHost pauses the workspace's calls to host for wait, after
// an upstream's Retry-After, and reports false when the workspace already
// has maxPaused other hosts paused (or no gate is set): the node then
// waits on its own.
func (r *Runs) PauseOutboundHost(ctx context.Context, workspaceID domain.ID, host string, wait time.Duration, maxPaused int) (bool, error) {
	if r.outbound == nil {
		return false, nil
	}
	return r.outbound.PauseOutboundHost(ctx, workspaceID, host, wait, maxPaused)
}
