-- +goose Up
-- The workspace view's failed-in-the-last-hour count reads a range of this
-- index, so its cost follows the recent failures, however long the
-- workspace's history.
CREATE INDEX workflow_executions_failed_idx ON workflow_executions (workspace_id, completed_at) WHERE status = 'FAILED';

-- +goose Down
DROP INDEX workflow_executions_failed_idx;
