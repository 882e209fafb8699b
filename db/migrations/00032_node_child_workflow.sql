-- +goose Up
-- A TEMPORAL_WORKFLOW node's child in Temporal, once it started: its
-- workflow id (Sluice's execution id, the node's key and a suffix of at
-- most 200 bytes) and run id, so the node record leads to the team's
-- workflow.
ALTER TABLE workflow_execution_nodes
    ADD COLUMN child_workflow_id text CHECK (length(child_workflow_id) BETWEEN 1 AND 1000),
    ADD COLUMN child_run_id      text CHECK (length(child_run_id) BETWEEN 1 AND 100);

-- +goose Down
ALTER TABLE workflow_execution_nodes DROP COLUMN child_workflow_id, DROP COLUMN child_run_id;
