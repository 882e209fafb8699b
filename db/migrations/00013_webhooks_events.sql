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

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
