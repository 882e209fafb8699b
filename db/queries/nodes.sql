-- name: NodeStart :one
-- One row per node run; a Temporal retry of the same node updates its row
-- with the new attempt number. An attempt older than the record's (a
-- zombie: an attempt Temporal timed out and retried, still running on
-- some worker) never takes the record back.
INSERT INTO workflow_execution_nodes (id, execution_id, node_key, node_type, status, attempt, input, started_at, child_workflow_id, child_run_id)
VALUES (@id, @execution_id, @node_key, @node_type, 'RUNNING', @attempt, @input, now(), sqlc.narg(child_workflow_id), sqlc.narg(child_run_id))
ON CONFLICT (execution_id, node_key) DO UPDATE
SET status = 'RUNNING', attempt = EXCLUDED.attempt, input = EXCLUDED.input, error = NULL, output = NULL,
    started_at = workflow_execution_nodes.started_at, completed_at = NULL,
    child_workflow_id = coalesce(EXCLUDED.child_workflow_id, workflow_execution_nodes.child_workflow_id),
    child_run_id = coalesce(EXCLUDED.child_run_id, workflow_execution_nodes.child_run_id)
WHERE workflow_execution_nodes.status IN ('RUNNING', 'FAILED')
  AND workflow_execution_nodes.attempt <= EXCLUDED.attempt
RETURNING *;

-- name: NodeFinish :exec
-- Records how a node's attempt ended; a row that does not exist yet is
-- created. An attempt ends only a record still RUNNING under its own
-- attempt number or an older one: a zombie attempt finishing after a newer
-- one started, or after the workflow recorded the node's end, changes
-- nothing (the workflow's records, NodesFinish, stay authoritative).
INSERT INTO workflow_execution_nodes (id, execution_id, node_key, node_type, status, attempt, input, output, error, started_at, completed_at)
VALUES (@id, @execution_id, @node_key, @node_type, @status, @attempt, @input, @output, sqlc.narg(error), sqlc.narg(started_at), now())
ON CONFLICT (execution_id, node_key) DO UPDATE
SET status = EXCLUDED.status, output = EXCLUDED.output, error = EXCLUDED.error,
    input = coalesce(EXCLUDED.input, workflow_execution_nodes.input),
    attempt = EXCLUDED.attempt, completed_at = now()
WHERE workflow_execution_nodes.status = 'RUNNING'
  AND workflow_execution_nodes.attempt <= EXCLUDED.attempt;

-- name: NodesPage :many
-- One page of an execution's node records in key order after the cursor:
-- a range of the (execution_id, node_key) unique index, so a page costs
-- its own rows whatever the size of the run.
SELECT * FROM workflow_execution_nodes
WHERE execution_id = @execution_id AND node_key > @after_key
ORDER BY node_key
LIMIT @max_rows;

-- name: NodesFinish :exec
-- NodeFinish for many nodes of one execution in one statement: the records
-- the workflow decides (pure nodes, DELAY, failures, skips) are written in
-- batches. The keys must be distinct; an empty output, error, start or end
-- time (RFC 3339) stands for NULL. The end is the one the workflow decided
-- (now() when it gave none), not the write's: a batch is written when the
-- workflow waits, after the nodes that started since, whose starts must not
-- precede it; a record that was started (a DELAY's RUNNING, stamped by the
-- database) never ends before its start. Rows are written in the arrays'
-- order, which is the order the feed's trigger tells of them. A child
-- workflow's ids, once written, stay (an empty one keeps them).
INSERT INTO workflow_execution_nodes (id, execution_id, node_key, node_type, status, attempt, input, output, error, started_at, completed_at,
                                      child_workflow_id, child_run_id)
SELECT gen_random_uuid(), @execution_id::uuid, r.node_key, r.node_type, r.status, r.attempt, NULL::jsonb, nullif(r.output, '')::jsonb,
       nullif(r.error, ''), nullif(r.started_at, '')::timestamptz, coalesce(nullif(r.completed_at, '')::timestamptz, now()),
       nullif(r.child_workflow_id, ''), nullif(r.child_run_id, '')
FROM (SELECT unnest(@node_keys::text[]) AS node_key, unnest(@node_types::text[]) AS node_type,
             unnest(@statuses::text[]) AS status, unnest(@attempts::int[]) AS attempt,
             unnest(@outputs::text[]) AS output, unnest(@errors::text[]) AS error,
             unnest(@started_ats::text[]) AS started_at, unnest(@completed_ats::text[]) AS completed_at,
             unnest(@child_workflow_ids::text[]) AS child_workflow_id, unnest(@child_run_ids::text[]) AS child_run_id) AS r
ON CONFLICT (execution_id, node_key) DO UPDATE
SET status = EXCLUDED.status, output = EXCLUDED.output, error = EXCLUDED.error,
    child_workflow_id = coalesce(EXCLUDED.child_workflow_id, workflow_execution_nodes.child_workflow_id),
    child_run_id = coalesce(EXCLUDED.child_run_id, workflow_execution_nodes.child_run_id),
    attempt = GREATEST(workflow_execution_nodes.attempt, EXCLUDED.attempt),
    completed_at = GREATEST(EXCLUDED.completed_at, workflow_execution_nodes.started_at);

-- name: NodesEndRunning :exec
-- Ends the records an execution left RUNNING as it ended (domain.LeftRunning):
-- a range of the (execution_id, node_key) unique index.
UPDATE workflow_execution_nodes
SET status = @status, error = @error, completed_at = now()
WHERE execution_id = @execution_id AND status = 'RUNNING';

-- name: NodesRunningChildren :many
-- The team workflows that the given executions' RUNNING TEMPORAL_WORKFLOW
-- nodes started, for the reconciler's stuck-start rule: ranges of the
-- (execution_id, node_key) unique index, the executions being one page of
-- its walk.
SELECT execution_id, node_key, child_workflow_id::text AS child_workflow_id, child_run_id::text AS child_run_id, started_at
FROM workflow_execution_nodes
WHERE execution_id = ANY(@execution_ids::uuid[]) AND status = 'RUNNING'
  AND child_workflow_id IS NOT NULL AND child_run_id IS NOT NULL AND started_at IS NOT NULL
ORDER BY execution_id, node_key;
