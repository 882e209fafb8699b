-- name: PoolGet :one
-- The default pool: its capacity (NULL: none), what runs in it now and
-- how much of that is borrowed (each workspace's RUNNING executions above
-- its floor in force, summed), from the counts workspace_queue_stats keeps.
SELECT p.capacity, p.updated_at,
       (SELECT coalesce(sum(s.running), 0) FROM workspace_queue_stats s)::int AS running,
       (SELECT coalesce(sum(greatest(s.running - floor_in_force(coalesce(o.floor, pl.floor), coalesce(o.max_running, pl.max_running)), 0)), 0)
        FROM workspace_queue_stats s
        JOIN workspaces w ON w.id = s.workspace_id
        JOIN plans pl ON pl.name = w.plan
        LEFT JOIN workspace_limits o ON o.workspace_id = w.id
        WHERE s.running > 0)::int AS borrowed
FROM pools p WHERE p.name = 'default';

-- name: PoolUpdate :one
-- Sets the default pool's capacity (NULL: none). Run after
-- AdmissionLimitsWriteLock, as PlanUpdate is.
UPDATE pools SET capacity = sqlc.narg(capacity), updated_at = now()
WHERE name = 'default'
RETURNING capacity, updated_at;

-- name: PoolCapacity :one
-- The default pool's capacity (NULL: none), for what an item waits on,
-- and for a limits edit's check under the limits' write lock. A claim
-- reads it with its claimable workspaces (QueueClaimableWorkspaces).
SELECT capacity FROM pools WHERE name = 'default';

-- name: PoolLockForAdmission :exec
-- Taken by a claim when the pool has a capacity, before it locks any
-- workspace: every transaction that creates a RUNNING execution then holds
-- this row until it commits, so the pool's count read after it
-- (PoolAdmissionFigures) is exact with any number of dispatchers.
SELECT 1 FROM pools WHERE name = 'default' FOR UPDATE;

-- name: PoolAdmissionFigures :one
-- What a claim reads of the pool under its lock: the RUNNING executions
-- of every workspace (the counts workspace_queue_stats keeps in the same
-- transactions as the executions), and the slots held for the workspaces
-- other than those given (the ones the claim locked, which the planner
-- counts itself) that are below their floor with an item due now: per
-- workspace, its floor (never above its limit) less what it runs, at most
-- its PENDING items.
SELECT (SELECT coalesce(sum(s.running), 0) FROM workspace_queue_stats s)::int AS running,
       (SELECT coalesce(sum(least(f.floor - s.running, s.pending)), 0)
        FROM workspace_queue_stats s
        JOIN workspaces w ON w.id = s.workspace_id
        JOIN plans p ON p.name = w.plan
        LEFT JOIN workspace_limits o ON o.workspace_id = w.id
        CROSS JOIN LATERAL (SELECT floor_in_force(coalesce(o.floor, p.floor), coalesce(o.max_running, p.max_running)) AS floor) f
        WHERE s.has_pending AND s.running < f.floor
          AND NOT (s.workspace_id = ANY(@locked::uuid[]))
          AND EXISTS (SELECT 1 FROM workflow_execution_queue i
                      WHERE i.workspace_id = s.workspace_id AND i.status = 'PENDING' AND i.available_at <= now()))::int AS floors_waiting;
