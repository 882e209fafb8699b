-- +goose Up
-- The claim's prefilter locks only the workspaces with an item due now
-- (QueuePendingWorkspaces): a workspace whose PENDING items all wait for
-- a notBefore or a back-off is left unlocked, takes no share of a batch,
-- and only says when its first item comes due. That is one probe of this
-- index per workspace with room: the earliest available_at of its
-- PENDING items. It also serves the claim's next due time
-- (ClaimNextDue: the first available_at ahead), which the partial index
-- of delayed items served, so that one goes and an enqueue still writes
-- one index entry for it.
CREATE INDEX workflow_execution_queue_due_idx ON workflow_execution_queue (workspace_id, available_at)
    WHERE status = 'PENDING';
DROP INDEX workflow_execution_queue_delayed_idx;

-- +goose Down
CREATE INDEX workflow_execution_queue_delayed_idx ON workflow_execution_queue (workspace_id, available_at)
    WHERE status = 'PENDING' AND available_at > created_at;
DROP INDEX workflow_execution_queue_due_idx;
