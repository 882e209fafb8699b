package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// A burst of one key's items at the head of the queue must not fill the
// claim's window: the window counts the items of a key it has already
// kept, so a quota of 2 over a head of 20 items of a key of limit 1 claims
// one of them and the next item that can run, which here is an item
// without a key, the only item of another key behind the burst being full.
func TestClaimTakesABurstsKeyOnlyUpToItsLimitAndFillsTheQuotaBehindIt(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ctx := context.Background()
	def, _ := seedQueue(t, pool, 0)
	var ws uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT workspace_id FROM workflow_definitions WHERE id = $1`, def).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	// Key b already runs at its limit.
	if _, err := pool.Exec(ctx, `INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, concurrency_key)
		VALUES ($1, $2, $3, 1, 'RUNNING', 'b')`, uuid.New(), ws, def); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	var order []uuid.UUID
	add := func(n int, key *string) []uuid.UUID {
		var ids []uuid.UUID
		for range n {
			id := uuid.New()
			var limit *int
			if key != nil {
				limit = new(int)
				*limit = 1
			}
			if _, err := pool.Exec(ctx, `INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, created_at, available_at, concurrency_key, concurrency_limit)
				VALUES ($1, $2, $3, $4, $4, $5, $6)`, id, ws, def, base.Add(time.Duration(len(order))*time.Millisecond), key, limit); err != nil {
				t.Fatal(err)
			}
			ids, order = append(ids, id), append(order, id)
		}
		return ids
	}
	a, b := "a", "b"
	burst := add(20, &a)
	add(1, &b)
	unkeyed := add(2, nil)

	res, err := store.Claim(ctx, ports.Fence{}, 2, dispatch.PlanClaim(func(ws []ports.ClaimableWorkspace, _ int) map[domain.ID]int {
		return map[domain.ID]int{ws[0].ID: 2}
	}), dispatch.RejectUnrunnable)
	if err != nil {
		t.Fatal(err)
	}
	var got []uuid.UUID
	for _, c := range res.Claimed {
		got = append(got, uuid.UUID(c.ID))
	}
	want := []uuid.UUID{burst[0], unkeyed[0]}
	slices.SortFunc(got, func(x, y uuid.UUID) int { return slices.Index(order, x) - slices.Index(order, y) })
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want the burst's first item and the first item without a key %v", got, want)
	}
}
