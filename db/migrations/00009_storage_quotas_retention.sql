-- +goose Up
-- The number of queue items each workspace stores, of any status, kept
-- exact by statement triggers in the same transactions as the rows, so
-- the stored-items quota is checked on enqueue without counting the
-- workspace's rows (up to hundreds of thousands). An item is stored until
-- its run completes or retention deletes it; status changes do not move
-- the count, so the dispatcher's claims never touch these rows. There is
-- no foreign key, as on the queue: the count of a deleted workspace's
-- items outlives it until they are gone.
CREATE TABLE workspace_queue_stored (
    workspace_id uuid PRIMARY KEY,
    items        integer NOT NULL DEFAULT 0 CHECK (items >= 0)
);

-- The count's net change per workspace of one INSERT or DELETE statement,
-- applied in workspace order so that two statements over overlapping
-- workspaces queue rather than deadlock.
-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stored_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO workspace_queue_stored AS s (workspace_id, items)
        SELECT workspace_id, count(*)::integer FROM new_rows GROUP BY 1 ORDER BY 1
        ON CONFLICT (workspace_id) DO UPDATE SET items = s.items + EXCLUDED.items;
    ELSE
        UPDATE workspace_queue_stored s SET items = s.items - l.n
        FROM (SELECT x.workspace_id, d.n FROM workspace_queue_stored x
              JOIN (SELECT workspace_id, count(*)::integer AS n FROM old_rows GROUP BY 1) d ON d.workspace_id = x.workspace_id
              ORDER BY x.workspace_id FOR NO KEY UPDATE OF x) l
        WHERE s.workspace_id = l.workspace_id;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stored_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM workspace_queue_stored;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- No writes may slip between the backfill and the triggers.
LOCK TABLE workflow_execution_queue IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO workspace_queue_stored (workspace_id, items)
SELECT workspace_id, count(*) FROM workflow_execution_queue GROUP BY 1;

CREATE TRIGGER workflow_execution_queue_count_stored_insert AFTER INSERT ON workflow_execution_queue
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stored_count();
CREATE TRIGGER workflow_execution_queue_count_stored_delete AFTER DELETE ON workflow_execution_queue
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stored_count();
CREATE TRIGGER workflow_execution_queue_count_stored_truncate AFTER TRUNCATE ON workflow_execution_queue
    FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stored_truncated();

-- Retention reads each workspace's oldest rows of a kind, per plan (each
-- plan has its own period), so each kind has an index that starts with
-- the workspace and orders by the row's age.
CREATE INDEX workflow_executions_finished_idx ON workflow_executions (workspace_id, completed_at) WHERE status <> 'RUNNING';
CREATE INDEX workflow_execution_queue_ended_idx ON workflow_execution_queue (workspace_id, created_at)
    WHERE status IN ('FAILED', 'CANCELLED');
-- Live definitions sort last (NULL deleted_at), so the same index counts
-- a workspace's stored definitions for its quota.
CREATE INDEX workflow_definitions_deleted_idx ON workflow_definitions (workspace_id, deleted_at);
-- A version may go only when no execution uses it.
CREATE INDEX workflow_executions_version_idx ON workflow_executions (workflow_definition_id, workflow_version);

-- A workspace's share of the external-API worker: one row per HTTP node
-- holding a slot, taken before the node's activity is scheduled and
-- deleted after it ends. A row counts only while its execution is RUNNING
-- and its lease has not run out, so a holder that dies (a workflow
-- terminated outside Sluice) stops counting when the reconciler records
-- its execution, or at the latest when the lease, the node's longest
-- possible run, has passed.
CREATE TABLE workspace_node_slots (
    execution_id uuid NOT NULL,
    node_key     text NOT NULL,
    workspace_id uuid NOT NULL,
    lease_until  timestamptz NOT NULL,
    PRIMARY KEY (execution_id, node_key)
);
CREATE INDEX workspace_node_slots_workspace_idx ON workspace_node_slots (workspace_id);

-- +goose Down
DROP TABLE workspace_node_slots;
DROP INDEX workflow_executions_version_idx;
DROP INDEX workflow_definitions_deleted_idx;
DROP INDEX workflow_execution_queue_ended_idx;
DROP INDEX workflow_executions_finished_idx;
DROP TRIGGER workflow_execution_queue_count_stored_truncate ON workflow_execution_queue;
DROP TRIGGER workflow_execution_queue_count_stored_delete ON workflow_execution_queue;
DROP TRIGGER workflow_execution_queue_count_stored_insert ON workflow_execution_queue;
DROP FUNCTION workspace_queue_stored_truncated();
DROP FUNCTION workspace_queue_stored_count();
DROP TABLE workspace_queue_stored;
