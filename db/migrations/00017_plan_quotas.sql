-- +goose Up
-- Plans as data, the rest of them (issue 18 item 1): every figure that
-- varies by plan beside max_running (00010) is a column of plans, seeded
-- with the defaults the SLUICE_QUOTA_*, SLUICE_NODES_IN_FLIGHT,
-- SLUICE_WORKSPACE_NODES_IN_FLIGHT, SLUICE_FOR_EACH_ITEMS,
-- SLUICE_WEBHOOK_ENDPOINTS_MAX and SLUICE_OUTBOUND_HOSTS_MAX variables had
-- (the last two the same for every plan), and a workspace may have its own in workspace_limits (NULL keeps
-- the plan's). Each figure is read where it is enforced: the quotas in the
-- transaction of the API operation that spends them, the caps when a
-- definition or enqueue is checked, the nodes in flight and FOR_EACH cap
-- when an execution starts. Durations are whole seconds. The CHECK bounds
-- are the domain's (domain.QuotaBounds); lowering a figure refuses new
-- spending only, nothing stored or running is touched.
ALTER TABLE plans
    ADD COLUMN pending_items                 integer NOT NULL DEFAULT 1000     CHECK (pending_items BETWEEN 1 AND 10000000),
    ADD COLUMN stored_items                  integer NOT NULL DEFAULT 2000     CHECK (stored_items BETWEEN 1 AND 10000000),
    ADD COLUMN definitions                   integer NOT NULL DEFAULT 20       CHECK (definitions BETWEEN 1 AND 1000000),
    ADD COLUMN definition_versions           integer NOT NULL DEFAULT 200      CHECK (definition_versions BETWEEN 1 AND 10000000),
    ADD COLUMN schedules                     integer NOT NULL DEFAULT 5        CHECK (schedules BETWEEN 1 AND 100000),
    ADD COLUMN schedule_min_interval_seconds integer NOT NULL DEFAULT 60       CHECK (schedule_min_interval_seconds BETWEEN 1 AND 86400),
    ADD COLUMN node_attempts                 integer NOT NULL DEFAULT 5        CHECK (node_attempts BETWEEN 1 AND 100),
    ADD COLUMN node_timeout_seconds          integer NOT NULL DEFAULT 300      CHECK (node_timeout_seconds BETWEEN 1 AND 604800),
    ADD COLUMN run_timeout_seconds           integer NOT NULL DEFAULT 86400    CHECK (run_timeout_seconds BETWEEN 1 AND 31536000),
    ADD COLUMN nodes_in_flight               integer NOT NULL DEFAULT 4        CHECK (nodes_in_flight BETWEEN 1 AND 1000),
    ADD COLUMN workspace_nodes_in_flight     integer NOT NULL DEFAULT 4        CHECK (workspace_nodes_in_flight BETWEEN 1 AND 10000),
    ADD COLUMN for_each_items                integer NOT NULL DEFAULT 100      CHECK (for_each_items BETWEEN 1 AND 100000),
    ADD COLUMN webhook_endpoints             integer NOT NULL DEFAULT 10       CHECK (webhook_endpoints BETWEEN 1 AND 1000),
    ADD COLUMN outbound_hosts                integer NOT NULL DEFAULT 100      CHECK (outbound_hosts BETWEEN 1 AND 10000),
    -- Days a plan's history is kept (the retention job deletes plan by
    -- plan, so there is no workspace override), SLUICE_RETENTION_DAYS's.
    ADD COLUMN retention_days                integer NOT NULL DEFAULT 7        CHECK (retention_days BETWEEN 1 AND 3650);
UPDATE plans SET pending_items = 10000, stored_items = 20000, definitions = 200, definition_versions = 2000,
    schedules = 50, schedule_min_interval_seconds = 10, node_attempts = 10, node_timeout_seconds = 1800,
    run_timeout_seconds = 604800, nodes_in_flight = 10, workspace_nodes_in_flight = 10, for_each_items = 1000,
    retention_days = 30
WHERE name = 'PRO';
UPDATE plans SET pending_items = 100000, stored_items = 200000, definitions = 2000, definition_versions = 20000,
    schedules = 500, schedule_min_interval_seconds = 1, node_attempts = 25, node_timeout_seconds = 3600,
    run_timeout_seconds = 2592000, nodes_in_flight = 25, workspace_nodes_in_flight = 15, for_each_items = 5000,
    retention_days = 90
WHERE name = 'ENTERPRISE';

ALTER TABLE workspace_limits
    ADD COLUMN pending_items                 integer CHECK (pending_items BETWEEN 1 AND 10000000),
    ADD COLUMN stored_items                  integer CHECK (stored_items BETWEEN 1 AND 10000000),
    ADD COLUMN definitions                   integer CHECK (definitions BETWEEN 1 AND 1000000),
    ADD COLUMN definition_versions           integer CHECK (definition_versions BETWEEN 1 AND 10000000),
    ADD COLUMN schedules                     integer CHECK (schedules BETWEEN 1 AND 100000),
    ADD COLUMN schedule_min_interval_seconds integer CHECK (schedule_min_interval_seconds BETWEEN 1 AND 86400),
    ADD COLUMN node_attempts                 integer CHECK (node_attempts BETWEEN 1 AND 100),
    ADD COLUMN node_timeout_seconds          integer CHECK (node_timeout_seconds BETWEEN 1 AND 604800),
    ADD COLUMN run_timeout_seconds           integer CHECK (run_timeout_seconds BETWEEN 1 AND 31536000),
    ADD COLUMN nodes_in_flight               integer CHECK (nodes_in_flight BETWEEN 1 AND 1000),
    ADD COLUMN workspace_nodes_in_flight     integer CHECK (workspace_nodes_in_flight BETWEEN 1 AND 10000),
    ADD COLUMN for_each_items                integer CHECK (for_each_items BETWEEN 1 AND 100000),
    ADD COLUMN webhook_endpoints             integer CHECK (webhook_endpoints BETWEEN 1 AND 1000),
    ADD COLUMN outbound_hosts                integer CHECK (outbound_hosts BETWEEN 1 AND 10000);

-- +goose Down
ALTER TABLE workspace_limits
    DROP COLUMN pending_items, DROP COLUMN stored_items, DROP COLUMN definitions, DROP COLUMN definition_versions,
    DROP COLUMN schedules, DROP COLUMN schedule_min_interval_seconds, DROP COLUMN node_attempts,
    DROP COLUMN node_timeout_seconds, DROP COLUMN run_timeout_seconds, DROP COLUMN nodes_in_flight,
    DROP COLUMN workspace_nodes_in_flight, DROP COLUMN for_each_items, DROP COLUMN webhook_endpoints, DROP COLUMN outbound_hosts;
ALTER TABLE plans
    DROP COLUMN pending_items, DROP COLUMN stored_items, DROP COLUMN definitions, DROP COLUMN definition_versions,
    DROP COLUMN schedules, DROP COLUMN schedule_min_interval_seconds, DROP COLUMN node_attempts,
    DROP COLUMN node_timeout_seconds, DROP COLUMN run_timeout_seconds, DROP COLUMN nodes_in_flight,
    DROP COLUMN workspace_nodes_in_flight, DROP COLUMN for_each_items, DROP COLUMN webhook_endpoints, DROP COLUMN outbound_hosts,
    DROP COLUMN retention_days;
