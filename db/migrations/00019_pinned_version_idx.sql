-- +goose Up
-- The queue items that pin a definition version (retries, and requeues of
-- them), so that retention's deletion of replaced versions passes over a
-- version an item will still run with one probe of this small index.
CREATE INDEX workflow_execution_queue_pinned_idx ON workflow_execution_queue (workflow_definition_id, pinned_version)
    WHERE pinned_version IS NOT NULL;

-- +goose Down
DROP INDEX workflow_execution_queue_pinned_idx;
