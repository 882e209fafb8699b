-- name: StartRatesOfWorkspaces :many
-- Each locked workspace's start rate in force (its own, else its plan's;
-- rate 0 is none) and its bucket's theoretical arrival time (NULL for a
-- bucket at rest, with no row), with the database's clock, which is the
-- only clock the buckets are read and written by. Run after AdmissionLimitsReadLock, under the workspaces'
-- admission locks, so the rate is the one in force and the bucket is
-- this claim's alone until commit.
SELECT w.id AS workspace_id,
       coalesce(CASE WHEN o.start_rate IS NOT NULL THEN o.start_rate ELSE p.start_rate END, 0)::int AS start_rate,
       coalesce(CASE WHEN o.start_rate IS NOT NULL THEN o.start_rate_per ELSE p.start_rate_per END, '')::text AS start_rate_per,
       coalesce(CASE WHEN o.start_rate IS NOT NULL THEN o.start_burst ELSE p.start_burst END, 0)::int AS start_burst,
       b.tat,
       now()::timestamptz AS now
FROM workspaces w
JOIN plans p ON p.name = w.plan
LEFT JOIN workspace_limits o ON o.workspace_id = w.id
LEFT JOIN start_rate_buckets b ON b.workspace_id = w.id AND b.concurrency_key = ''
WHERE w.id = ANY(@workspace_ids::uuid[]);

-- name: StartRateKeyBuckets :many
-- The buckets of the rated keys a claim's window holds, by (workspace,
-- key) pairs; a key without a row is at rest.
SELECT b.workspace_id, b.concurrency_key, b.tat
FROM start_rate_buckets b
JOIN (SELECT unnest(@workspace_ids::uuid[]) AS workspace_id, unnest(@keys::text[]) AS concurrency_key) k
  ON k.workspace_id = b.workspace_id AND k.concurrency_key = b.concurrency_key;

-- name: StartRateBucketsSet :exec
-- Writes the buckets a claim took starts from, in its transaction: the
-- workspace's (key '') and its keys', each under its workspace's lock.
INSERT INTO start_rate_buckets (workspace_id, concurrency_key, tat, next_at)
SELECT unnest(@workspace_ids::uuid[]), unnest(@keys::text[]), unnest(@tats::timestamptz[]), unnest(@next_ats::timestamptz[])
ON CONFLICT (workspace_id, concurrency_key) DO UPDATE SET tat = EXCLUDED.tat, next_at = EXCLUDED.next_at;

-- name: StartRateBucketsSweep :exec
-- Deletes up to 64 buckets at rest (tat passed) of any workspace, oldest
-- first, one range of start_rate_buckets_tat_idx: such a bucket reads as
-- no row, so this changes no rate, and run by every claim it keeps the
-- table to the buckets in use. SKIP LOCKED: a bucket another claim is
-- rewriting is left to a later sweep, so no claim waits here. A claim that
-- read a bucket this deletes writes it back whole (ON CONFLICT or not).
DELETE FROM start_rate_buckets b
WHERE (b.workspace_id, b.concurrency_key) IN (
    SELECT s.workspace_id, s.concurrency_key FROM start_rate_buckets s
    WHERE s.tat < now() ORDER BY s.tat LIMIT 64 FOR UPDATE SKIP LOCKED);

-- name: ClaimNextDue :one
-- How long until something among the workspaces a claim locked may go
-- that cannot go now: a key's start-rate bucket's next start, or a
-- delayed item's available_at (one probe of
-- workflow_execution_queue_due_idx per workspace). 0 when nothing is
-- due later; the dispatcher then sleeps until a wake-up or its poll. The
-- workspaces' own buckets are left to the claim, which knows their rates
-- in force (a stored next_at may be a rate's since raised).
SELECT coalesce(extract(epoch FROM least(
           (SELECT min(b.next_at) FROM start_rate_buckets b
            WHERE b.workspace_id = ANY(@workspace_ids::uuid[]) AND b.concurrency_key <> '' AND b.next_at > now()),
           (SELECT min(d.available_at) FROM unnest(@workspace_ids::uuid[]) AS w(id)
            CROSS JOIN LATERAL (
                SELECT i.available_at FROM workflow_execution_queue i
                WHERE i.workspace_id = w.id AND i.status = 'PENDING' AND i.available_at > now()
                ORDER BY i.available_at LIMIT 1) d)
       ) - now()), 0)::float8 AS due_in_seconds;

-- name: QueueWaitRates :one
-- What a page of one workspace's items may wait on by rate: the
-- workspace's start rate in force (rate 0: none), its bucket's
-- theoretical arrival time, and the same for each key asked for ('epoch'
-- for a bucket at rest): the figures the claim decides from. One primary-key probe of start_rate_buckets each.
SELECT coalesce(CASE WHEN o.start_rate IS NOT NULL THEN o.start_rate ELSE p.start_rate END, 0)::int AS start_rate,
       coalesce(CASE WHEN o.start_rate IS NOT NULL THEN o.start_rate_per ELSE p.start_rate_per END, '')::text AS start_rate_per,
       coalesce(CASE WHEN o.start_rate IS NOT NULL THEN o.start_burst ELSE p.start_burst END, 0)::int AS start_burst,
       coalesce((SELECT b.tat FROM start_rate_buckets b WHERE b.workspace_id = w.id AND b.concurrency_key = ''),
                'epoch'::timestamptz)::timestamptz AS tat,
       coalesce((SELECT array_agg(coalesce(b.tat, 'epoch'::timestamptz) ORDER BY u.ord)
                 FROM unnest(@keys::text[]) WITH ORDINALITY AS u(key, ord)
                 LEFT JOIN start_rate_buckets b ON b.workspace_id = w.id AND b.concurrency_key = u.key),
                '{}')::timestamptz[] AS key_tats
FROM workspaces w
JOIN plans p ON p.name = w.plan
LEFT JOIN workspace_limits o ON o.workspace_id = w.id
WHERE w.id = @workspace_id;

-- name: AdmissionWaitsRateAllowed :exec
-- Writes, for the executions a claim started that a start rate of their
-- own held back, when those rates let each go (ports.RatesTaken), into the
-- admission_waits rows the claim's executions wrote: their admission
-- waits are counted from no earlier (queue_admission_wait_ms).
UPDATE admission_waits a SET rate_allowed_at = r.allowed_at
FROM (SELECT unnest(@execution_ids::uuid[]) AS execution_id, unnest(@allowed_ats::timestamptz[]) AS allowed_at) r
WHERE a.execution_id = r.execution_id;
