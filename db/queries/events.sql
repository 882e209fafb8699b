-- name: EventRunLock :one
-- Locks a RUNNING execution's row for an event's acceptance, so that the
-- events of one run are counted against its bound one at a time; no row
-- means the execution is not RUNNING.
SELECT id FROM workflow_executions WHERE id = @execution_id AND status = 'RUNNING' FOR NO KEY UPDATE;

-- name: EventBytesTaken :one
-- The payload bytes of the events accepted for a run so far: at most one
-- row per WAIT_FOR_EVENT node, read by the primary key's prefix.
SELECT coalesce(sum(bytes), 0)::bigint FROM workflow_execution_events WHERE execution_id = @execution_id;

-- name: EventAccept :one
-- Accepts an event for a WAIT_FOR_EVENT node while its execution runs and
-- the node has no final record, once per node: no row back means one of
-- those does not hold.
INSERT INTO workflow_execution_events (execution_id, name, node_key, bytes)
SELECT @execution_id, @name, @node_key, @bytes
WHERE EXISTS (SELECT 1 FROM workflow_executions WHERE id = @execution_id AND status = 'RUNNING')
  AND NOT EXISTS (SELECT 1 FROM workflow_execution_nodes n
                  WHERE n.execution_id = @execution_id AND n.node_key = @node_key
                    AND n.status IN ('COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED'))
ON CONFLICT (execution_id, name) DO NOTHING
RETURNING received_at;

-- name: EventForget :exec
-- Takes back an accepted event whose signal could not be sent, so that it
-- can be sent again.
DELETE FROM workflow_execution_events WHERE execution_id = @execution_id AND name = @name;
