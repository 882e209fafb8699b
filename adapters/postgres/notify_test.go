package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Enqueues committed by racing writers wake the dispatchers' and the
// streams' channels after their commits, coalesced: far fewer NOTIFYs than
// commits, none closer than the gap allows, and one received after the
// last enqueue returned.
func TestCommitsWakeTheirChannelsAfterwardsCoalesced(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	type target struct{ ws, def domain.ID }
	targets := make([]target, 4)
	for i := range targets {
		targets[i].ws, targets[i].def = createWorkspace(t, store, domain.PlanEnterprise)
	}
	listening, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listening.Release()
	for _, c := range []string{postgres.QueueChannel, postgres.FeedChannel} {
		if _, err := listening.Exec(ctx, "LISTEN "+c); err != nil {
			t.Fatal(err)
		}
	}
	// receive counts what arrives until nothing has for a second.
	received := map[string]int{}
	var lastAt time.Time
	receive := func() {
		for {
			wait, cancel := context.WithTimeout(ctx, time.Second)
			n, err := listening.Conn().WaitForNotification(wait)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			received[n.Channel]++
			lastAt = time.Now()
		}
	}
	receive() // the workspaces' own wake-ups

	const writers, each = 16, 25
	begin := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			tg := targets[w%len(targets)]
			for range each {
				if _, _, err := store.Enqueue(ctx, ports.ItemToEnqueue{ID: domain.ID(uuid.New()), WorkspaceID: tg.ws, DefinitionID: tg.def,
					Input: json.RawMessage(`{}`), Priority: 2, Actor: domain.Actor{Admin: true}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	wrote := time.Since(begin)
	lastReturned := time.Now()
	clear(received)
	receive()

	commits := writers * each
	for _, c := range []string{postgres.QueueChannel, postgres.FeedChannel} {
		if received[c] == 0 {
			t.Errorf("%s: no NOTIFY for %d commits", c, commits)
		}
		// One at once, one per gap while the writers ran, one after.
		if most := int(wrote/postgres.NotifyGap) + 2; received[c] > most || received[c] > commits/2 {
			t.Errorf("%s: %d NOTIFYs for %d commits over %v; want at most %d (one per %v) and far fewer than the commits",
				c, received[c], commits, wrote, min(most, commits/2), postgres.NotifyGap)
		}
	}
	if !lastAt.After(lastReturned) {
		t.Errorf("the last NOTIFY arrived at %v, before the last enqueue returned (%v)", lastAt, lastReturned)
	}
	t.Logf("%d commits over %v: %d NOTIFYs on %s, %d on %s", commits, wrote.Round(time.Millisecond),
		received[postgres.QueueChannel], postgres.QueueChannel, received[postgres.FeedChannel], postgres.FeedChannel)
}

// A stream hears of node records written on their own (StartNode,
// FinishNode: statements outside a transaction) and of a run's end
// (FinishExecution, a transaction) from the wake-up sent after them, not
// from the hub's 1 s poll: over ten records each way, the median delay
// from the write's return to the event's arrival is far below the poll.
func TestAStreamHearsOfEachWriteWithoutWaitingForThePoll(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	hub := postgres.NewFeedHub(pool, quiet())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const rounds = 10
	var alone, inTx []time.Duration
	for i := range rounds {
		item := claimOne(t, store, domain.PlanEnterprise, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
		events, err := hub.Subscribe(ctx, ports.FeedFilter{WorkspaceID: item.WorkspaceID, ExecutionID: &item.ExecutionID}, 0)
		if err != nil {
			t.Fatal(err)
		}
		heard := func(kind string, wrote time.Time) time.Duration {
			t.Helper()
			timeout := time.After(30 * time.Second)
			for {
				select {
				case e, ok := <-events:
					if !ok {
						t.Fatalf("round %d: the stream closed before %s", i, kind)
					}
					if e.Kind == kind {
						return time.Since(wrote)
					}
				case <-timeout:
					t.Fatalf("round %d: no %s within 30 s", i, kind)
				}
			}
		}
		// Each write waits for its event: no other commit wakes the hub
		// in between.
		if err := store.StartNode(ctx, item.ExecutionID, domain.NodeRecord{Key: "a", Type: domain.NodeTransform, Status: domain.NodeRunning}); err != nil {
			t.Fatal(err)
		}
		alone = append(alone, heard("node.started", time.Now()))
		if _, err := finish(ctx, store, item.ExecutionID, domain.ExecutionCompleted, nil); err != nil {
			t.Fatal(err)
		}
		inTx = append(inTx, heard("run.finished", time.Now()))
	}
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"a node record written alone", alone}, {"a run's end, in a transaction", inTx}} {
		slices.Sort(m.ds)
		t.Logf("%s: heard after %v (median), %v (longest)", m.name, m.ds[rounds/2].Round(time.Millisecond), m.ds[rounds-1].Round(time.Millisecond))
		if m.ds[rounds/2] > 250*time.Millisecond {
			t.Errorf("%s: the median stream heard of it %v after the write; want far below the 1 s poll", m.name, m.ds[rounds/2])
		}
	}
}
