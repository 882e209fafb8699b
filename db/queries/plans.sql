-- name: PlansList :many
-- Every plan's limits, smallest plan first.
SELECT * FROM plans
ORDER BY array_position(ARRAY['FREE', 'PRO', 'ENTERPRISE']::text[], name);

-- name: PlanUpdate :one
-- Sets the plan's concurrency limit when given (NULL leaves it as it is).
-- Run after AdmissionLimitsWriteLock, so no claim admits by the old value
-- once this commits.
UPDATE plans SET max_running = coalesce(sqlc.narg(max_running), max_running), updated_at = now()
WHERE name = @name
RETURNING *;

-- name: WorkspaceLimitsGet :one
SELECT * FROM workspace_limits WHERE workspace_id = @workspace_id;

-- name: WorkspaceLimitsSet :one
-- Sets a workspace's own limits (NULL keeps its plan's). Run after
-- AdmissionLimitsWriteLock, as PlanUpdate is.
INSERT INTO workspace_limits (workspace_id, max_running)
VALUES (@workspace_id, sqlc.narg(max_running))
ON CONFLICT (workspace_id) DO UPDATE
SET max_running = EXCLUDED.max_running, updated_at = now()
RETURNING *;

-- name: PlanSetStartRate :one
-- Sets a plan's start rate (all NULL: none). Run after
-- AdmissionLimitsWriteLock, as PlanUpdate is.
UPDATE plans SET start_rate = sqlc.narg(start_rate), start_rate_per = sqlc.narg(start_rate_per),
                 start_burst = sqlc.narg(start_burst), updated_at = now()
WHERE name = @name
RETURNING *;

-- name: WorkspaceLimitsSetStartRate :one
-- Sets a workspace's own start rate (all NULL: its plan's) on the row
-- WorkspaceLimitsSet wrote in the same transaction.
UPDATE workspace_limits SET start_rate = sqlc.narg(start_rate), start_rate_per = sqlc.narg(start_rate_per),
                            start_burst = sqlc.narg(start_burst), updated_at = now()
WHERE workspace_id = @workspace_id
RETURNING *;
