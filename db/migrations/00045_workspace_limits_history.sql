-- +goose Up
-- The workspace figures that stood at each moment of the last hour, for
-- the console's capacity series (docs/console.md#capacity), beside the
-- plans' and the pool's in admission_limits_history (00044): each
-- workspace's plan and its own ceiling (max_running) and floor over its
-- plan's (NULL: the plan's). Without it a series split its past by a
-- workspace's plan and own limits as set now, so moving a workspace to
-- another plan or editing its own floor redrew the hour.
--
-- A row holds the figures an edit replaced, and when (replaced_at): they
-- stood from the workspace's previous row's replaced_at (or since ever)
-- until then; after its last row a workspace's figures are those set
-- now. So a workspace never edited has no row, however many workspaces
-- there are, and one created inside a window reads its figures from its
-- creation (the first row's, or those set now) with nothing written at
-- creation. The triggers below write one row for the workspace edited, in
-- the edit's transaction, only when its plan, own max_running or own
-- floor changes (an edit of another quota writes nothing). The API's
-- edits take AdmissionLimitsWriteLock first, so rows are written one at a
-- time, in the order the edits commit, and replaced_at is the moment of
-- the write under the lock (clock_timestamp, as 00044's set_at): at that
-- moment the new figures stand, as a plan's snapshot does from its
-- set_at.
--
-- Only an admin edits these, so the table grows by a row per admin edit
-- of a workspace's plan, maxRunning or floor; retention
-- (WorkspaceLimitsHistoryDelete, in the job that cuts
-- admission_limits_history) deletes the rows replaced before the start of
-- the longest window (an hour): a window reads only those replaced within
-- it, the earliest of them per workspace being the figures in force at
-- its start. A deleted workspace's rows go with it (its executions, which
-- the series count, go with it too).
CREATE TABLE workspace_limits_history (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    replaced_at  timestamptz NOT NULL,
    plan         text NOT NULL,
    max_running  integer,
    floor        integer
);
-- By workspace for its delete's cascade; by replaced_at for retention.
CREATE INDEX workspace_limits_history_workspace_idx ON workspace_limits_history (workspace_id);
CREATE INDEX workspace_limits_history_replaced_idx ON workspace_limits_history (replaced_at);

-- workspace_plan_note keeps the plan a workspace is moved off, with its
-- own limits (unchanged by the move).
-- +goose StatementBegin
CREATE FUNCTION workspace_plan_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workspace_limits_history (workspace_id, replaced_at, plan, max_running, floor)
    SELECT OLD.id, clock_timestamp(), OLD.plan, o.max_running, o.floor
    FROM (SELECT 1) one LEFT JOIN workspace_limits o ON o.workspace_id = OLD.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER workspaces_note_plan AFTER UPDATE OF plan ON workspaces
    FOR EACH ROW WHEN (OLD.plan IS DISTINCT FROM NEW.plan) EXECUTE FUNCTION workspace_plan_note();

-- workspace_limits_note keeps the own ceiling and floor a workspace's
-- edit replaces (none on its first row), with its plan (unchanged by the
-- edit).
-- +goose StatementBegin
CREATE FUNCTION workspace_limits_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workspace_limits_history (workspace_id, replaced_at, plan, max_running, floor)
    SELECT w.id, clock_timestamp(), w.plan,
           CASE WHEN TG_OP = 'UPDATE' THEN OLD.max_running END,
           CASE WHEN TG_OP = 'UPDATE' THEN OLD.floor END
    FROM workspaces w WHERE w.id = NEW.workspace_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER workspace_limits_note_insert AFTER INSERT ON workspace_limits
    FOR EACH ROW WHEN (NEW.max_running IS NOT NULL OR NEW.floor IS NOT NULL) EXECUTE FUNCTION workspace_limits_note();
CREATE TRIGGER workspace_limits_note_update AFTER UPDATE ON workspace_limits
    FOR EACH ROW WHEN ((OLD.max_running, OLD.floor) IS DISTINCT FROM (NEW.max_running, NEW.floor)) EXECUTE FUNCTION workspace_limits_note();

-- workspace_limits_spans is the one reading of the history: for every
-- workspace, its plan and own limits (NULL: the plan's) over spans
-- [from_at, to_at) that cover every moment: a span per row kept, then the
-- figures set now, from its last row's replaced_at to infinity. A moment
-- reads the span holding it. A view rather than a function of the
-- window's start: retention keeps the rows to an hour of edits, so every
-- row is one a window may read.
CREATE VIEW workspace_limits_spans AS
    WITH replaced AS (
        SELECT h.workspace_id, h.replaced_at, h.plan, h.max_running, h.floor,
               lag(h.replaced_at, 1, '-infinity'::timestamptz) OVER (PARTITION BY h.workspace_id ORDER BY h.replaced_at, h.id)::timestamptz AS from_at
        FROM workspace_limits_history h
    )
    SELECT r.workspace_id, r.from_at, r.replaced_at AS to_at, r.plan, r.max_running, r.floor FROM replaced r
    UNION ALL
    SELECT w.id, coalesce(l.replaced_at, '-infinity'::timestamptz), 'infinity'::timestamptz, w.plan, o.max_running, o.floor
    FROM workspaces w
    LEFT JOIN workspace_limits o ON o.workspace_id = w.id
    LEFT JOIN (SELECT h.workspace_id, max(h.replaced_at) AS replaced_at FROM workspace_limits_history h GROUP BY 1) l ON l.workspace_id = w.id;

-- +goose Down
DROP VIEW workspace_limits_spans;
DROP TRIGGER workspace_limits_note_update ON workspace_limits;
DROP TRIGGER workspace_limits_note_insert ON workspace_limits;
DROP FUNCTION workspace_limits_note();
DROP TRIGGER workspaces_note_plan ON workspaces;
DROP FUNCTION workspace_plan_note();
DROP TABLE workspace_limits_history;
