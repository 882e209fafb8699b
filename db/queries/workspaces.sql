-- name: WorkspaceInsert :one
INSERT INTO workspaces (id, name, plan)
VALUES (@id, @name, @plan)
RETURNING *;

-- name: WorkspaceGet :one
SELECT * FROM workspaces WHERE id = @id;

-- name: WorkspaceStats :many
-- The live numbers a workspace view shows, for every workspace of a page in
-- one statement: its limit in force (its own, else its plan's), executions
-- holding a slot, items still waiting for one,
-- and executions that ended FAILED in the last hour (a range on the failed
-- index, so the console's polling costs the recent failures, not the
-- workspace's history).
SELECT w.id::uuid AS id,
    coalesce((SELECT o.max_running FROM workspace_limits o WHERE o.workspace_id = w.id),
             (SELECT p.max_running FROM workspaces x JOIN plans p ON p.name = x.plan WHERE x.id = w.id), 0)::int AS max_running,
    (SELECT count(*) FROM workflow_executions e WHERE e.workspace_id = w.id AND e.status = 'RUNNING')::int AS active,
    (SELECT count(*) FROM workflow_execution_queue q WHERE q.workspace_id = w.id AND q.status IN ('PENDING', 'CLAIMED'))::int AS queued,
    (SELECT count(*) FROM workflow_executions e
     WHERE e.workspace_id = w.id AND e.status = 'FAILED' AND e.completed_at > now() - interval '1 hour')::int AS failed_last_hour
FROM unnest(@ids::uuid[]) AS w(id);

-- name: WorkspaceList :many
SELECT * FROM workspaces
WHERE (sqlc.narg(after)::uuid IS NULL OR id > sqlc.narg(after)::uuid)
ORDER BY id
LIMIT @max_rows;

-- name: WorkspaceUpdatePlan :one
UPDATE workspaces SET plan = @plan, updated_at = now()
WHERE id = @id
RETURNING *;

-- name: WorkspacesLockForAdmission :many
-- Admission is serialised per workspace by this row lock: every transaction
-- that creates a RUNNING execution holds it, so the count taken under it is
-- exact. NO KEY UPDATE does not conflict with the KEY SHARE lock that
-- enqueue's foreign-key checks take, and SKIP LOCKED lets a second dispatcher
-- move on to other workspaces instead of waiting.
-- Each workspace's limit is read by the same statement, taken after
-- AdmissionLimitsReadLock, so it is the one in force: its own, else its
-- plan's; so are its floor (its own, else its plan's) and its plan's
-- weight, which admission reads only when the pool has a capacity.
SELECT w.id, w.plan, coalesce(o.max_running, p.max_running)::int AS max_running,
       coalesce(o.floor, p.floor)::int AS floor, p.weight
FROM workspaces w
JOIN plans p ON p.name = w.plan
LEFT JOIN workspace_limits o ON o.workspace_id = w.id
WHERE w.id = ANY(@ids::uuid[])
ORDER BY w.id
FOR NO KEY UPDATE OF w SKIP LOCKED;
