-- +goose Up
-- The admission limits that stood at each moment of the last hour, for
-- the console's capacity series (docs/console.md#capacity): the pool's
-- capacity and each plan's ceiling (max_running) and floor. Without it a
-- series drew its past with the limits set now, so an edit redrew the
-- hour as if they had always been so.
--
-- A snapshot of every plan, with the pool's capacity, is written by the
-- triggers below in the transaction of each write to plans or pools that
-- changes one of these figures (an edit of another quota writes nothing):
-- the API's edits take AdmissionLimitsWriteLock first, so snapshots are
-- written one at a time, in the order the edits commit, and set_at is
-- the moment of the write under the lock (clock_timestamp, not the
-- transaction's start). Only an admin edits these, so the table grows by
-- a snapshot (a row per plan) per admin edit; retention
-- (AdmissionLimitsHistoryDelete) keeps the rows a window of at most an
-- hour reads: those set within it and, per plan, the one in force at its
-- start. A workspace's plan and own limits are kept apart, a row per
-- workspace edited (workspace_limits_history, 00045).
CREATE TABLE admission_limits_history (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    set_at        timestamptz NOT NULL,
    plan          text NOT NULL,
    max_running   integer NOT NULL,
    floor         integer NOT NULL,
    pool_capacity integer
);
CREATE INDEX admission_limits_history_plan_idx ON admission_limits_history (plan, set_at, id);

-- The limits as they stand at migration, in force since ever.
INSERT INTO admission_limits_history (set_at, plan, max_running, floor, pool_capacity)
SELECT '-infinity', p.name, p.max_running, p.floor, (SELECT capacity FROM pools WHERE name = 'default')
FROM plans p;

-- admission_limits_note writes a snapshot of every plan's ceiling and
-- floor and the pool's capacity when one of them differs from the latest
-- snapshot.
-- +goose StatementBegin
CREATE FUNCTION admission_limits_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH cur AS (
        SELECT p.name AS plan, p.max_running, p.floor, (SELECT capacity FROM pools WHERE name = 'default') AS pool_capacity
        FROM plans p
    ), latest AS (
        SELECT DISTINCT ON (h.plan) h.plan, h.max_running, h.floor, h.pool_capacity
        FROM admission_limits_history h
        ORDER BY h.plan, h.set_at DESC, h.id DESC
    ), stamp AS (SELECT clock_timestamp() AS set_at)
    INSERT INTO admission_limits_history (set_at, plan, max_running, floor, pool_capacity)
    SELECT stamp.set_at, cur.plan, cur.max_running, cur.floor, cur.pool_capacity
    FROM cur CROSS JOIN stamp
    WHERE EXISTS (SELECT 1 FROM cur c LEFT JOIN latest l ON l.plan = c.plan
                  WHERE (l.max_running, l.floor, l.pool_capacity) IS DISTINCT FROM (c.max_running, c.floor, c.pool_capacity));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER plans_note_admission_limits AFTER INSERT OR UPDATE ON plans
    FOR EACH STATEMENT EXECUTE FUNCTION admission_limits_note();
CREATE TRIGGER pools_note_admission_limits AFTER UPDATE ON pools
    FOR EACH STATEMENT EXECUTE FUNCTION admission_limits_note();

-- admission_limits_at is the one reading of the history: per plan, the
-- snapshot row in force at the moment given, the latest set at or before
-- it (its floor as stored: admission takes it at most the ceiling); a
-- plan without one reads its figures and the pool's capacity as set now
-- (id NULL).
-- +goose StatementBegin
CREATE FUNCTION admission_limits_at(moment timestamptz)
RETURNS SETOF admission_limits_history LANGUAGE sql STABLE AS $$
    SELECT h.id, coalesce(h.set_at, moment), p.name, coalesce(h.max_running, p.max_running), coalesce(h.floor, p.floor),
           CASE WHEN h.id IS NULL THEN (SELECT c.capacity FROM pools c WHERE c.name = 'default') ELSE h.pool_capacity END
    FROM plans p
    LEFT JOIN LATERAL (
        SELECT h.id, h.set_at, h.max_running, h.floor, h.pool_capacity FROM admission_limits_history h
        WHERE h.plan = p.name AND h.set_at <= moment
        ORDER BY h.set_at DESC, h.id DESC
        LIMIT 1
    ) h ON true
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION admission_limits_at(timestamptz);
DROP TRIGGER pools_note_admission_limits ON pools;
DROP TRIGGER plans_note_admission_limits ON plans;
DROP FUNCTION admission_limits_note();
DROP TABLE admission_limits_history;
