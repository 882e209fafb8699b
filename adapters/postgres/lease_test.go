package postgres_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/ports/porttest"
)

func TestLeaseKeepsTheLeaseContract(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	porttest.Lease(t, func(*testing.T) porttest.LeaseFixture {
		return porttest.LeaseFixture{
			One: postgres.NewLease(pool, "one"), Two: postgres.NewLease(pool, "two"),
			Expire: func(t *testing.T, name string) {
				if _, err := pool.Exec(context.Background(), `UPDATE shedlock SET lock_until = now() - interval '1 millisecond' WHERE name = $1`, name); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}
