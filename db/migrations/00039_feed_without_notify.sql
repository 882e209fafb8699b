-- +goose Up
-- The feed's triggers no longer NOTIFY. A transaction that ran NOTIFY
-- takes one lock for the whole database at commit and holds it through
-- its commit's WAL flush, and these triggers run in most of Sluice's
-- writes (a run's start and end, its node records, every queue item's
-- change), so those commits waited for each other (BenchmarkFloodSLO,
-- docs/benchmarks.md#the-slo-under-a-flood). The store that commits them
-- wakes the event streams after the commit instead, coalesced
-- (adapters/postgres/notify.go); a wake-up is only a hint, as the
-- streams read events by their sequence.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION feed_from_nodes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status AND OLD.attempt = NEW.attempt THEN
        RETURN NULL;
    END IF;
    INSERT INTO feed_events (workspace_id, execution_id, kind, data)
    SELECT e.workspace_id, NEW.execution_id,
           CASE WHEN NEW.status = 'RUNNING' THEN 'node.started' ELSE 'node.finished' END,
           jsonb_build_object('executionId', NEW.execution_id, 'key', NEW.node_key, 'type', NEW.node_type,
                              'status', NEW.status, 'attempt', NEW.attempt,
                              'startedAt', NEW.started_at, 'completedAt', NEW.completed_at)
    FROM workflow_executions e WHERE e.id = NEW.execution_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION feed_from_executions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO feed_events (workspace_id, execution_id, kind, data)
    VALUES (NEW.workspace_id, NEW.id,
            CASE WHEN NEW.status = 'RUNNING' THEN 'run.started' ELSE 'run.finished' END,
            jsonb_build_object('executionId', NEW.id, 'queueId', NEW.queue_id,
                               'workflowDefinitionId', NEW.workflow_definition_id, 'status', NEW.status,
                               'startedAt', NEW.started_at, 'completedAt', NEW.completed_at,
                               'durationMs', NEW.duration_ms));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION feed_from_queue() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r workflow_execution_queue;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := OLD;
    ELSE
        r := NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO feed_events (workspace_id, execution_id, kind, data)
    VALUES (r.workspace_id, NULL, 'queue.' || lower(TG_OP),
            jsonb_build_object('queueId', r.id, 'status', r.status, 'priority', r.priority,
                               'executionId', r.execution_id, 'workflowDefinitionId', r.workflow_definition_id));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION feed_from_nodes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status AND OLD.attempt = NEW.attempt THEN
        RETURN NULL;
    END IF;
    INSERT INTO feed_events (workspace_id, execution_id, kind, data)
    SELECT e.workspace_id, NEW.execution_id,
           CASE WHEN NEW.status = 'RUNNING' THEN 'node.started' ELSE 'node.finished' END,
           jsonb_build_object('executionId', NEW.execution_id, 'key', NEW.node_key, 'type', NEW.node_type,
                              'status', NEW.status, 'attempt', NEW.attempt,
                              'startedAt', NEW.started_at, 'completedAt', NEW.completed_at)
    FROM workflow_executions e WHERE e.id = NEW.execution_id;
    PERFORM pg_notify('sluice_feed', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION feed_from_executions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO feed_events (workspace_id, execution_id, kind, data)
    VALUES (NEW.workspace_id, NEW.id,
            CASE WHEN NEW.status = 'RUNNING' THEN 'run.started' ELSE 'run.finished' END,
            jsonb_build_object('executionId', NEW.id, 'queueId', NEW.queue_id,
                               'workflowDefinitionId', NEW.workflow_definition_id, 'status', NEW.status,
                               'startedAt', NEW.started_at, 'completedAt', NEW.completed_at,
                               'durationMs', NEW.duration_ms));
    PERFORM pg_notify('sluice_feed', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION feed_from_queue() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r workflow_execution_queue;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := OLD;
    ELSE
        r := NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO feed_events (workspace_id, execution_id, kind, data)
    VALUES (r.workspace_id, NULL, 'queue.' || lower(TG_OP),
            jsonb_build_object('queueId', r.id, 'status', r.status, 'priority', r.priority,
                               'executionId', r.execution_id, 'workflowDefinitionId', r.workflow_definition_id));
    PERFORM pg_notify('sluice_feed', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
