-- +goose Up
-- The payload bytes of each event accepted for a run, so that the events
-- of one run are bounded together (domain.Quotas.EventBytesPerRun): each
-- is a signal in the run's Temporal history the moment it is sent, before
-- any node takes it. Events accepted before this migration count as 0.
ALTER TABLE workflow_execution_events ADD COLUMN bytes integer NOT NULL DEFAULT 0 CHECK (bytes >= 0);

-- +goose Down
ALTER TABLE workflow_execution_events DROP COLUMN bytes;
