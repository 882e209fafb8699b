-- +goose Up
-- An enqueue's own run deadline (runTimeout), in milliseconds; the
-- version's runTimeout applies too, the shorter winning.
ALTER TABLE workflow_execution_queue ADD COLUMN run_timeout_ms bigint CHECK (run_timeout_ms > 0);

-- Retry from the failed node (POST .../executions/{id}/retry): the queue
-- item names the execution it retries and records that execution's
-- definition version, which the claim runs (see 00019); the new execution names the one it retries once its workflow has
-- read what it reuses. No foreign keys: retention may delete the original
-- (its reused outputs were read at the start) without touching the retry.
ALTER TABLE workflow_execution_queue
    ADD COLUMN retry_of uuid,
    ADD COLUMN pinned_version integer CHECK (pinned_version >= 1);
ALTER TABLE workflow_executions ADD COLUMN retry_of uuid;

-- +goose Down
ALTER TABLE workflow_executions DROP COLUMN retry_of;
ALTER TABLE workflow_execution_queue DROP COLUMN pinned_version, DROP COLUMN retry_of, DROP COLUMN run_timeout_ms;
