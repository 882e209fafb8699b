-- name: PlansList :many
-- Every plan's limits, smallest plan first.
SELECT * FROM plans
ORDER BY array_position(ARRAY['FREE', 'PRO', 'ENTERPRISE']::text[], name);

-- name: PlanUpdate :one
-- Sets, in one write, the plan's figures the edit gives: a NULL figure is
-- left as it is, and the start rate is replaced (all NULL: none) only
-- when set_start_rate. Run after AdmissionLimitsWriteLock, so no claim
-- admits by the old values once this commits.
UPDATE plans SET
    max_running = coalesce(sqlc.narg(max_running), max_running),
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
    sub_workflow_nodes = coalesce(sqlc.narg(sub_workflow_nodes), sub_workflow_nodes),
    stored_executions = coalesce(sqlc.narg(stored_executions), stored_executions),
    retention_days = coalesce(sqlc.narg(retention_days), retention_days),
    floor = coalesce(sqlc.narg(floor), floor),
    weight = coalesce(sqlc.narg(weight), weight),
    start_rate = CASE WHEN @set_start_rate::bool THEN sqlc.narg(start_rate) ELSE start_rate END,
    start_rate_per = CASE WHEN @set_start_rate::bool THEN sqlc.narg(start_rate_per) ELSE start_rate_per END,
    start_burst = CASE WHEN @set_start_rate::bool THEN sqlc.narg(start_burst) ELSE start_burst END,
    updated_at = now()
WHERE name = @name
RETURNING *;

-- name: WorkspaceLimitsGet :one
SELECT * FROM workspace_limits WHERE workspace_id = @workspace_id;

-- name: WorkspaceLimitsSet :one
-- Replaces a workspace's own limits, in one write (NULL keeps its plan's).
-- Run after AdmissionLimitsWriteLock, as PlanUpdate is.
INSERT INTO workspace_limits (
    workspace_id, max_running, pending_items, stored_items, definitions, definition_versions, schedules,
    schedule_min_interval_seconds, node_attempts, node_timeout_seconds, run_timeout_seconds, nodes_in_flight,
    workspace_nodes_in_flight, for_each_items, webhook_endpoints, outbound_hosts, sub_workflow_nodes, stored_executions, start_rate, start_rate_per, start_burst, floor)
VALUES (
    @workspace_id, sqlc.narg(max_running), sqlc.narg(pending_items), sqlc.narg(stored_items), sqlc.narg(definitions),
    sqlc.narg(definition_versions), sqlc.narg(schedules), sqlc.narg(schedule_min_interval_seconds), sqlc.narg(node_attempts),
    sqlc.narg(node_timeout_seconds), sqlc.narg(run_timeout_seconds), sqlc.narg(nodes_in_flight),
    sqlc.narg(workspace_nodes_in_flight), sqlc.narg(for_each_items), sqlc.narg(webhook_endpoints), sqlc.narg(outbound_hosts),
    sqlc.narg(sub_workflow_nodes), sqlc.narg(stored_executions), sqlc.narg(start_rate), sqlc.narg(start_rate_per), sqlc.narg(start_burst), sqlc.narg(floor))
ON CONFLICT (workspace_id) DO UPDATE SET
    max_running = EXCLUDED.max_running, pending_items = EXCLUDED.pending_items, stored_items = EXCLUDED.stored_items,
    definitions = EXCLUDED.definitions, definition_versions = EXCLUDED.definition_versions, schedules = EXCLUDED.schedules,
    schedule_min_interval_seconds = EXCLUDED.schedule_min_interval_seconds, node_attempts = EXCLUDED.node_attempts,
    node_timeout_seconds = EXCLUDED.node_timeout_seconds, run_timeout_seconds = EXCLUDED.run_timeout_seconds,
    nodes_in_flight = EXCLUDED.nodes_in_flight, workspace_nodes_in_flight = EXCLUDED.workspace_nodes_in_flight,
    for_each_items = EXCLUDED.for_each_items, webhook_endpoints = EXCLUDED.webhook_endpoints,
    outbound_hosts = EXCLUDED.outbound_hosts, sub_workflow_nodes = EXCLUDED.sub_workflow_nodes, stored_executions = EXCLUDED.stored_executions, start_rate = EXCLUDED.start_rate, start_rate_per = EXCLUDED.start_rate_per,
    start_burst = EXCLUDED.start_burst, floor = EXCLUDED.floor, updated_at = now()
RETURNING *;
