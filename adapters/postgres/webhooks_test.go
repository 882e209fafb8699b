package postgres_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
)

// createEndpoint registers an endpoint of ws that takes every event.
func createEndpoint(t *testing.T, store *postgres.Store, ws domain.ID) domain.ID {
	t.Helper()
	e, err := store.CreateWebhookEndpoint(context.Background(), domain.WebhookEndpoint{
		ID: domain.ID(uuid.New()), WorkspaceID: ws, URL: "https://hooks.example/" + uuid.NewString(),
		Events: domain.WebhookEvents(), Secret: "whsec_test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// addDueDeliveries stores n PENDING deliveries of endpoint, all due.
func addDueDeliveries(t *testing.T, pool *pgxpool.Pool, endpoint, ws domain.ID, n int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO webhook_deliveries (id, endpoint_id, workspace_id, execution_id, event_type, payload, next_attempt_at)
		SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), 'execution.completed', '{}', now() - interval '1 hour' + g * interval '1 ms'
		FROM generate_series(1, $3::int) g`, endpoint, ws, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `ANALYZE webhook_deliveries`); err != nil {
		t.Fatal(err)
	}
}

// fastestClaim is the shortest of rounds claims, each of one workspace's
// share (4) of due deliveries: the least the claim costs, whatever else
// the machine is doing.
func fastestClaim(t *testing.T, store *postgres.Store, rounds int) time.Duration {
	t.Helper()
	best := time.Hour
	for range rounds {
		start := time.Now()
		claimed, err := store.ClaimWebhookDeliveries(context.Background(), 32, 4, nil, time.Hour)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 4 {
			t.Fatalf("claimed %d deliveries, want the workspace's share of 4", len(claimed))
		}
		best = min(best, took)
	}
	return best
}

// TestTheDeliveryClaimCostsTheSameBehind100OrBehind100000: a claim of a
// workspace's share of due deliveries takes about as long with 100,000
// waiting as with 100, since it reads each waiting workspace's oldest
// few from an index instead of sorting every due row. The figures are
// the fastest of several claims, so a busy machine slows both alike.
func TestTheDeliveryClaimCostsTheSameBehind100OrBehind100000(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet(), postgres.WithWebhookSecretKeys(webhookKeys(t, "current", "")))
	ws, _ := createWorkspace(t, store, domain.PlanEnterprise)
	endpoint := createEndpoint(t, store, ws)

	addDueDeliveries(t, pool, endpoint, ws, 100)
	small := fastestClaim(t, store, 10)
	addDueDeliveries(t, pool, endpoint, ws, 100_000-100)
	large := fastestClaim(t, store, 10)
	t.Logf("claim of 4 due deliveries: %s behind 100, %s behind 100,000 (ratio %.1f)", small, large, float64(large)/float64(small))
	if large > 5*small+20*time.Millisecond {
		t.Fatalf("a claim behind 100,000 took %s against %s behind 100: its cost grows with the backlog", large, small)
	}
}

// claimQuery is WebhookDeliveriesClaim as db/queries/webhooks.sql writes
// it, its parameters replaced by a claim of 32 with a share of 4 and
// nothing busy, for EXPLAIN.
func claimQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../db/queries/webhooks.sql")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "-- name: WebhookDeliveriesClaim ")
	if start < 0 {
		t.Fatal("no WebhookDeliveriesClaim in db/queries/webhooks.sql")
	}
	s = s[start+1:]
	s = s[strings.Index(s, "\nWITH"):strings.Index(s, "-- name:")]
	return strings.NewReplacer("@busy_workspace_ids::uuid[]", "'{}'::uuid[]", "@busy_counts::int[]", "'{}'::int[]",
		"@per_workspace::int", "4", "@max_rows", "32", "@lease_seconds::float8", "60").Replace(s)
}

// planNode is one node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	ActualRows   float64    `json:"Actual Rows"`
	ActualLoops  float64    `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
}

// TestTheDeliveryClaimPlanReadsAFewRowsBehind100000: behind 100,000 due
// deliveries of one workspace, EXPLAIN ANALYZE of the claim shows no
// sequential scan of the deliveries and no plan node that handles more
// than 100 rows: it reads the workspace's oldest few from the pending
// index, whatever waits behind them.
func TestTheDeliveryClaimPlanReadsAFewRowsBehind100000(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet(), postgres.WithWebhookSecretKeys(webhookKeys(t, "current", "")))
	ws, _ := createWorkspace(t, store, domain.PlanEnterprise)
	addDueDeliveries(t, pool, createEndpoint(t, store, ws), ws, 100_000)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+claimQuery(t)).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var most float64
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.NodeType == "Seq Scan" && n.RelationName == "webhook_deliveries" {
			t.Errorf("the claim scans webhook_deliveries whole")
		}
		most = max(most, n.ActualRows*n.ActualLoops)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(out[0].Plan)
	t.Logf("behind 100,000 due deliveries, the claim's busiest plan node handles %.0f rows", most)
	if most > 100 {
		t.Errorf("a plan node of the claim handles %.0f rows behind 100,000 due: its cost grows with the backlog", most)
	}
}

// TestAWorkspacesWebhookDeliveriesStopAtTheirBoundAndTheDropsAreCounted:
// with a bound of 5 PENDING deliveries (6 stored), a workspace with two
// endpoints whose runs end 4 times (8 deliveries asked for, 2 ends at a
// time) keeps exactly 5; the 3 left out are counted on their endpoints
// and in the drops metric; another workspace is untouched by it. With
// one of them FAILED and a fifth end filling the PENDING bound again, a
// resend of the FAILED one is refused naming the bound.
func TestAWorkspacesWebhookDeliveriesStopAtTheirBoundAndTheDropsAreCounted(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	store := postgres.NewStore(pool, quiet(), postgres.WithWebhookDeliveryBound(domain.WebhookDeliveryBound{Stored: 6, Pending: 5}, dropped),
		postgres.WithWebhookSecretKeys(webhookKeys(t, "current", "")))
	ctx := context.Background()
	ws, def := createWorkspace(t, store, domain.PlanEnterprise)
	first, second := createEndpoint(t, store, ws), createEndpoint(t, store, ws)
	other, otherDef := createWorkspace(t, store, domain.PlanEnterprise)
	otherEndpoint := createEndpoint(t, store, other)

	enqueue(t, store, ws, def, 4)
	enqueue(t, store, other, otherDef, 1)
	res := claimAndDispatch(t, store)
	if len(res.Claimed) != 5 {
		t.Fatalf("claimed %d items, want 5", len(res.Claimed))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(res.Claimed))
	for pair := range slices.Chunk(res.Claimed, 2) {
		wg.Go(func() {
			for _, it := range pair {
				if _, err := finish(ctx, store, it.ExecutionID, domain.ExecutionCompleted, nil); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	count := func(ws domain.ID) int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(ws); n != 5 {
		t.Errorf("the workspace stores %d deliveries, want its bound of 5", n)
	}
	if n := count(other); n != 1 {
		t.Errorf("the other workspace stores %d deliveries, want its 1", n)
	}
	var drops int64
	for _, id := range []domain.ID{first, second, otherEndpoint} {
		e, err := store.GetWebhookEndpoint(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		drops += e.DeliveriesDropped
		if id == otherEndpoint && e.DeliveriesDropped != 0 {
			t.Errorf("the other workspace's endpoint counts %d drops, want none", e.DeliveriesDropped)
		}
		if e.DeliveriesDropped > 0 && e.LastDroppedAt == nil {
			t.Errorf("endpoint %s counts drops but no time of the last", id)
		}
	}
	if drops != 3 {
		t.Errorf("the endpoints count %d drops, want 3 (8 asked for, 5 kept)", drops)
	}
	if got := testutil.ToFloat64(dropped); got != 3 {
		t.Errorf("the drops metric is %v, want 3", got)
	}

	var failed domain.ID
	if err := pool.QueryRow(ctx, `UPDATE webhook_deliveries SET status = 'FAILED' WHERE id = (
		SELECT id FROM webhook_deliveries WHERE workspace_id = $1 LIMIT 1) RETURNING id`, ws).Scan(&failed); err != nil {
		t.Fatal(err)
	}
	enqueue(t, store, ws, def, 1)
	fifth := claimAndDispatch(t, store)
	if _, err := finish(ctx, store, fifth.Claimed[0].ExecutionID, domain.ExecutionCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if n := count(ws); n != 6 {
		t.Errorf("after a fifth end the workspace stores %d deliveries, want 6 (one more PENDING)", n)
	}
	_, err := store.ResendWebhookDelivery(ctx, failed)
	var qe *domain.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "pending webhook deliveries" || qe.Limit != 5 {
		t.Fatalf("a resend with 5 PENDING: %v, want the pending webhook deliveries quota of 5", err)
	}
}
