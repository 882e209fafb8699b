-- +goose Up
-- subWorkflowNodes caps the nodes of the child runs (SUB_WORKFLOW) of one
-- execution, every level together: each child run counts its graph's
-- nodes when it starts, so the figure bounds the child workflows one
-- admission starts and the node records they write. FREE 100, PRO 1,000,
-- ENTERPRISE 10,000.
ALTER TABLE plans
    ADD COLUMN sub_workflow_nodes integer NOT NULL DEFAULT 100 CHECK (sub_workflow_nodes BETWEEN 1 AND 1000000);
UPDATE plans SET sub_workflow_nodes = 1000 WHERE name = 'PRO';
UPDATE plans SET sub_workflow_nodes = 10000 WHERE name = 'ENTERPRISE';
ALTER TABLE workspace_limits
    ADD COLUMN sub_workflow_nodes integer CHECK (sub_workflow_nodes BETWEEN 1 AND 1000000);
-- The nodes the execution's child runs have taken so far, against the
-- cap in force when each started (ExecutionSubWorkflowNodesTake).
ALTER TABLE workflow_executions
    ADD COLUMN sub_workflow_nodes integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE workflow_executions DROP COLUMN sub_workflow_nodes;
ALTER TABLE workspace_limits DROP COLUMN sub_workflow_nodes;
ALTER TABLE plans DROP COLUMN sub_workflow_nodes;
