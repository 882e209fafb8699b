package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/ports"
)

// Lease implements ShedLock's lease on the shedlock table, timed by the
// database's clock so that skewed hosts agree.
type Lease struct {
	pool   *pgxpool.Pool
	q      *dbsqlc.Queries
	holder string
}

var _ ports.Lease = (*Lease)(nil)

// NewLease builds a lease client; holder names this process in locked_by
// and must be unique per process.
func NewLease(pool *pgxpool.Pool, holder string) *Lease {
	return &Lease{pool: pool, q: dbsqlc.New(), holder: holder}
}

// Holder names this process in locked_by.
func (l *Lease) Holder() string { return l.holder }

// TryAcquire takes the lease if free or expired, or extends our own, and
// returns its term.
func (l *Lease) TryAcquire(ctx context.Context, name string, atMostFor time.Duration) (time.Time, bool, error) {
	term, err := l.q.LeaseAcquire(ctx, l.pool, dbsqlc.LeaseAcquireParams{Name: name, LockAtMostForSeconds: atMostFor.Seconds(), LockedBy: l.holder})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return term, true, nil
}

// Release keeps the lease until atLeastFor after it was taken.
func (l *Lease) Release(ctx context.Context, name string, atLeastFor time.Duration) error {
	return l.q.LeaseRelease(ctx, l.pool, dbsqlc.LeaseReleaseParams{Name: name, LockAtLeastForSeconds: atLeastFor.Seconds(), LockedBy: l.holder})
}
