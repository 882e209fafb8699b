-- name: WorkspaceQuotasGet :one
-- A workspace's quotas in force: its own where set, else its plan's. Read
-- inside the transaction that spends a quota, after the lock that
-- serialises that spending, so an edit that has returned is used by the
-- next request.
SELECT
    w.plan,
    coalesce(o.pending_items, p.pending_items)::integer AS pending_items,
    coalesce(o.stored_items, p.stored_items)::integer AS stored_items,
    coalesce(o.definitions, p.definitions)::integer AS definitions,
    coalesce(o.definition_versions, p.definition_versions)::integer AS definition_versions,
    coalesce(o.schedules, p.schedules)::integer AS schedules,
    coalesce(o.schedule_min_interval_seconds, p.schedule_min_interval_seconds)::integer AS schedule_min_interval_seconds,
    coalesce(o.node_attempts, p.node_attempts)::integer AS node_attempts,
    coalesce(o.node_timeout_seconds, p.node_timeout_seconds)::integer AS node_timeout_seconds,
    coalesce(o.run_timeout_seconds, p.run_timeout_seconds)::integer AS run_timeout_seconds,
    coalesce(o.nodes_in_flight, p.nodes_in_flight)::integer AS nodes_in_flight,
    coalesce(o.workspace_nodes_in_flight, p.workspace_nodes_in_flight)::integer AS workspace_nodes_in_flight,
    coalesce(o.for_each_items, p.for_each_items)::integer AS for_each_items,
    coalesce(o.webhook_endpoints, p.webhook_endpoints)::integer AS webhook_endpoints,
    coalesce(o.outbound_hosts, p.outbound_hosts)::integer AS outbound_hosts
FROM workspaces w
JOIN plans p ON p.name = w.plan
LEFT JOIN workspace_limits o ON o.workspace_id = w.id
WHERE w.id = @workspace_id;

-- name: PlanQuotasUpdate :one
-- Sets the given quotas of a plan (NULL leaves one as it is).
UPDATE plans SET
    pending_items = coalesce(sqlc.narg(pending_items), pending_items),
    stored_items = coalesce(sqlc.narg(stored_items), stored_items),
    definitions = coalesce(sqlc.narg(definitions), definitions),
    definition_versions = coalesce(sqlc.narg(definition_versions), definition_versions),
    schedules = coalesce(sqlc.narg(schedules), schedules),
    schedule_min_interval_seconds = coalesce(sqlc.narg(schedule_min_interval_seconds), schedule_min_interval_seconds),
    node_attempts = coalesce(sqlc.narg(node_attempts), node_attempts),
    node_timeout_seconds = coalesce(sqlc.narg(node_timeout_seconds), node_timeout_seconds),
    run_timeout_seconds = coalesce(sqlc.narg(run_timeout_seconds), run_timeout_seconds),
    nodes_in_flight = coalesce(sqlc.narg(nodes_in_flight), nodes_in_flight),
    workspace_nodes_in_flight = coalesce(sqlc.narg(workspace_nodes_in_flight), workspace_nodes_in_flight),
    for_each_items = coalesce(sqlc.narg(for_each_items), for_each_items),
    webhook_endpoints = coalesce(sqlc.narg(webhook_endpoints), webhook_endpoints),
    outbound_hosts = coalesce(sqlc.narg(outbound_hosts), outbound_hosts),
    retention_days = coalesce(sqlc.narg(retention_days), retention_days),
    updated_at = now()
WHERE name = @name
RETURNING *;

-- name: WorkspaceQuotasSet :one
-- Replaces a workspace's own quotas (NULL keeps its plan's); its row is
-- made by WorkspaceLimitsSet in the same transaction.
UPDATE workspace_limits SET
    pending_items = sqlc.narg(pending_items),
    stored_items = sqlc.narg(stored_items),
    definitions = sqlc.narg(definitions),
    definition_versions = sqlc.narg(definition_versions),
    schedules = sqlc.narg(schedules),
    schedule_min_interval_seconds = sqlc.narg(schedule_min_interval_seconds),
    node_attempts = sqlc.narg(node_attempts),
    node_timeout_seconds = sqlc.narg(node_timeout_seconds),
    run_timeout_seconds = sqlc.narg(run_timeout_seconds),
    nodes_in_flight = sqlc.narg(nodes_in_flight),
    workspace_nodes_in_flight = sqlc.narg(workspace_nodes_in_flight),
    for_each_items = sqlc.narg(for_each_items),
    webhook_endpoints = sqlc.narg(webhook_endpoints),
    outbound_hosts = sqlc.narg(outbound_hosts),
    updated_at = now()
WHERE workspace_id = @workspace_id
RETURNING *;

-- name: WorkspaceQuotasWorkerOverrides :many
-- The workspaces with their own nodes in flight or FOR_EACH cap, for the
-- worker's snapshot (engine.QuotaSnapshot). The admin sets them one by
-- one, so they are few.
SELECT workspace_id, nodes_in_flight, workspace_nodes_in_flight, for_each_items
FROM workspace_limits
WHERE nodes_in_flight IS NOT NULL OR workspace_nodes_in_flight IS NOT NULL OR for_each_items IS NOT NULL;
