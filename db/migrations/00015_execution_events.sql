-- +goose Up
-- The events sent to running executions' WAIT_FOR_EVENT nodes: one per
-- node at most (the primary key), so a tenant cannot grow a run's Temporal
-- history with events nobody reads; the row is written before the signal
-- and removed again when the signal cannot be sent. The execution's
-- deletion (retention) takes its events along.
CREATE TABLE workflow_execution_events (
    execution_id uuid NOT NULL REFERENCES workflow_executions (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    node_key     text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, name)
);

-- +goose Down
DROP TABLE workflow_execution_events;
