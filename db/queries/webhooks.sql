-- name: WebhookEndpointInsert :one
-- Inserts the endpoint unless its workspace already has max_endpoints;
-- the caller holds the workspace's row lock, so two creates cannot both
-- pass the count. Deleted endpoints, whose rows wait for the purge, do
-- not count. The secret is stored sealed only.
INSERT INTO webhook_endpoints (id, workspace_id, url, events, workflow_definition_id, secret_sealed, secret_key_id)
SELECT @id, @workspace_id, @url, @events::text[], sqlc.narg(workflow_definition_id), @secret_sealed, @secret_key_id
WHERE (SELECT count(*) FROM webhook_endpoints WHERE workspace_id = @workspace_id AND deleted_at IS NULL) < @max_endpoints::int
RETURNING *;

-- name: WorkspaceLockForWebhooks :one
SELECT id FROM workspaces WHERE id = @id FOR NO KEY UPDATE;

-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoints WHERE id = @id AND deleted_at IS NULL;

-- name: WebhookEndpointList :many
SELECT * FROM webhook_endpoints WHERE workspace_id = @workspace_id AND deleted_at IS NULL ORDER BY created_at, id;

-- name: WebhookEndpointDelete :execrows
-- Marks the endpoint deleted, whatever its backlog: from now on nothing is
-- written to it or sent from it, and the senders' purge deletes its
-- deliveries in batches and then the row (WebhookDeliveriesDeleteOfDeleted,
-- WebhookEndpointsDeleteEmptied).
UPDATE webhook_endpoints SET deleted_at = now() WHERE id = @id AND deleted_at IS NULL;

-- name: WebhookEndpointsAnyLive :one
-- Whether any endpoint is stored, which a role without a secret key
-- refuses to start over.
SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE deleted_at IS NULL)::bool;

-- name: WebhookEndpointsToSeal :many
-- Endpoints whose secret is not sealed under the current key (plaintext,
-- from before secrets were sealed, or sealed under a previous key), in
-- id order after @after_id, locked so two starting processes seal each
-- once.
SELECT id, secret, secret_sealed, secret_key_id FROM webhook_endpoints
WHERE secret_key_id IS DISTINCT FROM @key_id::text AND id > @after_id
ORDER BY id LIMIT @max_rows
FOR UPDATE SKIP LOCKED;

-- name: WebhookEndpointSeal :exec
UPDATE webhook_endpoints SET secret = NULL, secret_sealed = @secret_sealed, secret_key_id = @secret_key_id WHERE id = @id;

-- name: WebhookDeliveriesLock :one
-- Takes, for the rest of the transaction that records an execution's
-- end, the lock that orders the delivery writes of its workspace, so the
-- counts WebhookDeliveriesCount reads cannot change before the insert:
-- the bound holds exactly. No row (and no lock) when no endpoint of the
-- workspace takes the event, which is every end of most workspaces.
SELECT e.workspace_id FROM workflow_executions e
CROSS JOIN LATERAL (SELECT pg_advisory_xact_lock(7305002, hashtext(e.workspace_id::text))) l
WHERE e.id = @execution_id
  AND EXISTS (SELECT 1 FROM webhook_endpoints ep
              WHERE ep.workspace_id = e.workspace_id AND @event_type::text = ANY (ep.events) AND ep.deleted_at IS NULL
                AND (ep.workflow_definition_id IS NULL OR ep.workflow_definition_id = e.workflow_definition_id));

-- name: WebhookDeliveriesLockWorkspace :exec
-- WebhookDeliveriesLock's lock, for a resend, which knows the workspace.
SELECT pg_advisory_xact_lock(7305002, hashtext(w.id::text)) FROM workspaces w WHERE w.id = @workspace_id;

-- name: WebhookDeliveriesCount :one
-- A workspace's stored and PENDING deliveries, each counted up to its
-- bound and no further, so the count costs at most the bound's index
-- entries whatever the workspace stores. The stored ones are read through
-- its endpoints (webhook_deliveries_endpoint_idx), so no index on the
-- workspace alone tempts the claim's walk of the PENDING ones away from
-- theirs.
SELECT
    (SELECT count(*) FROM (SELECT 1 FROM webhook_endpoints ep JOIN webhook_deliveries d ON d.endpoint_id = ep.id
                           WHERE ep.workspace_id = @workspace_id LIMIT @max_stored::int) s)::int AS stored,
    (SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries d WHERE d.workspace_id = @workspace_id AND d.status = 'PENDING'
                           LIMIT @max_pending::int) p)::int AS pending;

-- name: WebhookDeliveriesEnqueue :many
-- The deliveries of one execution's end, one per endpoint of its
-- workspace that takes the event (and, if it names one, is for the
-- execution's definition), oldest endpoint first and at most @max_rows
-- (the room its workspace's bound leaves), in the transaction that
-- records the end. The payload is the Standard Webhooks envelope: type,
-- timestamp, data. Returns the endpoints written to.
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
WHERE e.id = @execution_id AND @event_type::text = ANY (ep.events) AND ep.deleted_at IS NULL
  AND (ep.workflow_definition_id IS NULL OR ep.workflow_definition_id = e.workflow_definition_id)
ORDER BY ep.created_at, ep.id
LIMIT @max_rows::int
RETURNING endpoint_id;

-- name: WebhookEndpointsCountDropped :execrows
-- Counts, on each endpoint that takes the end's event but was not
-- written to (@written), the delivery its workspace's bound dropped.
UPDATE webhook_endpoints ep
SET deliveries_dropped = ep.deliveries_dropped + 1, last_dropped_at = now()
FROM workflow_executions e
WHERE e.id = @execution_id AND ep.workspace_id = e.workspace_id AND @event_type::text = ANY (ep.events) AND ep.deleted_at IS NULL
  AND (ep.workflow_definition_id IS NULL OR ep.workflow_definition_id = e.workflow_definition_id)
  AND NOT (ep.id = ANY (@written::uuid[]));

-- name: WebhookDeliveriesClaim :many
-- Claims due deliveries for sending: at most per_workspace a workspace,
-- less what this sender already has in flight for it (busy_*), so one
-- workspace's backlog or slow endpoint never fills the batch. The
-- workspaces with PENDING deliveries are found by a skip over
-- webhook_deliveries_pending_idx (one probe each), and each one's due
-- deliveries are read oldest first from the same index, at most its
-- share: the claim reads a few rows per waiting workspace, never the
-- backlog behind them. A claim counts the attempt and moves
-- next_attempt_at past the lease, so a sender that dies mid-send leaves
-- the delivery due again after it (at least once). SKIP LOCKED lets
-- several senders claim side by side. A deleted endpoint's deliveries
-- are passed over (at most the workspace's bound of PENDING ones, until
-- the purge deletes them).
WITH RECURSIVE waiting AS (
    (SELECT d.workspace_id FROM webhook_deliveries d WHERE d.status = 'PENDING' ORDER BY d.workspace_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.workspace_id FROM webhook_deliveries d
            WHERE d.status = 'PENDING' AND d.workspace_id > w.workspace_id ORDER BY d.workspace_id LIMIT 1)
    FROM waiting w WHERE w.workspace_id IS NOT NULL
), busy AS (
    SELECT unnest(@busy_workspace_ids::uuid[]) AS workspace_id, unnest(@busy_counts::int[]) AS n
), cap AS (
    SELECT @per_workspace::int AS per_workspace
), eligible AS (
    SELECT x.id, x.next_attempt_at FROM waiting w
    CROSS JOIN cap
    LEFT JOIN busy b ON b.workspace_id = w.workspace_id
    CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.workspace_id = w.workspace_id AND d.status = 'PENDING' AND d.next_attempt_at <= now()
          AND NOT EXISTS (SELECT 1 FROM webhook_endpoints gone WHERE gone.id = d.endpoint_id AND gone.deleted_at IS NOT NULL)
        ORDER BY d.next_attempt_at, d.id
        LIMIT greatest(cap.per_workspace - coalesce(b.n, 0), 0)
        FOR UPDATE OF d SKIP LOCKED
    ) x
    WHERE w.workspace_id IS NOT NULL
), picked AS (
    SELECT e.id FROM eligible e
    ORDER BY e.next_attempt_at, e.id
    LIMIT @max_rows
)
UPDATE webhook_deliveries d
SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => @lease_seconds::float8)
FROM picked p, webhook_endpoints ep
WHERE d.id = p.id AND ep.id = d.endpoint_id
RETURNING d.id, d.workspace_id, d.endpoint_id, d.event_type, d.payload, d.attempts, d.window_start, ep.url,
          ep.secret, ep.secret_sealed, ep.secret_key_id;

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
WHERE d.id = @id AND ep.deleted_at IS NULL;

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
-- Retention: finished deliveries older than the cut, a batch at a time
-- (the purge's pass repeats it until a batch comes back short).
-- Every worker's sender purges, so rows another purge holds are skipped
-- (SKIP LOCKED) rather than waited for.
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT f.id FROM webhook_deliveries f
    WHERE f.status <> 'PENDING' AND f.created_at < @before::timestamptz
    ORDER BY f.created_at LIMIT @max_rows
    FOR UPDATE SKIP LOCKED);

-- name: WebhookDeliveriesDeleteOfDeleted :execrows
-- Deletes a batch of the deliveries of deleted endpoints, whatever their
-- status, skipping rows another purge or a sender holds.
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT d.id FROM webhook_endpoints ep
    JOIN webhook_deliveries d ON d.endpoint_id = ep.id
    WHERE ep.deleted_at IS NOT NULL
    LIMIT @max_rows
    FOR UPDATE OF d SKIP LOCKED);

-- name: WebhookEndpointsDeleteEmptied :execrows
-- Deletes the rows of deleted endpoints that have no delivery left.
DELETE FROM webhook_endpoints WHERE id IN (
    SELECT ep.id FROM webhook_endpoints ep
    WHERE ep.deleted_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = ep.id)
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED);
