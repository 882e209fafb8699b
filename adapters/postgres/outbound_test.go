package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
)

func newOutboundWorkspace(t *testing.T, store *postgres.Store) domain.ID {
	t.Helper()
	w, err := store.CreateWorkspace(context.Background(), domain.Workspace{ID: domain.ID(uuid.New()), Name: "ws", Plan: domain.PlanPro})
	if err != nil {
		t.Fatal(err)
	}
	return w.ID
}

// TestOutboundLimitsPerWorkspaceAreBounded: a workspace at its bound of
// host limits is refused a new host with a quota error, may still change
// the hosts it has, and another workspace is not counted against it.
func TestOutboundLimitsPerWorkspaceAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := postgres.NewStore(pgtest.Pool(t), slog.New(slog.DiscardHandler))
	ws, other := newOutboundWorkspace(t, store), newOutboundWorkspace(t, store)
	bound := 2
	if _, err := store.SetWorkspaceLimits(ctx, domain.WorkspaceLimits{WorkspaceID: ws, Quotas: domain.QuotaOverrides{OutboundHosts: &bound}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a.example", "b.example"} {
		if _, err := store.PutOutboundLimit(ctx, ws, domain.OutboundLimit{Host: h, RatePerSecond: 1, Burst: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var quota *domain.QuotaError
	if _, err := store.PutOutboundLimit(ctx, ws, domain.OutboundLimit{Host: "c.example", RatePerSecond: 1, Burst: 1}); !errors.As(err, &quota) {
		t.Errorf("a third host past a bound of 2: %v, want a quota error", err)
	}
	if l, err := store.PutOutboundLimit(ctx, ws, domain.OutboundLimit{Host: "a.example", RatePerSecond: 9, Burst: 3}); err != nil || l.RatePerSecond != 9 {
		t.Errorf("changing a host at the bound: %v, %v", l, err)
	}
	if _, err := store.PutOutboundLimit(ctx, other, domain.OutboundLimit{Host: "c.example", RatePerSecond: 1, Burst: 1}); err != nil {
		t.Errorf("another workspace's first host: %v", err)
	}
	ls, err := store.ListOutboundLimits(ctx, ws)
	if err != nil || len(ls) != 2 {
		t.Errorf("listing: %v, %v; want 2 limits", ls, err)
	}
}

// TestOutboundTurnsHoldTheRateAcrossCallersAndWorkspaces: 20 concurrent
// callers of one workspace at one call per 100 s with a burst of 4 get 4
// turns at once and the rest reserved slots 100 s apart (a rate this slow
// keeps the test's own time out of the figures); calls as they go are
// admitted the same way; a pause holds the workspace's calls to the host
// (a slot holder too) and no other workspace's.
func TestOutboundTurnsHoldTheRateAcrossCallersAndWorkspaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := postgres.NewStore(pgtest.Pool(t), slog.New(slog.DiscardHandler))
	ws, other := newOutboundWorkspace(t, store), newOutboundWorkspace(t, store)
	const host = "api.example"
	if _, err := store.PutOutboundLimit(ctx, ws, domain.OutboundLimit{Host: host, RatePerSecond: 0.01, Burst: 4}); err != nil {
		t.Fatal(err)
	}
	waits := make([]time.Duration, 20)
	began := time.Now()
	var wg sync.WaitGroup
	for i := range waits {
		wg.Go(func() {
			turn, err := store.TakeOutboundTurn(ctx, ws, host, false)
			if err != nil {
				t.Error(err)
			}
			waits[i] = turn.Wait
		})
	}
	wg.Wait()
	asking := time.Since(began)
	now, longest := 0, time.Duration(0)
	for _, w := range waits {
		if w == 0 {
			now++
		}
		longest = max(longest, w)
	}
	// 16 reserved slots 100 s apart: the last 1,600 s after the first
	// ask, so at most the time the 20 asks took less than that away.
	if now != 4 || longest < 1600*time.Second-asking || longest > 1600*time.Second {
		t.Errorf("20 callers at 0.01/s, burst 4: %d went at once (want 4), the longest wait %s (want 1600s less the %s the asks took)", now, longest, asking)
	}

	// Calls as they go are admitted at the rate: the burst, then none
	// until an interval has passed.
	for i := range 4 {
		if wait, err := store.AdmitOutboundCall(ctx, ws, host); err != nil || wait != 0 {
			t.Fatalf("admitting call %d of the burst: %v, %v", i+1, wait, err)
		}
	}
	if wait, err := store.AdmitOutboundCall(ctx, ws, host); err != nil || wait < 99*time.Second || wait > 100*time.Second {
		t.Errorf("a fifth call at once: wait %v, %v; want about 100s", wait, err)
	}

	if ok, err := store.PauseOutboundHost(ctx, ws, host, 30*time.Second, 10); err != nil || !ok {
		t.Fatalf("pausing: %v, %v", ok, err)
	}
	for _, holds := range []bool{false, true} {
		turn, err := store.TakeOutboundTurn(ctx, ws, host, holds)
		if err != nil || turn.Wait < 29*time.Second || turn.Reserved {
			t.Errorf("paused host, holding a slot %v: %+v, %v; want a wait of about 30s and no slot", holds, turn, err)
		}
	}
	if wait, err := store.AdmitOutboundCall(ctx, ws, host); err != nil || wait < 29*time.Second {
		t.Errorf("a call going to the paused host: wait %v, %v; want about 30s", wait, err)
	}
	if turn, err := store.TakeOutboundTurn(ctx, other, host, false); err != nil || turn.Wait != 0 {
		t.Errorf("another workspace's call to the paused host: %+v, %v; want it to go at once", turn, err)
	}
	// A workspace at its bound of paused hosts pauses no more.
	if ok, err := store.PauseOutboundHost(ctx, other, "one.example", time.Minute, 1); err != nil || !ok {
		t.Fatalf("pausing a first host: %v, %v", ok, err)
	}
	if ok, err := store.PauseOutboundHost(ctx, other, "two.example", time.Minute, 1); err != nil || ok {
		t.Errorf("pausing a second host past a bound of 1: %v, %v; want refused", ok, err)
	}
}
