-- +goose Up
-- The definitions list pages a workspace's live definitions by id, so each
-- page is a range of this index (the older one orders by created_at, which
-- the list does not).
CREATE INDEX workflow_definitions_workspace_id_idx ON workflow_definitions (workspace_id, id) WHERE deleted_at IS NULL;

-- +goose Down
DROP INDEX workflow_definitions_workspace_id_idx;
