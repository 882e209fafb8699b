-- name: ExecutionsRunningForWorkspaces :many
-- Admission's recount under the workspace locks, as one probe of the
-- RUNNING index per workspace. Written as a lateral probe, not as
-- workspace_id = ANY(...), which the planner answers with a bitmap scan
-- once the index is large: every finished execution leaves a dead entry in
-- that index, a plain index scan marks the ones it passes so the next
-- skips them, and a bitmap scan visits them all again every batch until
-- vacuum (make bench, 1,000 FREE workspaces at capacity, batches of 10:
-- 0.45 ms a batch as a bitmap scan, 0.26 ms as probes).
SELECT w.id::uuid AS workspace_id, e.id
FROM unnest(@workspace_ids::uuid[]) AS w(id)
CROSS JOIN LATERAL (
    SELECT x.id FROM workflow_executions x
    WHERE x.workspace_id = w.id AND x.status = 'RUNNING'
    OFFSET 0
) AS e;

-- name: ExecutionsUpsertRunning :exec
-- Each claim writes an execution of its own: a release takes the released
-- claim's id off the item and deletes its row (ExecutionsDelete), so a
-- retry runs under a new id. The conflict branch resets a row the id
-- already has to RUNNING, which no claim made since then meets.
INSERT INTO workflow_executions (id, queue_id, workspace_id, workflow_definition_id, workflow_version, status, input, concurrency_key)
SELECT e.id, e.queue_id, e.workspace_id, e.workflow_definition_id, e.workflow_version, 'RUNNING', e.input, q.concurrency_key
FROM (SELECT unnest(@ids::uuid[]) AS id,
             unnest(@queue_ids::uuid[]) AS queue_id,
             unnest(@workspace_ids::uuid[]) AS workspace_id,
             unnest(@workflow_definition_ids::uuid[]) AS workflow_definition_id,
             unnest(@workflow_versions::int[]) AS workflow_version,
             unnest(@inputs::jsonb[]) AS input) AS e
JOIN workflow_execution_queue q ON q.id = e.queue_id
ON CONFLICT (id) DO UPDATE
SET status = 'RUNNING', started_at = now(), completed_at = NULL, duration_ms = NULL, error = NULL,
    workflow_version = EXCLUDED.workflow_version, input = EXCLUDED.input, concurrency_key = EXCLUDED.concurrency_key;

-- name: ExecutionsDelete :exec
DELETE FROM workflow_executions WHERE id = ANY(@ids::uuid[]) AND status = 'RUNNING';

-- name: ExecutionAdmission :one
-- What a run's admission reads after QueueAdmitRun, in one statement of
-- its own (so it sees whatever release that statement's lock waited for):
-- whether execution @id has its row (it was claimed, and the claim was
-- not released: a release deletes the row), and the status of the item
-- whose claim it is ('' when there is none; CANCELLED when a cancel ended
-- it while it was CLAIMED).
SELECT EXISTS (SELECT 1 FROM workflow_executions e WHERE e.id = @id::uuid)::bool AS exists,
       coalesce((SELECT q.status FROM workflow_execution_queue q WHERE q.execution_id = @id::uuid), '')::text AS item_status;

-- name: ExecutionGet :one
SELECT * FROM workflow_executions WHERE id = @id;

-- name: ExecutionWorkspace :one
-- The owner of an execution, read before anything else of it is loaded.
SELECT workspace_id FROM workflow_executions WHERE id = @id;

-- name: ExecutionFinish :one
-- Idempotent: only a RUNNING execution is finished, and a repeat finds none.
UPDATE workflow_executions
SET status = @status, completed_at = now(), error = sqlc.narg(error),
    duration_ms = (extract(epoch FROM now() - started_at) * 1000)::bigint
WHERE id = @id AND status = 'RUNNING'
RETURNING *;

-- name: ExecutionList :many
-- Keyset pagination on (started_at, id), newest first. The filters are
-- folded away when absent (the pool plans every statement for its values,
-- see plan_cache_mode in postgres.go), so a definition's executions are a
-- range of workflow_executions_definition_idx and a queue id one probe of
-- workflow_executions_queue_idx. The input is not read: the list does
-- not return it (GET of one execution does).
SELECT id, queue_id, workspace_id, workflow_definition_id, workflow_version, status, started_at, completed_at,
       duration_ms, error
FROM workflow_executions
WHERE workspace_id = @workspace_id
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
  AND (sqlc.narg(workflow_definition_id)::uuid IS NULL OR workflow_definition_id = sqlc.narg(workflow_definition_id)::uuid)
  AND (sqlc.narg(queue_id)::uuid IS NULL OR queue_id = sqlc.narg(queue_id)::uuid)
  -- Waiting runs: RUNNING ones with a RUNNING WAIT_FOR_EVENT record, one
  -- probe of the nodes' (execution_id, node_key) index per RUNNING run.
  AND (NOT coalesce(sqlc.narg(waiting_for_event)::bool, false)
       OR (status = 'RUNNING' AND EXISTS (
           SELECT 1 FROM workflow_execution_nodes n
           WHERE n.execution_id = workflow_executions.id AND n.node_type = 'WAIT_FOR_EVENT' AND n.status = 'RUNNING')))
  AND (sqlc.narg(before_started_at)::timestamptz IS NULL
       OR (started_at, id) < (sqlc.narg(before_started_at)::timestamptz, sqlc.narg(before_id)::uuid))
ORDER BY started_at DESC, id DESC
LIMIT @max_rows;

-- name: ExecutionsRunningStartedBefore :many
-- One page of the reconciler's walk through RUNNING executions past an
-- age, in (started_at, id) order after the cursor, so that every such
-- execution is visited within total/page cycles however many long runs sit
-- in front of it. Executions whose item is still CLAIMED may not have
-- started yet; stale recovery settles those, so the reconciler leaves them
-- alone.
SELECT e.* FROM workflow_executions e
WHERE e.status = 'RUNNING' AND e.started_at < now() - make_interval(secs => @older_than_seconds::float8)
  AND (e.started_at, e.id) > (@after_started_at::timestamptz, @after_id::uuid)
  AND NOT EXISTS (SELECT 1 FROM workflow_execution_queue q WHERE q.execution_id = e.id AND q.status = 'CLAIMED')
ORDER BY e.started_at, e.id
LIMIT @max_rows;

-- name: ExecutionSetRetryOf :execrows
-- Names the execution a retry retries, written by the retry's workflow
-- before it reads the outputs it reuses; no row when the retried
-- execution is gone (or the retry is).
UPDATE workflow_executions e SET retry_of = @retry_of
WHERE e.id = @id AND EXISTS (SELECT 1 FROM workflow_executions o WHERE o.id = @retry_of);

-- name: ExecutionSubWorkflowNodesTake :one
-- Counts a starting child run's nodes against its execution's cap, in one
-- atomic write: the row is updated, and its new count returned, only when
-- the nodes fit under @cap; no row means they do not (or the execution is
-- gone). Concurrent children of one execution serialise on its row lock.
UPDATE workflow_executions
SET sub_workflow_nodes = sub_workflow_nodes + @nodes::integer
WHERE id = @id AND sub_workflow_nodes + @nodes::integer <= @cap::integer
RETURNING sub_workflow_nodes;

-- name: ExecutionSubWorkflowNodesGet :one
-- The nodes an execution's child runs have taken so far.
SELECT sub_workflow_nodes FROM workflow_executions WHERE id = @id;
