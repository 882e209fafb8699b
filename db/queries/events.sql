-- name: EventAccept :one
-- Accepts an event for a WAIT_FOR_EVENT node while its execution runs and
-- the node has no final record, once per node: no row back means one of
-- those does not hold.
INSERT INTO workflow_execution_events (execution_id, name, node_key)
SELECT @execution_id, @name, @node_key
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
