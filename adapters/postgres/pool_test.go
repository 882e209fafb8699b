package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
)

// TestAListenerHoldsNoConnectionOfItsPool: a listener in LISTEN leaves
// every connection of its pool to the process's statements, here the one
// connection of a pool of one, and still hears the NOTIFY sent on it.
// Before, it held a pooled connection for as long as it listened.
func TestAListenerHoldsNoConnectionOfItsPool(t *testing.T) {
	t.Parallel()
	cfg, err := postgres.PoolConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := postgres.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	listener := postgres.NewListener(pool, quiet())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		listener.Run(ctx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	heard := func(what string) {
		t.Helper()
		select {
		case <-listener.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("the listener gave no wake-up for %s within 10 s", what)
		}
	}
	heard("its LISTEN") // it signals once it listens

	stmt, stmtCancel := context.WithTimeout(ctx, 5*time.Second)
	defer stmtCancel()
	if _, err := pool.Exec(stmt, "SELECT pg_notify($1, '')", postgres.QueueChannel); err != nil {
		t.Fatalf("a statement on the pool beside the listener: %v; want it run on the pool's one connection", err)
	}
	heard("the NOTIFY")
	if st := pool.Stat(); st.TotalConns() != 1 || st.AcquiredConns() != 0 {
		t.Errorf("the pool has %d connections, %d acquired; want its one connection, idle", st.TotalConns(), st.AcquiredConns())
	}
}

// TestAProcesssPoolHoldsPoolMaxConnsUnlessTheURLSizesIt: pgx's default
// (4 on two cores) is not the pool's size; pool_max_conns in the URL is.
func TestAProcesssPoolHoldsPoolMaxConnsUnlessTheURLSizesIt(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]int32{
		"postgres://sluice@db.internal:5432/sluice?sslmode=disable":                  postgres.PoolMaxConns,
		"postgres://sluice@db.internal:5432/sluice?sslmode=disable&pool_max_conns=3": 3,
		"host=db.internal user=sluice dbname=sluice pool_max_conns=40":               40,
	} {
		cfg, err := postgres.PoolConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxConns != want {
			t.Errorf("%s: MaxConns %d, want %d", url, cfg.MaxConns, want)
		}
	}
}

// TestFloorInForceIsTheDomainsInSQL holds the SQL function the pool's and
// the capacity series' statements sum floors by (floor_in_force,
// migration 00047) to domain.FloorInForce, which the planner and the
// verdicts use, over every floor and limit from 0 to 8: the rule is the
// domain's, and SQL only repeats it where it sums over many workspaces.
func TestFloorInForceIsTheDomainsInSQL(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	rows, err := pool.Query(context.Background(), `SELECT f, l, floor_in_force(f, l) FROM generate_series(0, 8) f, generate_series(0, 8) l`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var floor, limit, inForce int
		if err := rows.Scan(&floor, &limit, &inForce); err != nil {
			t.Fatal(err)
		}
		if want := domain.FloorInForce(floor, limit); inForce != want {
			t.Errorf("floor_in_force(%d, %d) = %d; domain.FloorInForce says %d", floor, limit, inForce, want)
		}
		n++
	}
	if err := rows.Err(); err != nil || n != 81 {
		t.Fatalf("compared %d pairs (%v); want 81", n, err)
	}
}
