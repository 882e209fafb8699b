-- +goose Up
-- Each workspace's allow-list, kept by the admin: the task queues, and
-- optionally the workflow types (NULL: any type on the queue), that its
-- TEMPORAL_WORKFLOW nodes may start (domain.AllowList). Names are bounded
-- as domain.MaxTemporalNameLength; the count per workspace is bounded by
-- domain.MaxAllowListEntries, enforced under the workspace's row lock.
CREATE TABLE workspace_allow_list (
    workspace_id  uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    task_queue    text NOT NULL CHECK (length(task_queue) BETWEEN 1 AND 200),
    workflow_type text CHECK (length(workflow_type) BETWEEN 1 AND 200),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workspace_allow_list_entry UNIQUE NULLS NOT DISTINCT (workspace_id, task_queue, workflow_type)
);

-- +goose Down
DROP TABLE workspace_allow_list;
