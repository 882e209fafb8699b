-- +goose Up
-- Completion webhooks (README "Completion webhooks"). An endpoint is a
-- workspace's HTTPS URL with the events it takes and, optionally, the one
-- definition whose runs it hears of. Its secret signs every delivery
-- (Standard Webhooks) and so is kept as it is: it is shown once, when the
-- endpoint is created, and never answered again.
CREATE TABLE webhook_endpoints (
    id                     uuid PRIMARY KEY,
    workspace_id           uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    url                    text NOT NULL,
    events                 text[] NOT NULL,
    workflow_definition_id uuid,
    secret                 text NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_workspace_idx ON webhook_endpoints (workspace_id, id);

-- One row per (endpoint, execution end): written in the transaction that
-- records the execution's end, so an outcome is never recorded without its
-- deliveries, and sent at least once by the sender (app.WebhookSender).
-- The id is the webhook-id every attempt carries, so a receiver can drop
-- repeats. window_start opens the retry period; a resend opens it again.
CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    endpoint_id      uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    workspace_id     uuid NOT NULL,
    execution_id     uuid NOT NULL,
    event_type       text NOT NULL,
    payload          jsonb NOT NULL,
    status           text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    window_start     timestamptz NOT NULL DEFAULT now(),
    last_status_code integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz
);
-- The sender's claim reads only due PENDING rows.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'PENDING';
-- An endpoint's deliveries, newest first.
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
-- Retention deletes finished deliveries by age.
CREATE INDEX webhook_deliveries_finished_idx ON webhook_deliveries (created_at) WHERE status <> 'PENDING';


-- The live-event feed (README "Live events"), table feed_events: what the
-- event streams send (not the events sent to WAIT_FOR_EVENT nodes), written
-- by triggers in the transactions that change what they tell of, so no
-- change is ever missed or told before it commits. id orders inserts, but
-- transactions commit in another order, so a stream cannot resume from
-- it; seq is given after commit by one sequencer at a time (FeedSequence,
-- under an advisory lock), in id order, so every row with a seq is
-- committed and no later commit can take a smaller one: Last-Event-ID is a
-- seq. Rows are kept for SLUICE_STREAM_RETENTION.
CREATE TABLE feed_events (
    id           bigserial PRIMARY KEY,
    seq          bigint UNIQUE,
    workspace_id uuid NOT NULL,
    execution_id uuid,
    kind         text NOT NULL,
    data         jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE SEQUENCE feed_events_seq;
CREATE INDEX feed_events_unsequenced_idx ON feed_events (id) WHERE seq IS NULL;
CREATE INDEX feed_events_execution_idx ON feed_events (execution_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX feed_events_workspace_idx ON feed_events (workspace_id, seq) WHERE seq IS NOT NULL;
CREATE INDEX feed_events_created_idx ON feed_events (created_at);

-- +goose StatementBegin
CREATE FUNCTION feed_from_nodes() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE FUNCTION feed_from_executions() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE FUNCTION feed_from_queue() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER workflow_execution_nodes_feed AFTER INSERT OR UPDATE ON workflow_execution_nodes
    FOR EACH ROW EXECUTE FUNCTION feed_from_nodes();
-- A run's events are written at its transaction's commit (a deferred
-- constraint trigger), after the node records written with it, so a
-- stream tells of a run's last nodes before its end.
CREATE CONSTRAINT TRIGGER workflow_executions_feed AFTER INSERT OR UPDATE OF status ON workflow_executions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION feed_from_executions();
CREATE TRIGGER workflow_execution_queue_feed AFTER INSERT OR UPDATE OF status OR DELETE ON workflow_execution_queue
    FOR EACH ROW EXECUTE FUNCTION feed_from_queue();

-- +goose Down
DROP TRIGGER workflow_execution_queue_feed ON workflow_execution_queue;
DROP TRIGGER workflow_executions_feed ON workflow_executions;
DROP TRIGGER workflow_execution_nodes_feed ON workflow_execution_nodes;
DROP FUNCTION feed_from_queue();
DROP FUNCTION feed_from_executions();
DROP FUNCTION feed_from_nodes();
DROP SEQUENCE feed_events_seq;
DROP TABLE feed_events;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
