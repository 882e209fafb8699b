-- name: QueueInsertBatch :many
-- A bulk enqueue's items and their audit rows in one statement: one plan,
-- one round trip and one firing of the counters' statement triggers for
-- the whole batch. A zero not_before means none; every available_at is on
-- database time and never before now(). A concurrency_limit of 0 means
-- the item has no concurrency key (keys may resolve to ''; limits are at
-- least 1): both are stored NULL, as is the key's start rate
-- (concurrency_rate, the definition's, the same for every item).
-- Returns each item's id and status, in no particular order.
WITH items AS (
    SELECT unnest(@ids::uuid[]) AS id, unnest(@inputs::jsonb[]) AS input, unnest(@priorities::smallint[]) AS priority,
           unnest(@not_befores::timestamptz[]) AS not_before, unnest(@idempotency_keys::text[]) AS idempotency_key,
           unnest(@concurrency_keys::text[]) AS concurrency_key, unnest(@concurrency_limits::int[]) AS concurrency_limit
), inserted AS (
    INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, input, priority, trace_context, available_at,
                                          concurrency_key, concurrency_limit, concurrency_rate, concurrency_rate_per, concurrency_burst)
    SELECT i.id, @workspace_id, @workflow_definition_id, i.input, i.priority, sqlc.narg(trace_context),
           greatest(now(), i.not_before), CASE WHEN i.concurrency_limit > 0 THEN i.concurrency_key END,
           nullif(i.concurrency_limit, 0),
           CASE WHEN i.concurrency_limit > 0 THEN sqlc.narg(concurrency_rate)::int END,
           CASE WHEN i.concurrency_limit > 0 THEN sqlc.narg(concurrency_rate_per)::text END,
           CASE WHEN i.concurrency_limit > 0 THEN sqlc.narg(concurrency_burst)::int END
    FROM items i
    RETURNING id, status, available_at
), audit AS (
    INSERT INTO activity (id, workspace_id, actor, action, subject_id, details)
    SELECT gen_random_uuid(), @workspace_id, @actor::text, 'execution.enqueued', i.id,
           jsonb_strip_nulls(jsonb_build_object('workflowDefinitionId', @workflow_definition_id::uuid, 'priority', i.priority,
                                                'idempotencyKey', nullif(i.idempotency_key, ''), 'batch', true))
    FROM items i
)
SELECT ins.id, ins.status FROM inserted ins;

-- name: IdempotencyKeyClaimBatch :many
-- IdempotencyKeyClaim for a batch's keys (distinct within the batch):
-- returns the keys claimed; a key not returned is taken, and its owner is
-- read with IdempotencyKeyGetBatch.
INSERT INTO idempotency_keys (workspace_id, key, request_hash, queue_id)
SELECT @workspace_id, k.key, k.request_hash, k.queue_id
FROM (SELECT unnest(@keys::text[]) AS key, unnest(@request_hashes::bytea[]) AS request_hash,
             unnest(@queue_ids::uuid[]) AS queue_id) AS k
ORDER BY k.key
ON CONFLICT (workspace_id, key) DO UPDATE
SET request_hash = EXCLUDED.request_hash, queue_id = EXCLUDED.queue_id, created_at = now()
WHERE idempotency_keys.created_at <= now() - make_interval(secs => @retention_seconds::float8)
RETURNING key;

-- name: IdempotencyKeyGetBatch :many
-- The requests that hold a batch's taken keys, with their items' status
-- (NULL when the item completed and was deleted).
SELECT k.key, k.request_hash, k.queue_id, q.status AS queue_status
FROM idempotency_keys k LEFT JOIN workflow_execution_queue q ON q.id = k.queue_id
WHERE k.workspace_id = @workspace_id AND k.key = ANY(@keys::text[]);
