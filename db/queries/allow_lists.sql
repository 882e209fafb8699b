-- name: AllowListEntries :many
-- A workspace's allow-list, by task queue then type (any type first).
SELECT task_queue, workflow_type FROM workspace_allow_list
WHERE workspace_id = @workspace_id
ORDER BY task_queue, workflow_type NULLS FIRST;

-- name: AllowListLockWorkspace :one
-- Locks the workspace's row, so that concurrent puts count its entries
-- one at a time.
SELECT id FROM workspaces WHERE id = @workspace_id FOR UPDATE;

-- name: AllowListCount :one
SELECT count(*)::int FROM workspace_allow_list WHERE workspace_id = @workspace_id;

-- name: AllowListHas :one
SELECT EXISTS (SELECT 1 FROM workspace_allow_list
               WHERE workspace_id = @workspace_id AND task_queue = @task_queue
                 AND workflow_type IS NOT DISTINCT FROM sqlc.narg(workflow_type)::text);

-- name: AllowListInsert :exec
INSERT INTO workspace_allow_list (workspace_id, task_queue, workflow_type)
VALUES (@workspace_id, @task_queue, sqlc.narg(workflow_type))
ON CONFLICT ON CONSTRAINT workspace_allow_list_entry DO NOTHING;

-- name: AllowListDelete :execrows
DELETE FROM workspace_allow_list
WHERE workspace_id = @workspace_id AND task_queue = @task_queue
  AND workflow_type IS NOT DISTINCT FROM sqlc.narg(workflow_type)::text;
