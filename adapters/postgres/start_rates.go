package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// bucketID names a start-rate bucket: a workspace's (key "") or one of
// its concurrency keys'.
type bucketID struct {
	workspace domain.ID
	key       string
}

// claimRates are the start-rate buckets of one claim's locked workspaces
// and of the rated keys in its window, read under the workspaces' locks,
// and the database's now(), at which the claim's plan reads them.
type claimRates struct {
	now     time.Time
	buckets map[bucketID]*domain.RateBucket
}

// readStartRates reads the rates in force (after AdmissionLimitsReadLock)
// of the workspaces ids and their buckets.
func (s *Store) readStartRates(ctx context.Context, db dbsqlc.DBTX, ids []domain.ID) (*claimRates, error) {
	r := &claimRates{buckets: map[bucketID]*domain.RateBucket{}}
	rows, err := s.q.StartRatesOfWorkspaces(ctx, db, ids)
	if err != nil {
		return nil, fmt.Errorf("reading start rates: %w", err)
	}
	for _, row := range rows {
		r.now = row.Now
		if row.StartRate == 0 {
			continue
		}
		b := &domain.RateBucket{Rate: domain.StartRate{Rate: int(row.StartRate), Per: domain.RatePeriod(row.StartRatePer), Burst: int(row.StartBurst)}}
		if row.Tat != nil {
			b.TAT = *row.Tat
		}
		r.buckets[bucketID{workspace: row.WorkspaceID}] = b
	}
	return r, nil
}

// keepWorkspaces drops the buckets of the workspaces not in locked, read
// beside those the claim locked.
func (r *claimRates) keepWorkspaces(locked map[domain.ID]int) {
	for id := range r.buckets {
		if _, ok := locked[id.workspace]; !ok {
			delete(r.buckets, id)
		}
	}
}

// bucket is the bucket id as read, nil when it has no rate.
func (r *claimRates) bucket(id bucketID) *domain.RateBucket {
	b, ok := r.buckets[id]
	if !ok {
		return nil
	}
	read := *b
	return &read
}

// readKeys reads the buckets of the rated keys in the claim's window. A
// key's rate is the one stored on its first item in the window (items
// enqueued before a definition's edit keep the rate they were enqueued
// with; the first in claim order speaks for the key).
func (r *claimRates) readKeys(ctx context.Context, q *dbsqlc.Queries, tx pgx.Tx, rows []dbsqlc.QueueAdmissibleWindowRow) error {
	var p dbsqlc.StartRateKeyBucketsParams
	for _, row := range rows {
		id := bucketID{workspace: row.WorkspaceID, key: row.ConcurrencyKey}
		if row.ConcurrencyRate == 0 || r.buckets[id] != nil {
			continue
		}
		r.buckets[id] = &domain.RateBucket{
			Rate: domain.StartRate{Rate: int(row.ConcurrencyRate), Per: domain.RatePeriod(row.ConcurrencyRatePer), Burst: int(row.ConcurrencyBurst)},
		}
		p.WorkspaceIds, p.Keys = append(p.WorkspaceIds, id.workspace), append(p.Keys, id.key)
	}
	if len(p.Keys) == 0 {
		return nil
	}
	stored, err := q.StartRateKeyBuckets(ctx, tx, p)
	if err != nil {
		return fmt.Errorf("reading key start rates: %w", err)
	}
	for _, b := range stored {
		r.buckets[bucketID{workspace: b.WorkspaceID, key: b.ConcurrencyKey}].TAT = b.Tat
	}
	return nil
}

// write writes, in one round trip, when the buckets let the items they
// held back go and the buckets the plan changed (ports.ClaimPlan.Started)
// then, when the claim met any rate, sweeps buckets at rest.
func (r *claimRates) write(ctx context.Context, q *dbsqlc.Queries, tx pgx.Tx, taken ports.RatesTaken) error {
	if len(r.buckets) == 0 {
		// A claim that met no rate has nothing to write, and leaves the
		// sweep to those that do, so rates cost nothing where none is set.
		return nil
	}
	var calls []func(db dbsqlc.DBTX) error
	if len(taken.RateAllowedAt) > 0 {
		var p dbsqlc.AdmissionWaitsRateAllowedParams
		for id, at := range taken.RateAllowedAt {
			p.ExecutionIds, p.AllowedAts = append(p.ExecutionIds, id), append(p.AllowedAts, at)
		}
		calls = append(calls, func(db dbsqlc.DBTX) error {
			if err := q.AdmissionWaitsRateAllowed(ctx, db, p); err != nil {
				return fmt.Errorf("writing when start rates let items go: %w", err)
			}
			return nil
		})
	}
	if len(taken.Writes) > 0 {
		var p dbsqlc.StartRateBucketsSetParams
		for _, w := range taken.Writes {
			p.WorkspaceIds, p.Keys = append(p.WorkspaceIds, w.Workspace), append(p.Keys, w.Key)
			p.Tats, p.NextAts = append(p.Tats, w.TAT), append(p.NextAts, w.NextAt)
		}
		calls = append(calls, func(db dbsqlc.DBTX) error {
			if err := q.StartRateBucketsSet(ctx, db, p); err != nil {
				return fmt.Errorf("writing start rates: %w", err)
			}
			return nil
		})
	}
	calls = append(calls, func(db dbsqlc.DBTX) error {
		if err := q.StartRateBucketsSweep(ctx, db); err != nil {
			return fmt.Errorf("sweeping start rates at rest: %w", err)
		}
		return nil
	})
	return pipeline(ctx, tx, calls...)
}

// waitRates adds to f the workspace's start-rate bucket and each of
// keys' TAT, as the claim reads them. A workspace gone has none.
func (s *Store) waitRates(ctx context.Context, workspaceID domain.ID, keys []string, f *domain.WaitFigures) error {
	r, err := s.q.QueueWaitRates(ctx, s.pool, dbsqlc.QueueWaitRatesParams{WorkspaceID: workspaceID, Keys: keys})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.StartRate > 0 {
		f.WorkspaceRate = &domain.RateBucket{
			Rate: domain.StartRate{Rate: int(r.StartRate), Per: domain.RatePeriod(r.StartRatePer), Burst: int(r.StartBurst)},
			TAT:  r.Tat,
		}
	}
	f.KeyTAT = make(map[string]time.Time, len(keys))
	for i, k := range keys {
		if i < len(r.KeyTats) {
			f.KeyTAT[k] = r.KeyTats[i]
		}
	}
	return nil
}
