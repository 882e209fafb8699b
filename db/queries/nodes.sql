-- name: NodeStart :one
-- One row per node run; a Temporal retry of the same node updates its row
-- with the new attempt number.
INSERT INTO workflow_execution_nodes (id, execution_id, node_key, node_type, status, attempt, input, started_at)
VALUES (@id, @execution_id, @node_key, @node_type, 'RUNNING', @attempt, @input, now())
ON CONFLICT (execution_id, node_key) DO UPDATE
SET status = 'RUNNING', attempt = EXCLUDED.attempt, input = EXCLUDED.input, error = NULL, output = NULL,
    started_at = workflow_execution_nodes.started_at, completed_at = NULL
WHERE workflow_execution_nodes.status IN ('RUNNING', 'FAILED')
RETURNING *;

-- name: NodeFinish :exec
-- Records how a node ended; a row that does not exist yet (a node skipped
-- before it ever started) is created.
INSERT INTO workflow_execution_nodes (id, execution_id, node_key, node_type, status, attempt, input, output, error, started_at, completed_at)
VALUES (@id, @execution_id, @node_key, @node_type, @status, @attempt, @input, @output, sqlc.narg(error), sqlc.narg(started_at), now())
ON CONFLICT (execution_id, node_key) DO UPDATE
SET status = EXCLUDED.status, output = EXCLUDED.output, error = EXCLUDED.error,
    input = coalesce(EXCLUDED.input, workflow_execution_nodes.input),
    attempt = GREATEST(workflow_execution_nodes.attempt, EXCLUDED.attempt), completed_at = now();

-- name: NodesForExecution :many
SELECT * FROM workflow_execution_nodes
WHERE execution_id = @execution_id
ORDER BY started_at NULLS LAST, node_key;
