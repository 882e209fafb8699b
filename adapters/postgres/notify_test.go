package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
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
