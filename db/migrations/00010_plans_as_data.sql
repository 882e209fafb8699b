-- +goose Up
-- Plans as data: the number of RUNNING executions each plan allows lives
-- here rather than in every dispatcher's environment, so that the admin
-- changes it through the API and every dispatcher reads the same value in
-- its claim transaction (the next claim uses it; nothing restarts). The
-- seed is the limits the product is sold with, which SLUICE_TIER_LIMITS
-- used to override.
--
-- A row is locked FOR KEY SHARE by every claim that reads it, after the
-- claim has locked its workspaces, and an edit locks it FOR UPDATE before
-- writing: an edit waits for the claims that read the old value, and every
-- claim that commits after the edit has returned read the new one. So a
-- lowered limit stops admissions at once.
CREATE TABLE plans (
    name        text PRIMARY KEY CHECK (name IN ('FREE', 'PRO', 'ENTERPRISE')),
    max_running integer NOT NULL CHECK (max_running BETWEEN 1 AND 100000),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO plans (name, max_running) VALUES ('FREE', 1), ('PRO', 5), ('ENTERPRISE', 20);

-- A workspace's own limits, over its plan's: NULL keeps the plan's. The
-- row goes with its workspace. Locked as plans rows are (see above).
CREATE TABLE workspace_limits (
    workspace_id uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    max_running  integer CHECK (max_running BETWEEN 1 AND 100000),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- admission_workspaces_with_room is the dispatcher's prefilter, as
-- workspace_queue_stats_with_room was with limits from configuration: the
-- workspaces with pending work and fewer RUNNING executions than their
-- limit, then those that no longer exist (plan NULL), whose items are to
-- be failed. One range scan of the room index per plan for the workspaces
-- on their plan's limit (a probe of workspace_limits each leaves out those
-- with their own), and one pass over the workspaces with their own limit,
-- which the admin sets one by one. Plain index scans for the reason given
-- in 00002.
-- +goose StatementBegin
CREATE FUNCTION admission_workspaces_with_room()
RETURNS TABLE (workspace_id uuid, plan text)
LANGUAGE plpgsql STABLE
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT r.workspace_id, r.plan
    FROM plans p
    CROSS JOIN LATERAL (
        SELECT s.workspace_id, s.plan FROM workspace_queue_stats s
        WHERE s.plan = p.name AND s.running < p.max_running AND s.has_pending
          AND NOT EXISTS (SELECT 1 FROM workspace_limits o WHERE o.workspace_id = s.workspace_id AND o.max_running IS NOT NULL)
        OFFSET 0
    ) AS r
    UNION ALL
    SELECT s.workspace_id, s.plan
    FROM workspace_limits o JOIN workspace_queue_stats s ON s.workspace_id = o.workspace_id
    WHERE o.max_running IS NOT NULL AND s.running < o.max_running AND s.has_pending AND s.plan IS NOT NULL
    UNION ALL
    SELECT g.workspace_id, NULL::text FROM workspace_queue_stats g
    WHERE g.plan IS NULL AND g.has_pending;
END;
$$;
-- +goose StatementEnd

DROP FUNCTION workspace_queue_stats_with_room(text[], integer[]);

-- Concurrency keys: a definition's graph may declare
-- {"concurrency": {"key": <template over input>, "limit": N}}; the key is
-- resolved when an item is enqueued and stored on it with the limit, and
-- copied to its execution, so the claim counts an item's key's RUNNING
-- executions with one probe of the index below, under the workspace's
-- lock, which every claim that creates a RUNNING row holds: exact with any
-- number of dispatchers.
ALTER TABLE workflow_execution_queue
    ADD COLUMN concurrency_key   text CHECK (octet_length(concurrency_key) <= 256),
    ADD COLUMN concurrency_limit integer CHECK (concurrency_limit BETWEEN 1 AND 100000),
    ADD CONSTRAINT workflow_execution_queue_concurrency_check CHECK ((concurrency_key IS NULL) = (concurrency_limit IS NULL));
ALTER TABLE workflow_executions ADD COLUMN concurrency_key text;
CREATE INDEX workflow_executions_key_running_idx ON workflow_executions (workspace_id, concurrency_key)
    WHERE status = 'RUNNING' AND concurrency_key IS NOT NULL;

-- +goose Down
DROP INDEX workflow_executions_key_running_idx;
ALTER TABLE workflow_executions DROP COLUMN concurrency_key;
ALTER TABLE workflow_execution_queue
    DROP CONSTRAINT workflow_execution_queue_concurrency_check,
    DROP COLUMN concurrency_limit,
    DROP COLUMN concurrency_key;
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
DROP FUNCTION admission_workspaces_with_room();
DROP TABLE workspace_limits;
DROP TABLE plans;
