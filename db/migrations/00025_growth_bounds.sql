-- +goose Up
-- Growth bounded by what is stored, not only by age (issue 33 item 4).

-- The sender's claim walks the workspaces that have PENDING deliveries
-- (a skip over this index's first column) and reads each one's due
-- deliveries oldest first, at most the claim's share, from the same
-- index: its cost grows with the workspaces that wait, never with the
-- rows behind them. The same index counts a workspace's PENDING
-- deliveries against its bound. It replaces the index on next_attempt_at
-- alone, which served only a sort of every due row.
CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (workspace_id, next_attempt_at, id) WHERE status = 'PENDING';
DROP INDEX webhook_deliveries_due_idx;

-- The deliveries an endpoint did not get because its workspace held its
-- bound of stored or pending deliveries, shown on the endpoint, so a
-- drop is never silent.
ALTER TABLE webhook_endpoints
    ADD COLUMN deliveries_dropped bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_dropped_at    timestamptz;

-- Stored executions, a quota beside stored queue items: an execution
-- keeps its input (up to 1 MiB) and its node records until retention, so
-- a workspace's executions, plus its items waiting to become one, are
-- capped per plan and checked on enqueue. The CHECK bounds are the
-- domain's (domain.QuotaBounds).
ALTER TABLE plans
    ADD COLUMN stored_executions integer NOT NULL DEFAULT 10000 CHECK (stored_executions BETWEEN 1 AND 100000000);
UPDATE plans SET stored_executions = 100000 WHERE name = 'PRO';
UPDATE plans SET stored_executions = 1000000 WHERE name = 'ENTERPRISE';
ALTER TABLE workspace_limits
    ADD COLUMN stored_executions integer CHECK (stored_executions BETWEEN 1 AND 100000000);

-- The number of executions each workspace stores, kept exact by statement
-- triggers in the transactions that insert and delete them (the claim and
-- retention), as workspace_queue_stored is for queue items, so the quota
-- is checked without counting the workspace's rows.
CREATE TABLE workspace_executions_stored (
    workspace_id uuid PRIMARY KEY,
    executions   integer NOT NULL DEFAULT 0 CHECK (executions >= 0)
);

-- +goose StatementBegin
CREATE FUNCTION workspace_executions_stored_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO workspace_executions_stored AS s (workspace_id, executions)
        SELECT workspace_id, count(*)::integer FROM new_rows GROUP BY 1 ORDER BY 1
        ON CONFLICT (workspace_id) DO UPDATE SET executions = s.executions + EXCLUDED.executions;
    ELSE
        UPDATE workspace_executions_stored s SET executions = s.executions - l.n
        FROM (SELECT x.workspace_id, d.n FROM workspace_executions_stored x
              JOIN (SELECT workspace_id, count(*)::integer AS n FROM old_rows GROUP BY 1) d ON d.workspace_id = x.workspace_id
              ORDER BY x.workspace_id FOR NO KEY UPDATE OF x) l
        WHERE s.workspace_id = l.workspace_id;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION workspace_executions_stored_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM workspace_executions_stored;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- No writes may slip between the backfill and the triggers.
LOCK TABLE workflow_executions IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO workspace_executions_stored (workspace_id, executions)
SELECT workspace_id, count(*) FROM workflow_executions GROUP BY 1;

CREATE TRIGGER workflow_executions_count_stored_insert AFTER INSERT ON workflow_executions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_executions_stored_count();
CREATE TRIGGER workflow_executions_count_stored_delete AFTER DELETE ON workflow_executions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_executions_stored_count();
CREATE TRIGGER workflow_executions_count_stored_truncate AFTER TRUNCATE ON workflow_executions
    FOR EACH STATEMENT EXECUTE FUNCTION workspace_executions_stored_truncated();

-- +goose Down
DROP TRIGGER workflow_executions_count_stored_truncate ON workflow_executions;
DROP TRIGGER workflow_executions_count_stored_delete ON workflow_executions;
DROP TRIGGER workflow_executions_count_stored_insert ON workflow_executions;
DROP FUNCTION workspace_executions_stored_truncated();
DROP FUNCTION workspace_executions_stored_count();
DROP TABLE workspace_executions_stored;
ALTER TABLE workspace_limits DROP COLUMN stored_executions;
ALTER TABLE plans DROP COLUMN stored_executions;
ALTER TABLE webhook_endpoints DROP COLUMN deliveries_dropped, DROP COLUMN last_dropped_at;
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'PENDING';
DROP INDEX webhook_deliveries_pending_idx;
