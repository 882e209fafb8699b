package dispatch

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

func TestAdmitIsRoundRobinWithinFreeSlots(t *testing.T) {
	t.Parallel()
	a := newAdmission(discardLog())
	full := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanFree, Limit: 1, Running: 1}
	pro := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanPro, Limit: 5, Running: 2}
	ent := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanEnterprise, Limit: 20}
	free := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanFree, Limit: 1}
	const budget = 7
	q := a.admit([]ports.ClaimableWorkspace{full, pro, ent, free}, budget)
	if q[full.ID] != 0 {
		t.Errorf("a full workspace got %d", q[full.ID])
	}
	if q[free.ID] != 1 {
		t.Errorf("an idle FREE workspace got %d, want its 1 slot", q[free.ID])
	}
	if q[pro.ID] != 3 {
		t.Errorf("PRO with 2 running got %d, want its 3 free slots", q[pro.ID])
	}
	if q[ent.ID] != 3 {
		t.Errorf("ENTERPRISE got %d, want the rest of the batch (3)", q[ent.ID])
	}
	total := 0
	for _, n := range q {
		total += n
	}
	if total != budget {
		t.Errorf("quotas sum to %d, want the batch size %d", total, budget)
	}
}

// TestAdmitServesEveryWorkspaceThatCanStartWithinOneCycle: 51 workspaces
// with a free slot each, 50 of which cannot start anything now (their
// start rate has no room, or their items, once read, are all held), and a
// budget of 10: the held workspaces get nothing, so the one that can start
// gets the whole batch; and among 25 that can all start, successive
// batches go on from the last served, serving all 25 in three batches
// (before, each batch started one workspace further, so 10 were served
// again and again and the rest waited 15 batches).
func TestAdmitServesEveryWorkspaceThatCanStartWithinOneCycle(t *testing.T) {
	t.Parallel()
	a := newAdmission(discardLog())
	var ws []ports.ClaimableWorkspace
	for i := range 50 {
		w := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanPro, Limit: 5}
		if i%2 == 0 {
			w.Rated = true
		} else {
			w.Known = true
		}
		ws = append(ws, w)
	}
	ent := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanEnterprise, Limit: 20}
	q := a.admit(append(ws, ent), 10)
	if q[ent.ID] != 10 || len(q) != 1 {
		t.Errorf("quotas %v; want the whole batch of 10 for the one workspace that can start", q)
	}

	a = newAdmission(discardLog())
	ready := make([]ports.ClaimableWorkspace, 25)
	for i := range ready {
		ready[i] = ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanFree, Limit: 1}
	}
	served := map[domain.ID]bool{}
	for batch := range 3 {
		for id, n := range a.admit(slices.Clone(ready), 10) {
			if n != 1 {
				t.Fatalf("batch %d gave %s %d; want its one slot", batch, id, n)
			}
			served[id] = true
		}
	}
	if len(served) != len(ready) {
		t.Errorf("three batches of 10 served %d of 25 workspaces, want all", len(served))
	}
}

func TestAdmitGivesAWorkspaceOverALoweredLimitNothing(t *testing.T) {
	t.Parallel()
	a := newAdmission(discardLog())
	lowered := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanPro, Limit: 2, Running: 4}
	if q := a.admit([]ports.ClaimableWorkspace{lowered}, 10); q[lowered.ID] != 0 {
		t.Errorf("a workspace running 4 under a lowered limit of 2 got %d", q[lowered.ID])
	}
}

func TestAdmitLogsAWorkspaceAtCapacityOncePerInterval(t *testing.T) {
	t.Parallel()
	var logs porttest.JSONLog
	a := newAdmission(slog.New(slog.NewJSONHandler(&logs, nil)))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	full := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanPro, Limit: 5, Running: 5}
	filled := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanFree, Limit: 1}
	roomy := ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanEnterprise, Limit: 20}
	// The first batch finds one full and fills another, which later
	// batches' prefilter skips by its counts: both are logged, once.
	for range 3 {
		a.admit([]ports.ClaimableWorkspace{full, filled, roomy}, 2)
		filled.Running = 1
	}
	recs := logs.Records(t, "workspace at capacity")
	want := map[string]float64{full.ID.String(): 5, filled.ID.String(): 1}
	if len(recs) != len(want) {
		t.Fatalf("%d workspace at capacity lines over three batches, want one per full workspace: %v", len(recs), recs)
	}
	for _, r := range recs {
		active, ok := want[r["workspace_id"].(string)]
		if !ok || r["level"] != "INFO" || r["active_count"] != active || r["tier_limit"] != active {
			t.Errorf("logged %v, want INFO with the workspace, its active count and its limit (%v)", r, active)
		}
	}
	now = now.Add(capacityLogEvery)
	a.admit([]ports.ClaimableWorkspace{full, roomy}, 2)
	if n := len(logs.Records(t, "workspace at capacity")); n != 3 {
		t.Errorf("%d lines after the interval, want the full workspace logged again (3)", n)
	}
}

// TestAdmitLeavesTheCallersWorkspacesInTheirOrder: the store indexes the
// workspaces it passes by position (a claimed item's plan is read through
// it), so admit must not sort them in place; it did, and an item could be
// handed out with another workspace's plan.
func TestAdmitLeavesTheCallersWorkspacesInTheirOrder(t *testing.T) {
	t.Parallel()
	var ws []ports.ClaimableWorkspace
	for range 20 {
		ws = append(ws, ports.ClaimableWorkspace{ID: domain.ID(uuid.New()), Plan: domain.PlanFree, Limit: 1})
	}
	before := slices.Clone(ws)
	newAdmission(discardLog()).admit(ws, 10)
	if !slices.Equal(ws, before) {
		t.Error("admit reordered the caller's workspaces")
	}
}
