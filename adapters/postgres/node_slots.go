package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/ports"
)

var _ ports.NodeSlots = (*Store)(nil)

// AcquireNodeSlot takes a slot of the workspace's share under the
// workspace's slot lock, first forgetting rows that no longer count.
func (s *Store) AcquireNodeSlot(ctx context.Context, slot ports.NodeSlot, share int, lease time.Duration) (bool, error) {
	taken := false
	err := s.withCachedPlansTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.NodeSlotsLock(ctx, tx, slot.WorkspaceID); err != nil {
			return err
		}
		if err := s.q.NodeSlotsForgetDead(ctx, tx, slot.WorkspaceID); err != nil {
			return err
		}
		held, err := s.q.NodeSlotsHeld(ctx, tx, dbsqlc.NodeSlotsHeldParams{WorkspaceID: slot.WorkspaceID, ExecutionID: slot.ExecutionID, NodeKey: slot.NodeKey})
		if err != nil {
			return err
		}
		if !held.Mine && int(held.Others) >= share {
			return nil
		}
		taken = true
		return s.q.NodeSlotTake(ctx, tx, dbsqlc.NodeSlotTakeParams{
			ExecutionID: slot.ExecutionID, NodeKey: slot.NodeKey, WorkspaceID: slot.WorkspaceID, LeaseSeconds: lease.Seconds(),
		})
	})
	return taken && err == nil, err
}

// ReleaseNodeSlot deletes the node's slot row.
func (s *Store) ReleaseNodeSlot(ctx context.Context, slot ports.NodeSlot) error {
	return s.q.NodeSlotRelease(ctx, s.pool, dbsqlc.NodeSlotReleaseParams{ExecutionID: slot.ExecutionID, NodeKey: slot.NodeKey})
}
