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
    coalesce(o.outbound_hosts, p.outbound_hosts)::integer AS outbound_hosts,
    coalesce(o.sub_workflow_nodes, p.sub_workflow_nodes)::integer AS sub_workflow_nodes,
    coalesce(o.stored_executions, p.stored_executions)::integer AS stored_executions,
    coalesce(o.retry_after_rounds, p.retry_after_rounds)::integer AS retry_after_rounds
FROM workspaces w
JOIN plans p ON p.name = w.plan
LEFT JOIN workspace_limits o ON o.workspace_id = w.id
WHERE w.id = @workspace_id;

-- name: WorkspaceQuotasWorkerOverrides :many
-- The workspaces with their own nodes in flight, FOR_EACH cap or
-- Retry-After rounds, for the worker's snapshot (engine.QuotaSnapshot).
-- The admin sets them one by one, so they are few.
SELECT workspace_id, nodes_in_flight, workspace_nodes_in_flight, for_each_items, retry_after_rounds
FROM workspace_limits
WHERE nodes_in_flight IS NOT NULL OR workspace_nodes_in_flight IS NOT NULL OR for_each_items IS NOT NULL
    OR retry_after_rounds IS NOT NULL;
