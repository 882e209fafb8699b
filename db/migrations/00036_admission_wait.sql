-- +goose Up
-- The admission wait of each started item: how long it waited while it was
-- admissible, from the later of its enqueue, its notBefore (or a dispatch
-- back-off: available_at) and the last moment its workspace's own limit
-- stopped holding it, to the moment its start was recorded (DISPATCHED).
-- Waits the tenant's own running limit imposes are not counted; waits for
-- anything else (the pool, other tenants, the dispatcher itself) are. See
-- docs/admission.md#admission-wait for what it leaves out.
--
-- full_until is the last moment a RUNNING execution of the workspace
-- ended (or was dropped by a release) while the workspace was at or over
-- its running limit: the moment its own limit last stopped holding its
-- items. It is written by the trigger below, after the counting trigger
-- of the same statement (triggers of one event fire in name order:
-- ..._count_running_* before ..._note_full_*), so running is already
-- the count after the statement. An update that leaves a workspace below
-- its limit writes nothing: the row stays a HOT update's.
ALTER TABLE workspace_queue_stats ADD COLUMN full_until timestamptz;
-- admission_waits keeps each started execution's admission wait. Its row
-- is written when the claim writes the execution (the trigger below),
-- with the workspace's full_until at that moment (slot_freed_at: the last
-- time its own limit stopped holding its items, up to the claim), and
-- wait_ms is written once, when the start is recorded. The moment is
-- caught at the claim because full_until moves on: read at the marking,
-- a slot freed after the claim would hide the one this item took. A
-- table of its own rather than columns of workflow_executions: the
-- executions' rows, their updates and their lists' plans (chosen by
-- their width) stay as they were. It goes with its execution (a released
-- claim's, retention).
CREATE TABLE admission_waits (
    execution_id  uuid PRIMARY KEY REFERENCES workflow_executions (id) ON DELETE CASCADE,
    workspace_id  uuid NOT NULL,
    started_at    timestamptz NOT NULL,
    slot_freed_at timestamptz,
    wait_ms       bigint CHECK (wait_ms >= 0)
);
-- The console's capacity series read the last hour's starts by this index.
CREATE INDEX admission_waits_started_idx ON admission_waits (started_at);

-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stats_note_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH freed AS (
        SELECT workspace_id, sum(n)::integer AS n
        FROM (SELECT workspace_id, 1 AS n FROM old_rows WHERE status = 'RUNNING'
              UNION ALL
              SELECT workspace_id, -1 FROM new_rows WHERE status = 'RUNNING') x
        GROUP BY 1 HAVING sum(n) > 0
    )
    UPDATE workspace_queue_stats s SET full_until = now()
    FROM freed f
    WHERE s.workspace_id = f.workspace_id
      AND s.running + f.n >= coalesce(
          (SELECT o.max_running FROM workspace_limits o WHERE o.workspace_id = s.workspace_id),
          (SELECT p.max_running FROM plans p WHERE p.name = s.plan));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION workspace_queue_stats_note_full_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH freed AS (
        SELECT workspace_id, count(*)::integer AS n FROM old_rows WHERE status = 'RUNNING' GROUP BY 1
    )
    UPDATE workspace_queue_stats s SET full_until = now()
    FROM freed f
    WHERE s.workspace_id = f.workspace_id
      AND s.running + f.n >= coalesce(
          (SELECT o.max_running FROM workspace_limits o WHERE o.workspace_id = s.workspace_id),
          (SELECT p.max_running FROM plans p WHERE p.name = s.plan));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER workflow_executions_note_full_update AFTER UPDATE ON workflow_executions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_note_full();
CREATE TRIGGER workflow_executions_note_full_delete AFTER DELETE ON workflow_executions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION workspace_queue_stats_note_full_deleted();

-- admission_waits_note_claim writes, per statement that writes RUNNING
-- executions (a claim's), each one's row with its workspace's full_until
-- as it stands at the claim. An execution the claim's upsert finds
-- already there (its conflict branch) keeps the row it has.
-- +goose StatementBegin
CREATE FUNCTION admission_waits_note_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO admission_waits (execution_id, workspace_id, started_at, slot_freed_at)
    SELECT n.id, n.workspace_id, n.started_at, s.full_until
    FROM new_rows n LEFT JOIN workspace_queue_stats s ON s.workspace_id = n.workspace_id
    WHERE n.status = 'RUNNING'
    ON CONFLICT (execution_id) DO NOTHING;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER workflow_executions_note_claim AFTER INSERT ON workflow_executions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION admission_waits_note_claim();

-- queue_admission_wait_ms is the one definition of an item's admission
-- wait, in milliseconds up to now (its start being recorded): from the
-- latest of its enqueue (created), its notBefore or back-off (available)
-- and the moment its workspace's own limit last stopped holding its
-- items before its claim (slot_freed, admission_waits.slot_freed_at).
-- +goose StatementBegin
CREATE FUNCTION queue_admission_wait_ms(created timestamptz, available timestamptz, slot_freed timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(0, floor(1000 * extract(epoch FROM now() - greatest(created, available, slot_freed))))::bigint
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION queue_admission_wait_ms(timestamptz, timestamptz, timestamptz);
DROP TRIGGER workflow_executions_note_claim ON workflow_executions;
DROP FUNCTION admission_waits_note_claim();
DROP TRIGGER workflow_executions_note_full_delete ON workflow_executions;
DROP TRIGGER workflow_executions_note_full_update ON workflow_executions;
DROP FUNCTION workspace_queue_stats_note_full_deleted();
DROP FUNCTION workspace_queue_stats_note_full();
DROP TABLE admission_waits;
ALTER TABLE workspace_queue_stats DROP COLUMN full_until;
