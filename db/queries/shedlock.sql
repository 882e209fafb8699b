-- name: LeaseAcquire :one
-- ShedLock's own algorithm on database time: take the lease when it is free
-- or expired, or extend it when we already hold it. It returns the term,
-- locked_at, which an extension keeps only while the lease is unexpired:
-- a holder that renews its own expired lease starts a new term, since a
-- peer may already have settled the claims of the old one. No row means
-- another holder has the lease.
INSERT INTO shedlock (name, lock_until, locked_at, locked_by)
VALUES (@name, now() + make_interval(secs => @lock_at_most_for_seconds::float8), now(), @locked_by)
ON CONFLICT (name) DO UPDATE
SET lock_until = EXCLUDED.lock_until,
    locked_at = CASE WHEN shedlock.locked_by = EXCLUDED.locked_by AND shedlock.lock_until > now()
                     THEN shedlock.locked_at ELSE EXCLUDED.locked_at END,
    locked_by = EXCLUDED.locked_by
WHERE shedlock.lock_until <= now() OR shedlock.locked_by = EXCLUDED.locked_by
RETURNING locked_at;

-- name: LeaseRelease :exec
-- Releasing keeps the lease until lockAtLeastFor has passed since it was
-- taken, as ShedLock does, so instances with skewed schedules cannot run the
-- same job back to back.
UPDATE shedlock
SET lock_until = GREATEST(now(), locked_at + make_interval(secs => @lock_at_least_for_seconds::float8))
WHERE name = @name AND locked_by = @locked_by;

-- name: LeaseForgetExpired :execrows
-- Deletes the expired leases whose names start with @prefix: the
-- registration leases of dispatchers that are gone, one row per process
-- ever started otherwise. Deleting an expired one is safe at any time: its
-- term is over either way (its claims are settled as an ended term's),
-- and a dispatcher that comes back takes a new row, in a new term. A
-- renewal that commits first is seen by the recheck under the row lock.
DELETE FROM shedlock WHERE starts_with(name, @prefix::text) AND lock_until < now();

-- name: LeaseFence :one
-- Fences a lease holder's work: run inside the transaction that acts under
-- the lease, it finds the row only while this holder's lease is unexpired
-- (and, given a term, still in that term), and its share lock keeps anyone
-- from taking the lease over until that transaction ends. A holder that
-- was paused past its lease finds nothing and must not act. It returns the
-- term: locked_at, which stays put while the holder renews.
SELECT locked_at FROM shedlock
WHERE name = @name AND locked_by = @locked_by AND lock_until > now()
  AND (sqlc.narg(term)::timestamptz IS NULL OR locked_at = sqlc.narg(term)::timestamptz)
FOR SHARE;
