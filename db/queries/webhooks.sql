-- name: WebhookEndpointInsert :one
-- Inserts the endpoint unless its workspace already has max_endpoints;
-- the caller holds the workspace's row lock, so two creates cannot both
-- pass the count.
INSERT INTO webhook_endpoints (id, workspace_id, url, events, workflow_definition_id, secret)
SELECT @id, @workspace_id, @url, @events::text[], sqlc.narg(workflow_definition_id), @secret
WHERE (SELECT count(*) FROM webhook_endpoints WHERE workspace_id = @workspace_id) < @max_endpoints::int
RETURNING *;

-- name: WorkspaceLockForWebhooks :one
SELECT id FROM workspaces WHERE id = @id FOR NO KEY UPDATE;

-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoints WHERE id = @id;

-- name: WebhookEndpointList :many
SELECT * FROM webhook_endpoints WHERE workspace_id = @workspace_id ORDER BY created_at, id;

-- name: WebhookEndpointDelete :execrows
DELETE FROM webhook_endpoints WHERE id = @id;

-- name: WebhookDeliveriesEnqueue :execrows
-- The deliveries of one execution's end, one per endpoint of its
-- workspace that takes the event (and, if it names one, is for the
-- execution's definition), in the transaction that records the end. The
-- payload is the Standard Webhooks envelope: type, timestamp, data.
INSERT INTO webhook_deliveries (id, endpoint_id, workspace_id, execution_id, event_type, payload)
SELECT gen_random_uuid(), ep.id, e.workspace_id, e.id, @event_type::text,
       jsonb_build_object(
           'type', @event_type::text,
           'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'data', jsonb_build_object(
               'executionId', e.id, 'queueId', e.queue_id, 'workspaceId', e.workspace_id,
               'workflowDefinitionId', e.workflow_definition_id, 'workflowVersion', e.workflow_version,
               'status', e.status, 'startedAt', e.started_at, 'completedAt', e.completed_at,
               'durationMs', e.duration_ms, 'error', e.error))
FROM workflow_executions e
JOIN webhook_endpoints ep ON ep.workspace_id = e.workspace_id
WHERE e.id = @execution_id AND @event_type::text = ANY (ep.events)
  AND (ep.workflow_definition_id IS NULL OR ep.workflow_definition_id = e.workflow_definition_id);

-- name: WebhookNotify :exec
SELECT pg_notify('sluice_webhooks', '');

-- name: WebhookDeliveriesClaim :many
-- Claims due deliveries for sending: at most per_workspace a workspace,
-- less what this sender already has in flight for it (busy_*), so one
-- workspace's backlog or slow endpoint never fills the batch. A claim
-- counts the attempt and moves next_attempt_at past the lease, so a
-- sender that dies mid-send leaves the delivery due again after it (at
-- least once). SKIP LOCKED lets several senders claim side by side.
WITH busy AS (
    SELECT unnest(@busy_workspace_ids::uuid[]) AS workspace_id, unnest(@busy_counts::int[]) AS n
), cap AS (
    SELECT @per_workspace::int AS per_workspace
), eligible AS (
    SELECT x.id FROM (
        SELECT d.id, d.workspace_id,
               row_number() OVER (PARTITION BY d.workspace_id ORDER BY d.next_attempt_at, d.id) AS rn
        FROM webhook_deliveries d
        WHERE d.status = 'PENDING' AND d.next_attempt_at <= now()
    ) x
    CROSS JOIN cap
    LEFT JOIN busy b ON b.workspace_id = x.workspace_id
    WHERE x.rn <= cap.per_workspace - coalesce(b.n, 0)
), picked AS (
    SELECT d.id FROM webhook_deliveries d
    WHERE d.id IN (SELECT id FROM eligible)
      AND d.status = 'PENDING' AND d.next_attempt_at <= now()
    ORDER BY d.next_attempt_at, d.id
    LIMIT @max_rows
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries d
SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => @lease_seconds::float8)
FROM picked p, webhook_endpoints ep
WHERE d.id = p.id AND ep.id = d.endpoint_id
RETURNING d.id, d.workspace_id, d.endpoint_id, d.event_type, d.payload, d.attempts, d.window_start, ep.url, ep.secret;

-- name: WebhookDeliveryRecordAttempt :execrows
-- Records how a claimed attempt ended. Fenced by the attempt number: an
-- answer that comes after the lease ran out and another sender claimed
-- the delivery again changes nothing.
UPDATE webhook_deliveries
SET status = @status, last_status_code = sqlc.narg(last_status_code), last_error = sqlc.narg(last_error),
    next_attempt_at = @next_attempt_at,
    delivered_at = CASE WHEN @status = 'DELIVERED' THEN now() END
WHERE id = @id AND attempts = @attempts AND status = 'PENDING';

-- name: WebhookDeliveryGet :one
SELECT d.*, ep.workspace_id AS endpoint_workspace_id FROM webhook_deliveries d
JOIN webhook_endpoints ep ON ep.id = d.endpoint_id
WHERE d.id = @id;

-- name: WebhookDeliveryList :many
-- An endpoint's deliveries, newest first, keyset-paged on (created_at, id).
SELECT * FROM webhook_deliveries
WHERE endpoint_id = @endpoint_id
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
  AND (sqlc.narg(before_created_at)::timestamptz IS NULL
       OR (created_at, id) < (sqlc.narg(before_created_at)::timestamptz, sqlc.narg(before_id)::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @max_rows;

-- name: WebhookDeliveryResend :one
-- Sends a delivery again now, with a new retry period; one that is
-- PENDING is only brought forward.
UPDATE webhook_deliveries
SET status = 'PENDING', next_attempt_at = now(), window_start = now(), delivered_at = NULL
WHERE id = @id
RETURNING *;

-- name: WebhookDeliveriesDeleteFinished :execrows
-- Retention: finished deliveries older than the cut, a batch at a time.
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT f.id FROM webhook_deliveries f
    WHERE f.status <> 'PENDING' AND f.created_at < @before::timestamptz
    ORDER BY f.created_at LIMIT @max_rows);
