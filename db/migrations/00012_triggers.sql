-- +goose Up
-- Schedules: a workspace's definitions run on a cron expression in a time
-- zone, or on a fixed interval. next_fire_at is the next tick to fire, NULL
-- while paused. The firing job locks a due row, writes the tick's queue
-- item and advances next_fire_at in one transaction, so a crash at any
-- line either fired the tick and moved on, or did neither.
CREATE TABLE schedules (
    id                     uuid PRIMARY KEY,
    workspace_id           uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    workflow_definition_id uuid NOT NULL REFERENCES workflow_definitions (id) ON DELETE CASCADE,
    name                   text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    cron_expression        text CHECK (length(cron_expression) BETWEEN 1 AND 200),
    time_zone              text NOT NULL DEFAULT 'UTC' CHECK (length(time_zone) BETWEEN 1 AND 64),
    interval_seconds       integer CHECK (interval_seconds >= 1),
    input                  jsonb NOT NULL DEFAULT '{}'::jsonb,
    priority               smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    overlap_policy         text NOT NULL CHECK (overlap_policy IN ('skip', 'queue')),
    paused_at              timestamptz,
    next_fire_at           timestamptz,
    last_tick              timestamptz,
    last_queue_id          uuid,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CHECK ((cron_expression IS NULL) <> (interval_seconds IS NULL)),
    CHECK ((paused_at IS NULL) = (next_fire_at IS NOT NULL))
);
CREATE INDEX schedules_workspace_idx ON schedules (workspace_id, created_at, id);
-- The firing job's scan: due schedules, oldest tick first.
CREATE INDEX schedules_due_idx ON schedules (next_fire_at) WHERE next_fire_at IS NOT NULL;

-- The tick a queue item was fired for. The unique index is the database's
-- own guard that no tick is fired twice, beside the row lock and the
-- advance of next_fire_at; it also finds a schedule's items for the
-- overlap policy.
ALTER TABLE workflow_execution_queue ADD COLUMN schedule_id uuid, ADD COLUMN schedule_tick timestamptz;
ALTER TABLE workflow_execution_queue ADD CHECK ((schedule_id IS NULL) = (schedule_tick IS NULL));
CREATE UNIQUE INDEX workflow_execution_queue_schedule_tick_idx
    ON workflow_execution_queue (schedule_id, schedule_tick) WHERE schedule_id IS NOT NULL;

-- +goose Down
DROP INDEX workflow_execution_queue_schedule_tick_idx;
ALTER TABLE workflow_execution_queue DROP COLUMN schedule_tick, DROP COLUMN schedule_id;
DROP TABLE schedules;
