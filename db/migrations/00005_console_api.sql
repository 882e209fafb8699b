-- +goose Up
-- An execution names the queue item it was started from, so a client that
-- enqueued finds its run by the queueId it was given, also after a
-- COMPLETED run's item is deleted. A retry reuses the item's execution id,
-- so an item has at most one execution. Executions written before this
-- migration whose item still exists are linked here; the others stay NULL.
ALTER TABLE workflow_executions ADD COLUMN queue_id uuid;
UPDATE workflow_executions e SET queue_id = q.id
FROM workflow_execution_queue q WHERE q.execution_id = e.id;
CREATE UNIQUE INDEX workflow_executions_queue_idx ON workflow_executions (workspace_id, queue_id) WHERE queue_id IS NOT NULL;

-- The executions list filtered by definition, newest first, reads a range
-- of this index instead of walking the whole workspace's history.
CREATE INDEX workflow_executions_definition_idx
    ON workflow_executions (workspace_id, workflow_definition_id, started_at DESC, id DESC);

-- The queue list is in the order the claim takes items (priority, then
-- age, then id; QueueClaimCandidates) and pages by that key, with or
-- without a status filter, so each is a range of an index and no sort.
DROP INDEX workflow_execution_queue_list_idx;
CREATE INDEX workflow_execution_queue_list_idx ON workflow_execution_queue (workspace_id, priority, created_at, id);
CREATE INDEX workflow_execution_queue_status_list_idx
    ON workflow_execution_queue (workspace_id, status, priority, created_at, id);

-- +goose Down
DROP INDEX workflow_execution_queue_status_list_idx;
DROP INDEX workflow_execution_queue_list_idx;
CREATE INDEX workflow_execution_queue_list_idx ON workflow_execution_queue (workspace_id, status, created_at);
DROP INDEX workflow_executions_definition_idx;
DROP INDEX workflow_executions_queue_idx;
ALTER TABLE workflow_executions DROP COLUMN queue_id;
