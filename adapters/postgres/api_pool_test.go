package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
)

// TestTheAPIPoolCancelsSlowStatementsAndHasItsOwnSize: a statement on the
// API's pool that runs past its statement timeout is cancelled by the
// server (SQLSTATE 57014), and the pool has the configured connections.
func TestTheAPIPoolCancelsSlowStatementsAndHasItsOwnSize(t *testing.T) {
	t.Parallel()
	cfg, err := postgres.APIPoolConfig(pgtest.URL(t), 3, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool, err := postgres.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if got := pool.Config().MaxConns; got != 3 {
		t.Errorf("MaxConns %d, want 3", got)
	}
	began := time.Now()
	_, err = pool.Exec(ctx, "SELECT pg_sleep(5)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("a 5 s statement ended with %v, want query_canceled (57014)", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("the statement was cancelled after %s, want about 100ms", took)
	}
}
