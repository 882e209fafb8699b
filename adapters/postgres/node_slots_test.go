package postgres_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// TestNodeSlotsHoldAWorkspaceToItsShare: concurrent acquisitions of one
// workspace's slots take exactly its share; taking a slot already held
// renews it; a released slot, a lapsed lease and a finished execution's
// slot are free again.
func TestNodeSlotsHoldAWorkspaceToItsShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, slog.New(slog.DiscardHandler))
	item := claimOne(t, store, domain.PlanPro, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
	const share = 3
	slot := func(i int) ports.NodeSlot {
		return ports.NodeSlot{WorkspaceID: item.WorkspaceID, ExecutionID: item.ExecutionID, NodeKey: string(rune('a' + i))}
	}
	taken := make([]bool, 10)
	var wg sync.WaitGroup
	for i := range taken {
		wg.Go(func() {
			ok, err := store.AcquireNodeSlot(ctx, slot(i), share, time.Hour)
			if err != nil {
				t.Error(err)
			}
			taken[i] = ok
		})
	}
	wg.Wait()
	var holders []int
	for i, ok := range taken {
		if ok {
			holders = append(holders, i)
		}
	}
	if len(holders) != share {
		t.Fatalf("%d of 10 concurrent acquisitions took a slot, want the share, %d", len(holders), share)
	}
	if ok, err := store.AcquireNodeSlot(ctx, slot(holders[0]), share, time.Hour); err != nil || !ok {
		t.Errorf("a holder taking its slot again: %v, %v; want it renewed", ok, err)
	}
	free := -1
	for i, ok := range taken {
		if !ok {
			free = i
			break
		}
	}
	if err := store.ReleaseNodeSlot(ctx, slot(holders[0])); err != nil {
		t.Fatal(err)
	}
	if ok, err := store.AcquireNodeSlot(ctx, slot(free), share, time.Hour); err != nil || !ok {
		t.Errorf("after a release: %v, %v; want the slot", ok, err)
	}
	// A lapsed lease no longer counts.
	if _, err := pool.Exec(ctx, "UPDATE workspace_node_slots SET lease_until = now() - interval '1 second' WHERE node_key = $1", slot(holders[1]).NodeKey); err != nil {
		t.Fatal(err)
	}
	if ok, err := store.AcquireNodeSlot(ctx, ports.NodeSlot{WorkspaceID: item.WorkspaceID, ExecutionID: item.ExecutionID, NodeKey: "lapsed"}, share, time.Hour); err != nil || !ok {
		t.Errorf("after a lease lapsed: %v, %v; want the slot", ok, err)
	}
	// Nor do the slots of an execution that is no longer RUNNING.
	if _, err := pool.Exec(ctx, "UPDATE workflow_executions SET status = 'FAILED', completed_at = now() WHERE id = $1", item.ExecutionID); err != nil {
		t.Fatal(err)
	}
	other := ports.NodeSlot{WorkspaceID: item.WorkspaceID, ExecutionID: domain.ID(uuid.New()), NodeKey: "x"}
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status)
		SELECT $1, workspace_id, workflow_definition_id, workflow_version, 'RUNNING' FROM workflow_executions WHERE id = $2`, other.ExecutionID, item.ExecutionID); err != nil {
		t.Fatal(err)
	}
	for i := range share {
		other.NodeKey = string(rune('x' + i))
		if ok, err := store.AcquireNodeSlot(ctx, other, share, time.Hour); err != nil || !ok {
			t.Errorf("slot %d of a new execution beside a finished one's: %v, %v; want it", i, ok, err)
		}
	}
}
