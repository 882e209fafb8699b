-- name: NodeSlotsLock :exec
-- Serialises the workspace's slot acquisitions until commit, so the count
-- read after it stays exact until the insert.
SELECT pg_advisory_xact_lock(1936488036, hashtext(CAST(@workspace_id::uuid AS text)));

-- name: NodeSlotsForgetDead :exec
-- Drops the workspace's rows that no longer count: their lease ran out or
-- their execution is no longer RUNNING.
DELETE FROM workspace_node_slots s
WHERE s.workspace_id = @workspace_id
  AND (s.lease_until <= now() OR NOT EXISTS (
      SELECT 1 FROM workflow_executions e WHERE e.id = s.execution_id AND e.status = 'RUNNING'));

-- name: NodeSlotsHeld :one
-- The workspace's slots held by others than this node, and whether this
-- node already holds one (a retried acquisition).
SELECT
    count(*) FILTER (WHERE NOT (s.execution_id = @execution_id AND s.node_key = @node_key))::int AS others,
    coalesce(bool_or(s.execution_id = @execution_id AND s.node_key = @node_key), false)::bool AS mine
FROM workspace_node_slots s WHERE s.workspace_id = @workspace_id;

-- name: NodeSlotTake :exec
INSERT INTO workspace_node_slots (execution_id, node_key, workspace_id, lease_until)
VALUES (@execution_id, @node_key, @workspace_id, now() + make_interval(secs => @lease_seconds::float8))
ON CONFLICT (execution_id, node_key) DO UPDATE SET lease_until = EXCLUDED.lease_until;

-- name: NodeSlotRelease :exec
DELETE FROM workspace_node_slots WHERE execution_id = @execution_id AND node_key = @node_key;
