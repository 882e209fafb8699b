package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
)

// TestAPipelineHandsEachCallItsOwnResultInOrder: the calls' statements
// run one after another in the transaction, each seeing what the one
// before it wrote, and each call reads its own answer; the first
// statement's error is the one returned, not the aborted transaction's
// that follows it; a call that makes no statement, or two, is refused
// before anything is sent.
func TestAPipelineHandsEachCallItsOwnResultInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var before, after int
	var tag string
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE TEMP TABLE piped (n int) ON COMMIT DROP"); err != nil {
			return err
		}
		return postgres.Pipeline(ctx, tx,
			func(db dbsqlc.DBTX) error { return db.QueryRow(ctx, "SELECT count(*) FROM piped").Scan(&before) },
			func(db dbsqlc.DBTX) error {
				ct, err := db.Exec(ctx, "INSERT INTO piped VALUES ($1), ($2)", 1, 2)
				tag = ct.String()
				return err
			},
			func(db dbsqlc.DBTX) error {
				rows, err := db.Query(ctx, "SELECT n FROM piped ORDER BY n")
				if err != nil {
					return err
				}
				ns, err := pgx.CollectRows(rows, pgx.RowTo[int])
				after = len(ns)
				return err
			})
	})
	if err != nil {
		t.Fatal(err)
	}
	if before != 0 || tag != "INSERT 0 2" || after != 2 {
		t.Fatalf("pipeline answered before=%d, insert %q, after=%d; want 0, INSERT 0 2, 2", before, tag, after)
	}

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var n int
		return postgres.Pipeline(ctx, tx,
			func(db dbsqlc.DBTX) error { return db.QueryRow(ctx, "SELECT 1 / $1::int", 0).Scan(&n) },
			func(db dbsqlc.DBTX) error { return db.QueryRow(ctx, "SELECT 2").Scan(&n) })
	})
	if err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Fatalf("a failing first statement: got %v, want its division by zero", err)
	}

	for name, call := range map[string]func(db dbsqlc.DBTX) error{
		"none": func(dbsqlc.DBTX) error { return nil },
		"two": func(db dbsqlc.DBTX) error {
			_, _ = db.Exec(ctx, "SELECT 1")
			_, err := db.Exec(ctx, "SELECT 2")
			return err
		},
	} {
		sent := false
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return postgres.Pipeline(ctx, tx, call, func(db dbsqlc.DBTX) error {
				_, err := db.Exec(ctx, "SELECT 3")
				sent = err == nil
				return err
			})
		})
		if err == nil || sent {
			t.Fatalf("a call making %s statements: got %v (the other sent: %v), want a refusal before sending", name, err, sent)
		}
	}
}
