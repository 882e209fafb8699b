-- name: QueueInsert :one
-- available_at is the enqueue's notBefore on database time (never before
-- now()): the claim skips the item until then. schedule_id and
-- schedule_tick name the schedule tick a scheduled item was fired for.
-- retry_of and pinned_version are set by a retry from the failed node;
-- run_timeout_ms is the enqueue's own run deadline. concurrency_key and
-- concurrency_limit are the definition's key resolved over the input, and
-- concurrency_rate, _per and burst its key's start rate: an item keeps
-- the rate it was enqueued under.
INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, input, priority, trace_context,
                                      concurrency_key, concurrency_limit, concurrency_rate, concurrency_rate_per,
                                      concurrency_burst, available_at, schedule_id, schedule_tick,
                                      retry_of, pinned_version, run_timeout_ms)
VALUES (@id, @workspace_id, @workflow_definition_id, @input, @priority, sqlc.narg(trace_context),
        sqlc.narg(concurrency_key), sqlc.narg(concurrency_limit), sqlc.narg(concurrency_rate),
        sqlc.narg(concurrency_rate_per), sqlc.narg(concurrency_burst),
        greatest(now(), coalesce(sqlc.narg(not_before)::timestamptz, now())), sqlc.narg(schedule_id), sqlc.narg(schedule_tick),
        sqlc.narg(retry_of), sqlc.narg(pinned_version), sqlc.narg(run_timeout_ms))
RETURNING *;

-- name: QueueGet :one
SELECT * FROM workflow_execution_queue WHERE id = @id;

-- name: QueueList :many
-- A workspace's items in the order the claim takes them
-- (QueueClaimCandidates: priority, then age, then id), so the first page is
-- what runs next. Keyset paging on that triple: each page is a range of
-- workflow_execution_queue_list_idx, or of its status twin, and no sort.
-- The input (up to the request body's size per item) is not read: the
-- list does not return it.
SELECT id, workspace_id, workflow_definition_id, status, priority, created_at, available_at, claimed_at,
       dispatched_at, attempt_count, dispatch_failures, last_error, execution_id, concurrency_key, concurrency_limit,
       schedule_id, schedule_tick
FROM workflow_execution_queue
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
  AND (sqlc.narg(after_id)::uuid IS NULL
       OR (priority, created_at, id) > (sqlc.narg(after_priority)::smallint, sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY priority, created_at, id
LIMIT @max_rows;

-- name: QueueClaimableWorkspaces :many
-- The workspaces worth locking for admission: those whose counts in
-- workspace_queue_stats say they have pending work and fewer RUNNING
-- executions than their limit (their own, else their plan's, both read
-- from the plans tables), then those that no longer exist (plan ''),
-- whose pending items are to be failed. The cost follows the workspaces
-- with room, not every workspace with pending work (see the function in
-- 00010_plans_as_data.sql). Each comes with how long until its first
-- PENDING item is due (0 or less: one is due now), one probe of
-- workflow_execution_queue_due_idx each: a workspace whose items all wait
-- for a notBefore or a back-off is not locked at all (00023). The counts
-- are a prefilter only: admission locks each workspace and recounts under
-- the lock, which is what makes it exact. Each row carries the pool's
-- capacity in force (0: none), read after AdmissionLimitsReadLock, so the
-- claim needs no statement more to know whether to lock the pool; with
-- no row there is nothing to admit.
SELECT r.workspace_id::uuid AS workspace_id, coalesce(r.plan, '')::text AS plan,
       coalesce(extract(epoch FROM d.available_at - now()), 0)::float8 AS due_in_seconds,
       coalesce((SELECT p.capacity FROM pools p WHERE p.name = 'default'), 0)::int AS pool_capacity
FROM admission_workspaces_with_room() AS r
LEFT JOIN LATERAL (
    SELECT i.available_at FROM workflow_execution_queue i
    WHERE i.workspace_id = r.workspace_id AND i.status = 'PENDING'
    ORDER BY i.available_at
    LIMIT 1
) d ON true;

-- name: QueueClaimableWorkspacesUnfiltered :many
-- Every workspace with pending work, full or not and due or not, then
-- those that no longer exist (plan ''): QueueClaimableWorkspaces without its
-- prefilter, for a Store built WithoutRoomPrefilter, whose claims lock
-- them all and leave every decision to the plan's verdicts.
SELECT s.workspace_id::uuid AS workspace_id, coalesce(s.plan, '')::text AS plan,
       coalesce((SELECT p.capacity FROM pools p WHERE p.name = 'default'), 0)::int AS pool_capacity
FROM workspace_queue_stats s
WHERE s.has_pending;

-- name: AdmissionLimitsReadLock :exec
-- Taken by every claim before it reads a limit, shared; an edit of a limit
-- takes it exclusive until it commits (AdmissionLimitsWriteLock). So an
-- edit waits for the claims that may have read the old value, the claims
-- that start meanwhile wait for the edit, and once an edit has returned
-- no claim admits by what it replaced. Advisory locks queue in order, so
-- a stream of claims cannot starve an edit. The first key names this lock
-- among the database's advisory locks (see DefinitionCountsLock).
SELECT pg_advisory_xact_lock_shared(1936488037, 0);

-- name: AdmissionLimitsWriteLock :exec
SELECT pg_advisory_xact_lock(1936488037, 0);

-- name: QueueFailPendingOfWorkspaces :execrows
UPDATE workflow_execution_queue
SET status = 'FAILED', last_error = @last_error
WHERE workspace_id = ANY(@workspace_ids::uuid[]) AND status = 'PENDING'
  AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = workflow_execution_queue.workspace_id);

-- name: QueueStatsForgetGone :exec
-- Drops the counts of deleted workspaces once nothing is counted on them.
-- The row is locked and its counts rechecked, so an item that went back to
-- PENDING meanwhile keeps its row.
DELETE FROM workspace_queue_stats s
WHERE s.workspace_id = ANY(@workspace_ids::uuid[]) AND s.plan IS NULL AND s.pending = 0 AND s.running = 0
  AND NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = s.workspace_id);

-- name: QueueAdmissibleWindow :many
-- Up to n items of each locked workspace that may be claimed now, in
-- claim order (priority, then age), each with its key's RUNNING count: an
-- item whose key has no slot left (RUNNING, plus the items of its key
-- already in the window) is passed over, so it holds back no other key's
-- items, and a burst of one key's items does not fill the window. No row
-- is locked: only the holder of the workspace's lock claims its items,
-- and QueueClaimCandidates locks and rechecks the ones domain.ChooseKeyed
-- picks from this window. The walk is queue_admissible_window (migration
-- 00018): one probe of workflow_executions_key_running_idx per key met,
-- and one of start_rate_buckets per rated key met: an item whose key is
-- over its start rate is passed over too, and each row carries its key's
-- rate.
SELECT c.id::uuid AS id, w.id::uuid AS workspace_id, c.concurrency_key::text AS concurrency_key,
       c.concurrency_limit::int AS concurrency_limit, c.key_running::int AS key_running,
       c.concurrency_rate::int AS concurrency_rate, c.concurrency_rate_per::text AS concurrency_rate_per,
       c.concurrency_burst::int AS concurrency_burst
FROM (SELECT unnest(@workspace_ids::uuid[]) AS id, unnest(@windows::int[]) AS n) AS w
CROSS JOIN LATERAL queue_admissible_window(w.id, w.n) AS c;

-- name: QueueClaimCandidates :many
-- The chosen items, locked and still PENDING, in claim order. SKIP LOCKED
-- leaves an item a cancellation holds to it.
-- current_version is 0 when the definition is gone or deleted;
-- version_found is false when the current version's row is missing, which
-- fails that item alone instead of the executions' foreign key failing the
-- whole batch. A retry runs its pinned_version instead, looked up apart
-- (DefinitionVersionsFound) so that this join keeps its plan.
SELECT sqlc.embed(q),
       coalesce(d.current_version, 0)::int AS current_version,
       (v.version IS NOT NULL)::bool AS version_found
FROM (
    SELECT i.id FROM workflow_execution_queue i
    WHERE i.id = ANY(@ids::uuid[]) AND i.status = 'PENDING'
    ORDER BY i.priority, i.created_at, i.id
    FOR UPDATE SKIP LOCKED
) c
JOIN workflow_execution_queue q ON q.id = c.id
LEFT JOIN workflow_definitions d ON d.id = q.workflow_definition_id AND d.deleted_at IS NULL
LEFT JOIN workflow_definition_versions v ON v.workflow_definition_id = d.id AND v.version = d.current_version;

-- name: QueueMarkClaimed :many
-- Returns the state as stored, whose claim time guards every later
-- transition, and writes each claimed item's audit row in the same
-- statement. The claimer (lease, holder, term) is NULL for an unfenced
-- claim.
WITH claimed AS (
    UPDATE workflow_execution_queue q
    SET status = 'CLAIMED', claimed_at = now(), execution_id = c.execution_id,
        claim_lease = sqlc.narg(claim_lease), claimed_by = sqlc.narg(claimed_by), claim_term = sqlc.narg(claim_term)
    FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@execution_ids::uuid[]) AS execution_id) AS c
    WHERE q.id = c.id AND q.status = 'PENDING'
    RETURNING q.id, q.workspace_id, q.execution_id, q.status, q.claimed_at, q.attempt_count
), audit AS (
    INSERT INTO activity (id, workspace_id, actor, action, subject_id, details)
    SELECT gen_random_uuid(), c.workspace_id, 'dispatcher', 'queue.claimed', c.id,
           jsonb_build_object('executionId', c.execution_id, 'attemptCount', c.attempt_count)
    FROM claimed c
)
SELECT c.id, c.status, c.claimed_at FROM claimed c;

-- name: QueueMarkDispatched :many
-- Only items still in the claim that started their workflow move on, so a
-- late dispatcher never overwrites what stale recovery already did. The
-- pairs need no join: execution ids are unique across items, so matching
-- both lists by ANY is the same test, and it is two index lookups instead
-- of a join the planner misjudges (make bench measured the join at 50 ms
-- for 500 items).
-- Each dispatched item's audit row is written by the same statement, and
-- its execution's admission wait (queue_admission_wait_ms, into the
-- admission_waits row its claim wrote), returned with its workspace's
-- plan for the per-plan histogram.
WITH dispatched AS (
    UPDATE workflow_execution_queue q
    SET status = 'DISPATCHED', dispatched_at = now(), claimed_at = NULL
    WHERE q.id = ANY(@ids::uuid[]) AND q.status = 'CLAIMED' AND q.execution_id = ANY(@execution_ids::uuid[])
    RETURNING q.id, q.workspace_id, q.execution_id, q.created_at, q.available_at, q.dispatched_at
), waited AS (
    UPDATE admission_waits a SET wait_ms = queue_admission_wait_ms(d.created_at, d.available_at, a.slot_freed_at, a.rate_allowed_at)
    FROM dispatched d WHERE a.execution_id = d.execution_id
    RETURNING a.execution_id, a.wait_ms
), audit AS (
    INSERT INTO activity (id, workspace_id, actor, action, subject_id, details)
    SELECT gen_random_uuid(), w.id, 'dispatcher', 'queue.dispatched', d.id,
           jsonb_build_object('executionId', d.execution_id)
    FROM dispatched d LEFT JOIN workspaces w ON w.id = d.workspace_id
)
SELECT d.id, d.created_at, d.dispatched_at, wt.wait_ms AS admission_wait_ms, w.plan AS plan
FROM dispatched d LEFT JOIN waited wt ON wt.execution_id = d.execution_id LEFT JOIN workspaces w ON w.id = d.workspace_id;

-- name: QueueAdmitRun :exec
-- The first write of a run, before it does anything: its item, still
-- CLAIMED in the run's own claim (execution_id), becomes DISPATCHED, as
-- the dispatcher's marking would make it, with its audit row. A release
-- of the claim (QueueApplyTransitions with a dropped execution) is
-- guarded by CLAIMED and by the execution id, so once this has committed
-- no release can follow, and one that committed first has taken the id
-- off the item, which this then does not find. The item's row lock orders
-- the two; ExecutionAdmission, read after it, says which came first.
WITH admitted AS (
    UPDATE workflow_execution_queue q
    SET status = 'DISPATCHED', dispatched_at = now(), claimed_at = NULL
    WHERE q.execution_id = @execution_id AND q.status = 'CLAIMED'
    RETURNING q.id, q.workspace_id, q.execution_id, q.created_at, q.available_at
), waited AS (
    UPDATE admission_waits w SET wait_ms = queue_admission_wait_ms(a.created_at, a.available_at, w.slot_freed_at, w.rate_allowed_at)
    FROM admitted a WHERE w.execution_id = a.execution_id
)
INSERT INTO activity (id, workspace_id, actor, action, subject_id, details)
SELECT gen_random_uuid(), w.id, 'workflow', 'queue.dispatched', a.id, jsonb_build_object('executionId', a.execution_id)
FROM admitted a LEFT JOIN workspaces w ON w.id = a.workspace_id;

-- name: QueueApplyTransitions :many
-- Writes states computed by the domain state machine, each guarded by the
-- state it was computed from (status and claimed_at), so a row that moved on
-- meanwhile is left alone. Each written transition's audit row, by @actor,
-- is written by the same statement; the workspace is named only while it
-- exists (an item outlives a deleted workspace until it is failed).
-- A transition that drops its claim's execution (a release) is guarded by
-- that execution id too, and takes it off the item: the execution id
-- names one claim, so a run of it whose start lands after the release is
-- refused admission (ExecutionAdmit), and a later claim runs under an id
-- of its own.
WITH moved AS (
    UPDATE workflow_execution_queue q
    SET status = t.status,
        claimed_at = NULL,
        execution_id = CASE WHEN t.drop_execution THEN NULL ELSE q.execution_id END,
        available_at = t.available_at,
        attempt_count = t.attempt_count,
        dispatch_failures = t.dispatch_failures,
        last_error = NULLIF(t.last_error, '')
    FROM (SELECT unnest(@ids::uuid[]) AS id,
                 unnest(@from_statuses::text[]) AS from_status,
                 unnest(@from_claimed::bool[]) AS from_claimed,
                 unnest(@from_claimed_ats::timestamptz[]) AS from_claimed_at,
                 unnest(@statuses::text[]) AS status,
                 unnest(@available_ats::timestamptz[]) AS available_at,
                 unnest(@attempt_counts::int[]) AS attempt_count,
                 unnest(@dispatch_failures::int[]) AS dispatch_failures,
                 unnest(@last_errors::text[]) AS last_error,
                 unnest(@drop_executions::bool[]) AS drop_execution,
                 unnest(@dropped_execution_ids::uuid[]) AS dropped_execution_id) AS t
    WHERE q.id = t.id AND q.status = t.from_status
      AND CASE WHEN t.from_claimed THEN q.claimed_at = t.from_claimed_at ELSE q.claimed_at IS NULL END
      AND (NOT t.drop_execution OR q.execution_id = t.dropped_execution_id)
    RETURNING q.id, q.workspace_id,
              CASE WHEN t.drop_execution THEN t.dropped_execution_id ELSE q.execution_id END AS execution_id,
              t.from_status, q.status, q.attempt_count, q.dispatch_failures, q.last_error
), audit AS (
    INSERT INTO activity (id, workspace_id, actor, action, subject_id, details)
    SELECT gen_random_uuid(), w.id, @actor::text,
           CASE m.status WHEN 'PENDING' THEN 'queue.released' ELSE 'queue.' || lower(m.status) END, m.id,
           jsonb_strip_nulls(jsonb_build_object('from', m.from_status, 'executionId', m.execution_id, 'attemptCount', m.attempt_count,
                                                'dispatchFailures', m.dispatch_failures, 'lastError', m.last_error))
    FROM moved m LEFT JOIN workspaces w ON w.id = m.workspace_id
)
SELECT m.id FROM moved m;

-- name: QueueStaleClaimed :many
SELECT * FROM workflow_execution_queue
WHERE status = 'CLAIMED' AND claimed_at < now() - make_interval(secs => @older_than_seconds::float8)
ORDER BY claimed_at
LIMIT @max_rows
FOR UPDATE SKIP LOCKED;

-- name: QueueClaimsOfEndedTerms :many
-- CLAIMED items whose claimer's term is over: no live shedlock row has
-- their lease, holder and term any more (the lease expired, was released,
-- or another holder took it over). Their dispatcher can no longer mark
-- them (its marks are fenced by that term), so whoever holds a live term
-- settles them. Items claimed unfenced carry no claimer and are left to
-- stale recovery. CLAIMED items are few (the partial index), so the
-- anti-join costs one primary-key probe of shedlock each.
SELECT * FROM workflow_execution_queue q
WHERE q.status = 'CLAIMED' AND q.claim_lease IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM shedlock l
      WHERE l.name = q.claim_lease AND l.locked_by = q.claimed_by AND l.locked_at = q.claim_term AND l.lock_until > now())
ORDER BY q.claimed_at
LIMIT @max_rows;

-- name: QueueDeleteByExecution :execrows
-- Deletes the item of an execution that completed, writing its audit row
-- in the same statement.
WITH gone AS (
    DELETE FROM workflow_execution_queue WHERE execution_id = @execution_id
    RETURNING id, workspace_id, execution_id
)
INSERT INTO activity (id, workspace_id, actor, action, subject_id, details)
SELECT gen_random_uuid(), w.id, @actor::text, 'queue.completed', g.id, jsonb_build_object('executionId', g.execution_id)
FROM gone g LEFT JOIN workspaces w ON w.id = g.workspace_id;

-- name: QueueGetByExecutionForUpdate :one
-- Locks the item whose execution ended until commit, so the outcome is
-- decided from the state the item really has: a cancellation or release
-- that holds the row commits first, and the outcome then sees it.
SELECT * FROM workflow_execution_queue WHERE execution_id = @execution_id FOR UPDATE;

-- name: QueueGetForUpdate :one
SELECT * FROM workflow_execution_queue WHERE id = @id FOR UPDATE;

-- name: QueueStatsByPlan :many
-- The queue depth and RUNNING executions per plan, for the gauges: read
-- from the per-workspace counts rather than by counting the rows. A
-- workspace that is gone counts under plan UNKNOWN.
SELECT coalesce(s.plan, 'UNKNOWN')::text AS plan, sum(s.pending)::bigint AS pending, sum(s.running)::bigint AS running
FROM workspace_queue_stats s
GROUP BY 1;

-- name: QueueStatsByWorkspace :many
-- The same per workspace, for operators who opt in to a workspace label.
SELECT s.workspace_id, coalesce(s.plan, 'UNKNOWN')::text AS plan, s.pending::bigint AS pending, s.running::bigint AS running
FROM workspace_queue_stats s
WHERE s.pending > 0 OR s.running > 0;

-- name: QueueStatsFullByPlan :many
-- The workspaces the claim's prefilter skips: pending work and, by their
-- counts, no free slot under their limit. Counted for the admission
-- refusals metric with one range scan per plan on the same room index the
-- prefilter reads, and one pass over the workspaces with their own limit.
SELECT f.plan::text AS plan, count(*)::int AS full_workspaces
FROM (
    SELECT s.plan FROM plans p
    JOIN workspace_queue_stats s ON s.plan = p.name AND s.running >= p.max_running AND s.has_pending
    WHERE NOT EXISTS (SELECT 1 FROM workspace_limits o WHERE o.workspace_id = s.workspace_id AND o.max_running IS NOT NULL)
    UNION ALL
    SELECT s.plan FROM workspace_limits o JOIN workspace_queue_stats s ON s.workspace_id = o.workspace_id
    WHERE o.max_running IS NOT NULL AND s.running >= o.max_running AND s.has_pending AND s.plan IS NOT NULL
) f
GROUP BY f.plan;

-- name: IdempotencyKeyGet :one
-- Keys older than the retention window count as absent.
SELECT * FROM idempotency_keys
WHERE workspace_id = @workspace_id AND key = @key
  AND created_at > now() - make_interval(secs => @retention_seconds::float8);

-- name: IdempotencyKeyClaim :execrows
-- Claims the key for this request, or replaces one past retention. Zero rows
-- means the key is taken: a concurrent request with the same key waits here
-- for the first one to commit, so both cannot enqueue.
INSERT INTO idempotency_keys (workspace_id, key, request_hash, queue_id)
VALUES (@workspace_id, @key, @request_hash, @queue_id)
ON CONFLICT (workspace_id, key) DO UPDATE
SET request_hash = EXCLUDED.request_hash, queue_id = EXCLUDED.queue_id, created_at = now()
WHERE idempotency_keys.created_at <= now() - make_interval(secs => @retention_seconds::float8);

-- name: IdempotencyKeysPurge :execrows
DELETE FROM idempotency_keys
WHERE created_at < now() - make_interval(secs => @retention_seconds::float8);

-- name: QueueStatusesByIDs :many
-- The current status of items a dispatcher started but could not mark
-- DISPATCHED, so it can tell a cancelled item from one stale recovery
-- already settled.
SELECT id, status FROM workflow_execution_queue WHERE id = ANY(@ids::uuid[]);

-- name: QueueLockWorkspaceCounts :exec
-- Locks the workspace's counter row until commit, in a statement of its
-- own, before QueuePendingLockCount reads the counts in the next. Read in
-- the statement that waited for the lock, the counts would mix two moments:
-- READ COMMITTED re-reads only the locked row once the lock is granted, so
-- a claim that held it would show its item gone from pending but not the
-- execution it stored, and an enqueue would pass the stored-executions
-- quota by the claim's batch.
SELECT 1 FROM workspace_queue_stats WHERE workspace_id = @workspace_id FOR NO KEY UPDATE;

-- name: QueuePendingLockCount :one
-- The workspace's PENDING and stored counts and plan, its counter row
-- locked until commit, so concurrent enqueues check the queue quotas one
-- at a time, against the plan in force (the insert's trigger would take
-- the same lock a moment later). executions is its stored executions
-- (workspace_executions_stored), for the stored-executions quota. Run after
-- QueueLockWorkspaceCounts, so that it reads every count as of one moment.
SELECT s.pending, s.plan, coalesce(q.items, 0)::int AS stored, coalesce(x.executions, 0)::int AS executions
FROM workspace_queue_stats s LEFT JOIN workspace_queue_stored q ON q.workspace_id = s.workspace_id
LEFT JOIN workspace_executions_stored x ON x.workspace_id = s.workspace_id
WHERE s.workspace_id = @workspace_id FOR NO KEY UPDATE OF s;

-- name: QueueOldestAdmissibleByPlan :many
-- Per plan, the age of the oldest item that could be claimed now: the
-- head of each workspace the claim's prefilter finds with room (the
-- workspaces at capacity wait by design and are left out), due now. One
-- index probe per such workspace on the claim's own index. An item's age
-- counts from when it became due (a notBefore item's available_at), so a
-- delay its client asked for is not counted as the queue's wait.
SELECT r.plan::text AS plan, extract(epoch FROM now() - min(h.due_at))::float8 AS age_seconds
FROM admission_workspaces_with_room() AS r
CROSS JOIN LATERAL (
    SELECT greatest(i.created_at, i.available_at) AS due_at FROM workflow_execution_queue i
    WHERE i.workspace_id = r.workspace_id AND i.status = 'PENDING' AND i.available_at <= now()
    ORDER BY i.priority, i.created_at, i.id
    LIMIT 1
) h
WHERE r.plan IS NOT NULL
GROUP BY r.plan;

-- name: QueueWaitFigures :one
-- What a page of one workspace's items waits on, in one read: its limit
-- and floor in force, its RUNNING count, and the RUNNING count of each key
-- asked for (one probe of the key index each).
SELECT coalesce((SELECT o.max_running FROM workspace_limits o WHERE o.workspace_id = @workspace_id),
                (SELECT p.max_running FROM workspaces w JOIN plans p ON p.name = w.plan WHERE w.id = @workspace_id), 0)::int AS max_running,
       coalesce((SELECT o.floor FROM workspace_limits o WHERE o.workspace_id = @workspace_id),
                (SELECT p.floor FROM workspaces w JOIN plans p ON p.name = w.plan WHERE w.id = @workspace_id), 0)::int AS floor,
       (SELECT count(*) FROM workflow_executions e WHERE e.workspace_id = @workspace_id AND e.status = 'RUNNING')::int AS running,
       coalesce((SELECT array_agg(k.running ORDER BY k.ord) FROM (
           SELECT u.ord, (SELECT count(*) FROM workflow_executions e
                          WHERE e.workspace_id = @workspace_id AND e.concurrency_key = u.key AND e.status = 'RUNNING')::int AS running
           FROM unnest(@keys::text[]) WITH ORDINALITY AS u(key, ord)) k), '{}')::int[] AS key_running;

-- name: ExecutionAdmissionWaits :many
-- The stored admission waits of started executions, with their
-- workspaces' plans: for items whose run recorded their start
-- (QueueAdmitRun) before the dispatcher's marking, which then reads what
-- that admission stored.
SELECT a.execution_id, a.wait_ms::bigint AS wait_ms, w.plan AS plan
FROM admission_waits a JOIN workspaces w ON w.id = a.workspace_id
WHERE a.execution_id = ANY(@ids::uuid[]) AND a.wait_ms IS NOT NULL;
