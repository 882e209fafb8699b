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

// rateBucket is a bucket as a claim read it, with the rate it is read by.
type rateBucket struct {
	rate domain.StartRate
	tat  time.Time
}

// claimRates are the start-rate buckets of one claim's locked workspaces
// and of the rated keys in its window, read under the workspaces' locks,
// and the database's now(), by which every bucket is read and written.
type claimRates struct {
	now     time.Time
	buckets map[bucketID]*rateBucket
}

// readStartRates reads the locked workspaces' rates in force (after
// AdmissionLimitsReadLock) and their buckets.
func (s *Store) readStartRates(ctx context.Context, tx pgx.Tx, ids []domain.ID) (*claimRates, error) {
	r := &claimRates{buckets: map[bucketID]*rateBucket{}}
	if len(ids) == 0 {
		return r, nil
	}
	rows, err := s.q.StartRatesOfWorkspaces(ctx, tx, ids)
	if err != nil {
		return nil, fmt.Errorf("reading start rates: %w", err)
	}
	for _, row := range rows {
		r.now = row.Now
		if row.StartRate == 0 {
			continue
		}
		r.buckets[bucketID{workspace: row.WorkspaceID}] = &rateBucket{
			rate: domain.StartRate{Rate: int(row.StartRate), Per: domain.RatePeriod(row.StartRatePer), Burst: int(row.StartBurst)},
			tat:  row.Tat,
		}
	}
	return r, nil
}

// workspaceRoom is how many starts workspace ws's start rate allows now,
// and whether it has one.
func (r *claimRates) workspaceRoom(ws domain.ID) (int, bool) {
	b, ok := r.buckets[bucketID{workspace: ws}]
	if !ok {
		return 0, false
	}
	n, _ := b.rate.Allowed(b.tat, r.now, domain.StartRateMax)
	return n, true
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
		r.buckets[id] = &rateBucket{
			rate: domain.StartRate{Rate: int(row.ConcurrencyRate), Per: domain.RatePeriod(row.ConcurrencyRatePer), Burst: int(row.ConcurrencyBurst)},
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
		r.buckets[bucketID{workspace: b.WorkspaceID, key: b.ConcurrencyKey}].tat = b.Tat
	}
	return nil
}

// keyRoom is how many starts key's rate allows now in workspace ws, and
// whether it has a rate.
func (r *claimRates) keyRoom(ws domain.ID, key string) (int, bool) {
	if key == "" {
		return 0, false
	}
	b, ok := r.buckets[bucketID{workspace: ws, key: key}]
	if !ok {
		return 0, false
	}
	n, _ := b.rate.Allowed(b.tat, r.now, domain.StartRateMax)
	return n, true
}

// due is how long until the next start a workspace's bucket holds back
// (by its rate in force), 0 when none is held back.
func (r *claimRates) due() time.Duration {
	var soonest time.Duration
	for id, b := range r.buckets {
		if id.key != "" {
			continue
		}
		if _, next := b.rate.Allowed(b.tat, r.now, 0); next.After(r.now) {
			if d := next.Sub(r.now); soonest == 0 || d < soonest {
				soonest = d
			}
		}
	}
	return soonest
}

// take writes the buckets the claimed items took from (their workspace's
// and their key's, one start each) and those whose TAT a raised rate
// capped, then, when it met any rate, sweeps buckets at rest.
func (r *claimRates) take(ctx context.Context, q *dbsqlc.Queries, tx pgx.Tx, claimed []ports.ClaimedItem) error {
	counts := map[bucketID]int{}
	for _, c := range claimed {
		if id := (bucketID{workspace: c.WorkspaceID}); r.buckets[id] != nil {
			counts[id]++
		}
		if id := (bucketID{workspace: c.WorkspaceID, key: c.ConcurrencyKey}); c.ConcurrencyKey != "" && r.buckets[id] != nil {
			counts[id]++
		}
	}
	var p dbsqlc.StartRateBucketsSetParams
	for id, b := range r.buckets {
		n := counts[id]
		tat := b.rate.Take(b.tat, r.now, n)
		// A bucket nothing started from is written only when its TAT was
		// past what its rate allows (a rate since raised), so that the
		// capped TAT ages from here (StartRate.Take).
		if n == 0 && !(b.tat.After(tat) && tat.After(r.now)) {
			continue
		}
		b.tat = tat
		_, next := b.rate.Allowed(tat, r.now, 0)
		p.WorkspaceIds, p.Keys = append(p.WorkspaceIds, id.workspace), append(p.Keys, id.key)
		p.Tats, p.NextAts = append(p.Tats, tat), append(p.NextAts, next)
	}
	if len(p.Keys) > 0 {
		if err := q.StartRateBucketsSet(ctx, tx, p); err != nil {
			return fmt.Errorf("writing start rates: %w", err)
		}
	}
	if len(r.buckets) == 0 {
		// A claim that met no rate leaves the sweep to those that do, so
		// rates cost nothing where none is set.
		return nil
	}
	if err := q.StartRateBucketsSweep(ctx, tx); err != nil {
		return fmt.Errorf("sweeping start rates at rest: %w", err)
	}
	return nil
}

// waitRates adds to f the workspace's start rate and when its bucket and
// each of keys' next let a start go. A workspace gone has none.
func (s *Store) waitRates(ctx context.Context, workspaceID domain.ID, keys []string, f *domain.WaitFigures) error {
	r, err := s.q.QueueWaitRates(ctx, s.pool, dbsqlc.QueueWaitRatesParams{WorkspaceID: workspaceID, Keys: keys})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.StartRate > 0 {
		f.WorkspaceRate = &domain.StartRate{Rate: int(r.StartRate), Per: domain.RatePeriod(r.StartRatePer), Burst: int(r.StartBurst)}
		f.WorkspaceRateNext = r.NextAt
	}
	f.KeyRateNext = make(map[string]time.Time, len(keys))
	for i, k := range keys {
		if i < len(r.KeyNextAts) {
			f.KeyRateNext[k] = r.KeyNextAts[i]
		}
	}
	return nil
}
