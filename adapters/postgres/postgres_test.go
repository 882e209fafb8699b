package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
)

// TestTheEnqueueRunsOnCachedPlansAndTheClaimPlansEachStatement: on one
// connection, the enqueue's statements settle on Postgres' cached generic
// plans after its first few runs (cachedPlans), while the claim's are
// planned afresh on every run, as the pool's connections plan every
// statement outside such transactions; the connection is back to that
// after each.
func TestTheEnqueueRunsOnCachedPlansAndTheClaimPlansEachStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := postgres.PoolConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // one session, whose prepared statements the view lists
	pool, err := postgres.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := postgres.NewStore(pool, quiet())
	ws, def := createWorkspace(t, store, domain.PlanEnterprise)
	const runs = 10
	for range runs {
		enqueue(t, store, ws, def, 1)
		if res := claimAll(t, store); len(res.Claimed) != 1 {
			t.Fatalf("claimed %d items, want 1", len(res.Claimed))
		}
	}

	plans := func(name string) (generic, custom int64) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE $1`,
			"-- name: "+name+" %").Scan(&generic, &custom)
		if err != nil {
			t.Fatalf("plans of %s: %v", name, err)
		}
		return generic, custom
	}
	if g, c := plans("QueuePendingLockCount"); g == 0 || c > 5 {
		t.Errorf("the enqueue's QueuePendingLockCount: %d generic and %d custom plans in %d runs, want generic ones after at most 5 custom", g, c, runs)
	}
	if g, c := plans("QueueClaimCandidates"); g != 0 || c < runs {
		t.Errorf("the claim's QueueClaimCandidates: %d generic and %d custom plans in %d runs, want every run planned", g, c, runs)
	}
	var mode string
	if err := pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(mode, "force_custom_plan") {
		t.Errorf("after the transactions the connection's plan_cache_mode is %s, want force_custom_plan", mode)
	}
}
