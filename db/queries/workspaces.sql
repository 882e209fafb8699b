-- name: WorkspaceInsert :one
INSERT INTO workspaces (id, name, plan)
VALUES (@id, @name, @plan)
RETURNING *;

-- name: WorkspaceGet :one
SELECT * FROM workspaces WHERE id = @id;

-- name: WorkspaceStats :many
-- The live numbers a workspace view shows, for every workspace of a page in
-- one statement: executions holding a slot, items still waiting for one,
-- and executions that ended FAILED in the last hour (a range on the failed
-- index, so the console's polling costs the recent failures, not the
-- workspace's history).
SELECT w.id::uuid AS id,
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
SELECT id, plan FROM workspaces
WHERE id = ANY(@ids::uuid[])
ORDER BY id
FOR NO KEY UPDATE SKIP LOCKED;
