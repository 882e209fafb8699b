-- +goose Up
-- Per-workspace counts of PENDING queue items and RUNNING executions, kept
-- exact by triggers in the same transactions as the rows they count, so
-- the dispatcher can find the workspaces that have pending work AND a free
-- slot with an index range scan per plan instead of walking every workspace
-- with pending work. The counts are only a prefilter: admission still locks
-- the workspace row and recounts RUNNING under the lock, so a count that is
-- off could at worst make a workspace wait, never admit past its limit.
--
-- plan is the workspace's plan, copied so that the prefilter needs no join
-- (the limits come from configuration, per plan); NULL when the workspace
-- does not exist (deleted, or never did), whose pending items the
-- dispatcher then fails. There is deliberately no foreign key, for the same
-- reason the queue has none: the counts of a deleted workspace's items must
-- outlive it.
--
-- The prefilter index's predicate reads has_pending rather than pending,
-- and the table leaves room on its pages, so that an update which leaves
-- plan, running and has_pending as they were (an enqueue into a workspace
-- with a backlog, a claim's PENDING -> CLAIMED) is a HOT update that
-- touches no index: these rows are the hottest in the database.
CREATE TABLE workspace_queue_stats (
    workspace_id uuid PRIMARY KEY,
    plan         text,
    pending      integer NOT NULL DEFAULT 0 CHECK (pending >= 0),
    running      integer NOT NULL DEFAULT 0 CHECK (running >= 0),
    has_pending  boolean NOT NULL GENERATED ALWAYS AS (pending > 0) STORED
) WITH (fillfactor = 50);
-- The prefilter: per plan, the workspaces with pending work whose running
-- count is below the plan's limit, and (plan IS NULL) those that are gone.
CREATE INDEX workspace_queue_stats_room_idx ON workspace_queue_stats (plan, running) WHERE has_pending;

-- workspace_queue_stats_with_room is the dispatcher's prefilter: the
-- workspaces with pending work and, per plan, fewer RUNNING executions than
-- the plan's limit (limits[i] for plans[i]: they come from configuration),
-- then those that no longer exist (plan NULL), whose items are to be
-- failed. One range scan per plan on the room index, so the cost follows
-- the workspaces with room, not every workspace with pending work.
--
-- It is a function only to plan that scan as a plain index scan, with
-- bitmap and sequential scans off. Every change of a running count is a
-- non-HOT update that leaves a dead entry in the room index; a plain index
-- scan marks the dead entries it passes so that the next one skips them,
-- while a bitmap scan, which the planner prefers for a table this small,
-- visits them all again on every batch until vacuum (after a make bench
-- drain: about 5,000 dead entries passed and 0.4 ms per call as a bitmap
-- scan; 0.04 ms as a plain index scan once it has marked them). OFFSET 0
-- keeps the per-plan subquery from being flattened into a hash join over
-- every row (0.25 ms at 1,050 workspaces, 19 ms at 100,000; the range
-- scans take 0.07 ms at either size).
-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stats_with_room(plans text[], limits integer[])
RETURNS TABLE (workspace_id uuid, plan text)
LANGUAGE plpgsql STABLE
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT r.workspace_id, r.plan
    FROM unnest(plans, limits) AS l(plan, max_running)
    CROSS JOIN LATERAL (
        SELECT s.workspace_id, s.plan FROM workspace_queue_stats s
        WHERE s.plan = l.plan AND s.running < l.max_running AND s.has_pending
        OFFSET 0
    ) AS r
    UNION ALL
    SELECT g.workspace_id, NULL::text FROM workspace_queue_stats g
    WHERE g.plan IS NULL AND g.has_pending;
END;
$$;
-- +goose StatementEnd

-- The counting triggers are per statement, with transition tables: a
-- batch claim or a bulk insert costs one aggregate and one write per
-- workspace, not one write per row. Each adds its statement's net change
-- per workspace (d) in one statement, which
--   - locks the rows it changes in workspace order (the FOR NO KEY UPDATE
--     subquery), so two statements adding to overlapping workspaces queue
--     in the same order instead of deadlocking. (Two transactions whose
--     several statements meet in opposite orders can still deadlock, as
--     with any rows; Postgres then aborts one, and its caller retries.)
--   - creates a missing row, with the workspace's plan or NULL, through
--     the INSERT; only a workspace that is gone has none. A negative count
--     for a missing row would mean the counts had drifted, and the CHECK
--     constraints then fail the statement rather than hide it.
-- An UPDATE trigger with transition tables cannot be limited to UPDATE OF
-- status, so it runs for every update; those that do not move an item into
-- or out of PENDING (or an execution into or out of RUNNING) net to an
-- empty d and write nothing.
-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stats_add(ids uuid[], pending_deltas integer[], running_deltas integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH d AS (
        SELECT * FROM unnest(ids, pending_deltas, running_deltas) AS d(workspace_id, pending, running)
    ), u AS (
        UPDATE workspace_queue_stats s SET pending = s.pending + l.pending, running = s.running + l.running
        FROM (SELECT x.workspace_id, d.pending, d.running FROM workspace_queue_stats x JOIN d ON d.workspace_id = x.workspace_id
              ORDER BY x.workspace_id FOR NO KEY UPDATE OF x) l
        WHERE s.workspace_id = l.workspace_id
        RETURNING s.workspace_id
    )
    INSERT INTO workspace_queue_stats AS s (workspace_id, plan, pending, running)
    SELECT d.workspace_id, w.plan, d.pending, d.running
    FROM d LEFT JOIN workspaces w ON w.id = d.workspace_id
    WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.workspace_id = d.workspace_id)
    ORDER BY d.workspace_id
    ON CONFLICT (workspace_id) DO UPDATE
    SET pending = s.pending + EXCLUDED.pending, running = s.running + EXCLUDED.running;
END;
$$;
-- +goose StatementEnd

-- One counting function serves both tables: TG_ARGV[0] is the status it
-- counts (PENDING queue items, RUNNING executions) and TG_ARGV[1] the
-- column it adds to. It only works out its statement's net change per
-- workspace (from the transition tables that TG_OP has) and hands it to
-- workspace_queue_stats_add above.
-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stats_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    counted text := TG_ARGV[0];
    ids uuid[];
    deltas integer[];
    zeros integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(workspace_id ORDER BY workspace_id), array_agg(n ORDER BY workspace_id) INTO ids, deltas
        FROM (SELECT workspace_id, count(*)::integer AS n FROM new_rows WHERE status = counted GROUP BY 1) c;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(workspace_id ORDER BY workspace_id), array_agg(n ORDER BY workspace_id) INTO ids, deltas
        FROM (SELECT workspace_id, -count(*)::integer AS n FROM old_rows WHERE status = counted GROUP BY 1) c;
    ELSE
        SELECT array_agg(workspace_id ORDER BY workspace_id), array_agg(n ORDER BY workspace_id) INTO ids, deltas
        FROM (SELECT workspace_id, sum(n)::integer AS n
              FROM (SELECT workspace_id, 1 AS n FROM new_rows WHERE status = counted
                    UNION ALL
                    SELECT workspace_id, -1 FROM old_rows WHERE status = counted) x
              GROUP BY 1 HAVING sum(n) <> 0) c;
    END IF;
    IF ids IS NULL THEN
        RETURN NULL;
    END IF;
    zeros := array_fill(0, ARRAY[cardinality(ids)]);
    IF TG_ARGV[1] = 'pending' THEN
        PERFORM workspace_queue_stats_add(ids, deltas, zeros);
    ELSE
        PERFORM workspace_queue_stats_add(ids, zeros, deltas);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- A new workspace gets its row at once, with its plan; a plan change is
-- copied; a deleted workspace's row is dropped when nothing is counted on
-- it, else its plan becomes NULL so that the dispatcher fails its pending
-- items. (The delete trigger runs after the cascade has removed the
-- workspace's executions, so their RUNNING count is already gone.) Rows are
-- created here rather than on first enqueue so that a plan change can never
-- miss a row that an uncommitted enqueue is creating with the old plan.
-- +goose StatementBegin
CREATE FUNCTION workspaces_sync_queue_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO workspace_queue_stats AS s (workspace_id, plan)
        SELECT id, plan FROM new_rows ORDER BY id
        ON CONFLICT (workspace_id) DO UPDATE SET plan = EXCLUDED.plan;
    ELSIF TG_OP = 'UPDATE' THEN
        UPDATE workspace_queue_stats s SET plan = n.plan
        FROM new_rows n
        WHERE s.workspace_id = n.id AND s.plan IS DISTINCT FROM n.plan;
    ELSE
        DELETE FROM workspace_queue_stats s
        USING old_rows o
        WHERE s.workspace_id = o.id AND s.pending = 0 AND s.running = 0;
        UPDATE workspace_queue_stats s SET plan = NULL
        FROM old_rows o
        WHERE s.workspace_id = o.id;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- TRUNCATE fires no row or statement triggers of its own kind, so it resets
-- the counts it empties.
-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stats_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'workflow_execution_queue' THEN
        UPDATE workspace_queue_stats SET pending = 0 WHERE pending <> 0;
    ELSIF TG_TABLE_NAME = 'workflow_executions' THEN
        UPDATE workspace_queue_stats SET running = 0 WHERE running <> 0;
    ELSE
        UPDATE workspace_queue_stats SET plan = NULL WHERE plan IS NOT NULL;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- No writes may slip between the backfill and the triggers.
LOCK TABLE workspaces, workflow_execution_queue, workflow_executions IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO workspace_queue_stats (workspace_id, plan, pending, running)
SELECT coalesce(w.id, c.workspace_id), w.plan, coalesce(c.pending, 0), coalesce(c.running, 0)
FROM workspaces w
FULL JOIN (
    SELECT workspace_id, sum(pending)::integer AS pending, sum(running)::integer AS running
    FROM (SELECT workspace_id, count(*) AS pending, 0 AS running
          FROM workflow_execution_queue WHERE status = 'PENDING' GROUP BY 1
          UNION ALL
          SELECT workspace_id, 0, count(*)
          FROM workflow_executions WHERE status = 'RUNNING' GROUP BY 1) x
    GROUP BY 1
) c ON c.workspace_id = w.id;

CREATE TRIGGER workflow_execution_queue_count_pending_insert AFTER INSERT ON workflow_execution_queue
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_count('PENDING', 'pending');
CREATE TRIGGER workflow_execution_queue_count_pending_update AFTER UPDATE ON workflow_execution_queue
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_count('PENDING', 'pending');
CREATE TRIGGER workflow_execution_queue_count_pending_delete AFTER DELETE ON workflow_execution_queue
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_count('PENDING', 'pending');
CREATE TRIGGER workflow_execution_queue_count_pending_truncate AFTER TRUNCATE ON workflow_execution_queue
    FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_truncated();

CREATE TRIGGER workflow_executions_count_running_insert AFTER INSERT ON workflow_executions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_count('RUNNING', 'running');
CREATE TRIGGER workflow_executions_count_running_update AFTER UPDATE ON workflow_executions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_count('RUNNING', 'running');
CREATE TRIGGER workflow_executions_count_running_delete AFTER DELETE ON workflow_executions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_count('RUNNING', 'running');
CREATE TRIGGER workflow_executions_count_running_truncate AFTER TRUNCATE ON workflow_executions
    FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_truncated();

CREATE TRIGGER workspaces_sync_queue_stats_insert AFTER INSERT ON workspaces
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspaces_sync_queue_stats();
CREATE TRIGGER workspaces_sync_queue_stats_update AFTER UPDATE ON workspaces
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspaces_sync_queue_stats();
CREATE TRIGGER workspaces_sync_queue_stats_delete AFTER DELETE ON workspaces
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION workspaces_sync_queue_stats();
CREATE TRIGGER workspaces_sync_queue_stats_truncate AFTER TRUNCATE ON workspaces
    FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_truncated();

-- +goose Down
DROP TRIGGER workspaces_sync_queue_stats_truncate ON workspaces;
DROP TRIGGER workspaces_sync_queue_stats_delete ON workspaces;
DROP TRIGGER workspaces_sync_queue_stats_update ON workspaces;
DROP TRIGGER workspaces_sync_queue_stats_insert ON workspaces;
DROP TRIGGER workflow_executions_count_running_truncate ON workflow_executions;
DROP TRIGGER workflow_executions_count_running_delete ON workflow_executions;
DROP TRIGGER workflow_executions_count_running_update ON workflow_executions;
DROP TRIGGER workflow_executions_count_running_insert ON workflow_executions;
DROP TRIGGER workflow_execution_queue_count_pending_truncate ON workflow_execution_queue;
DROP TRIGGER workflow_execution_queue_count_pending_delete ON workflow_execution_queue;
DROP TRIGGER workflow_execution_queue_count_pending_update ON workflow_execution_queue;
DROP TRIGGER workflow_execution_queue_count_pending_insert ON workflow_execution_queue;
DROP FUNCTION workspace_queue_stats_truncated();
DROP FUNCTION workspace_queue_stats_with_room(text[], integer[]);
DROP FUNCTION workspaces_sync_queue_stats();
DROP FUNCTION workspace_queue_stats_count();
DROP FUNCTION workspace_queue_stats_add(uuid[], integer[], integer[]);
DROP TABLE workspace_queue_stats;
