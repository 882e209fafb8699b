package worker

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// oneSlotGate is a NodeSlots and OutboundGate whose workspace has one slot
// and whose host is paused for a second; it records what it was asked.
type oneSlotGate struct {
	held  map[ports.NodeSlot]bool
	asked []string
}

func (g *oneSlotGate) AcquireNodeSlot(_ context.Context, s ports.NodeSlot, share int, _ time.Duration) (bool, error) {
	if len(g.held) >= share {
		return false, nil
	}
	g.held[s] = true
	return true, nil
}

func (g *oneSlotGate) ReleaseNodeSlot(_ context.Context, s ports.NodeSlot) error {
	delete(g.held, s)
	return nil
}

func (g *oneSlotGate) TakeOutboundTurn(_ context.Context, ws domain.ID, host string, _ bool) (ports.OutboundTurn, error) {
	g.asked = append(g.asked, "turn "+host)
	return ports.OutboundTurn{Wait: time.Second}, nil
}

func (g *oneSlotGate) AdmitOutboundCall(_ context.Context, ws domain.ID, host string) (time.Duration, error) {
	g.asked = append(g.asked, "admit "+host)
	return time.Second, nil
}

func (g *oneSlotGate) PauseOutboundHost(_ context.Context, ws domain.ID, host string, _ time.Duration, _ int) (bool, error) {
	g.asked = append(g.asked, "pause "+host)
	return true, nil
}

// TestRunsHoldNodesToTheirSharesAndHostsThroughTheirGates: with no gate,
// every slot is granted and every call goes at once; with one, a run's
// slots and calls are its verdicts.
func TestRunsHoldNodesToTheirSharesAndHostsThroughTheirGates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws := domain.ID(uuid.New())
	a, b := ports.NodeSlot{WorkspaceID: ws, NodeKey: "a"}, ports.NodeSlot{WorkspaceID: ws, NodeKey: "b"}

	open := NewRuns(nil, discard())
	if ok, err := open.AcquireNodeSlot(ctx, a, 0, time.Minute); !ok || err != nil {
		t.Errorf("no slots kept: acquire = %v, %v; want granted", ok, err)
	}
	if turn, err := open.OutboundTurn(ctx, ws, "api.example", false); turn.Wait != 0 || err != nil {
		t.Errorf("no gate: turn waits %s (%v), want none", turn.Wait, err)
	}
	if wait, err := open.AdmitOutboundCall(ctx, ws, "api.example"); wait != 0 || err != nil {
		t.Errorf("no gate: admission waits %s (%v), want none", wait, err)
	}
	if paused, err := open.PauseOutboundHost(ctx, ws, "api.example", time.Second, 1); paused || err != nil {
		t.Errorf("no gate: paused = %v (%v), want the node to wait on its own", paused, err)
	}

	g := &oneSlotGate{held: map[ports.NodeSlot]bool{}}
	gated := NewRuns(nil, discard(), WithNodeSlots(g), WithOutboundGate(g))
	if ok, _ := gated.AcquireNodeSlot(ctx, a, 1, time.Minute); !ok {
		t.Error("the first node of a share of one was refused")
	}
	if ok, _ := gated.AcquireNodeSlot(ctx, b, 1, time.Minute); ok {
		t.Error("a second node took a slot of a share of one")
	}
	if err := gated.ReleaseNodeSlot(ctx, a); err != nil || len(g.held) != 0 {
		t.Errorf("release: %v, %d slots still held", err, len(g.held))
	}
	turn, _ := gated.OutboundTurn(ctx, ws, "api.example", false)
	wait, _ := gated.AdmitOutboundCall(ctx, ws, "api.example")
	paused, _ := gated.PauseOutboundHost(ctx, ws, "api.example", time.Second, 1)
	if turn.Wait != time.Second || wait != time.Second || !paused || len(g.asked) != 3 {
		t.Errorf("gated: turn %s, admission %s, paused %v, asked %v; want the gate's verdicts", turn.Wait, wait, paused, g.asked)
	}
}
