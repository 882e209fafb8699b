-- name: ScheduleInsert :one
INSERT INTO schedules (id, workspace_id, workflow_definition_id, name, cron_expression, time_zone, interval_seconds,
                       input, priority, overlap_policy, paused_at, next_fire_at)
VALUES (@id, @workspace_id, @workflow_definition_id, @name, sqlc.narg(cron_expression), @time_zone, sqlc.narg(interval_seconds),
        @input, @priority, @overlap_policy, sqlc.narg(paused_at), sqlc.narg(next_fire_at))
RETURNING *;

-- name: ScheduleCount :one
-- The workspace's schedules, paused ones included, for its quota; read
-- under WorkspaceStorageLock.
SELECT count(*)::int FROM schedules WHERE workspace_id = @workspace_id;

-- name: ScheduleGet :one
SELECT * FROM schedules WHERE id = @id;

-- name: ScheduleGetForUpdate :one
-- The schedule under its row lock, which a firing holds too, with the
-- database's now() an edit, pause or resume is judged by.
SELECT sqlc.embed(s), now()::timestamptz AS db_now FROM schedules s WHERE s.id = @id FOR UPDATE;

-- name: ScheduleList :many
-- A workspace's schedules, oldest first, keyset-paged on (created_at, id).
SELECT * FROM schedules
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(after_id)::uuid IS NULL OR (created_at, id) > (sqlc.narg(after_created_at)::timestamptz, sqlc.narg(after_id)::uuid))
ORDER BY created_at, id
LIMIT @max_rows;

-- name: ScheduleUpdate :one
-- Writes an edit, a pause or a resume computed by the domain.
UPDATE schedules
SET name = @name, cron_expression = sqlc.narg(cron_expression), time_zone = @time_zone,
    interval_seconds = sqlc.narg(interval_seconds), input = @input, priority = @priority,
    overlap_policy = @overlap_policy, paused_at = sqlc.narg(paused_at), next_fire_at = sqlc.narg(next_fire_at),
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: ScheduleDelete :execrows
DELETE FROM schedules WHERE id = @id;

-- name: ScheduleLockDue :one
-- The due schedule with the oldest tick that no other transaction holds,
-- locked until commit, with the database's now() the tick is judged by
-- and whether its definition is still live. SKIP LOCKED lets a second
-- firing job (a lease holder paused past its term) take other schedules;
-- the lock and the advance of next_fire_at in the same transaction are
-- what keep one tick from firing twice. The lock is the statement's own
-- (not a subquery's), so the row returned is the version it locked: a
-- schedule another firing advanced and committed meanwhile comes back
-- with its new next_fire_at, rechecked against now(), never the tick the
-- statement's snapshot saw (which would fire that tick again). The
-- schedules in skip_ids (those whose last tick failed, backing off) are
-- passed over, so one failing schedule cannot hold the others back.
SELECT sqlc.embed(s), now()::timestamptz AS db_now, (d.deleted_at IS NULL)::bool AS definition_live
FROM schedules s JOIN workflow_definitions d ON d.id = s.workflow_definition_id
WHERE s.next_fire_at <= now()
  AND NOT (s.id = ANY(@skip_ids::uuid[]))
ORDER BY s.next_fire_at
LIMIT 1
FOR UPDATE OF s SKIP LOCKED;

-- name: SchedulePreviousRunActive :one
-- Whether the schedule's last fired item is still queued, or started an
-- execution that is still running: the overlap policy "skip" fires no
-- tick then. One primary-key probe (a completed run's item is deleted).
SELECT EXISTS (
    SELECT 1 FROM workflow_execution_queue q
    LEFT JOIN workflow_executions e ON e.id = q.execution_id
    WHERE q.id = @queue_id
      AND (q.status IN ('PENDING', 'CLAIMED') OR (q.status = 'DISPATCHED' AND e.status = 'RUNNING'))
)::bool;

-- name: ScheduleAdvance :exec
-- Records the tick fired (or skipped) and the next one, in the firing
-- transaction.
UPDATE schedules
SET next_fire_at = sqlc.narg(next_fire_at), paused_at = sqlc.narg(paused_at), last_tick = @last_tick,
    last_queue_id = coalesce(sqlc.narg(last_queue_id), last_queue_id)
WHERE id = @id;
