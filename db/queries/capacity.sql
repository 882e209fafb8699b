-- The console's capacity series (docs/console.md#capacity), read over a
-- window of at most an hour in at most 360 steps (domain.CapacityWindow).

-- name: CapacityRunning :many
-- Per step and plan, the RUNNING executions at the step's end (from +
-- (i+1) * step) and how many of them were within their workspace's floor
-- in force (its own, else its plan's: floor_in_force), each workspace
-- counted in the plan it was on: its plan and own limits as they stood at
-- the step's end by workspace_limits_spans, its plan's by
-- admission_limits_at. The runs are those
-- RUNNING now and those started since @since (by the admission waits'
-- started_at index) that
-- ended after @from: a run started before @since that ended inside the
-- window is not counted. Each run is joined to the steps it spans.
WITH runs AS (
    SELECT e.workspace_id,
           greatest(0, ceil(extract(epoch FROM e.started_at - sqlc.arg(from_at)::timestamptz) / sqlc.arg(step_seconds)::integer - 1))::integer AS first_i,
           CASE WHEN e.completed_at IS NULL THEN sqlc.arg(points)::integer - 1
                ELSE least(sqlc.arg(points)::integer - 1, ceil(extract(epoch FROM e.completed_at - sqlc.arg(from_at)::timestamptz) / sqlc.arg(step_seconds)::integer - 1) - 1)::integer END AS last_i
    FROM workflow_executions e
    WHERE e.status = 'RUNNING'
       OR (e.id IN (SELECT a.execution_id FROM admission_waits a WHERE a.started_at >= sqlc.arg(since)::timestamptz)
           AND e.completed_at > sqlc.arg(from_at)::timestamptz)
), per_ws AS (
    SELECT s.i, runs.workspace_id, count(*)::integer AS running
    FROM runs JOIN generate_series(0, sqlc.arg(points)::integer - 1) AS s(i) ON s.i BETWEEN runs.first_i AND runs.last_i
    GROUP BY 1, 2
), plan_at AS (
    SELECT s.i, a.plan, a.max_running, a.floor
    FROM generate_series(0, sqlc.arg(points)::integer - 1) AS s(i)
    CROSS JOIN LATERAL admission_limits_at(sqlc.arg(from_at)::timestamptz + (s.i + 1) * sqlc.arg(step_seconds)::integer * interval '1 second') a
)
SELECT p.i::integer AS step, w.plan,
       sum(p.running)::integer AS running,
       sum(least(p.running, floor_in_force(coalesce(w.floor, pl.floor), coalesce(w.max_running, pl.max_running))))::integer AS within_floor
FROM per_ws p
JOIN workspace_limits_spans w ON w.workspace_id = p.workspace_id
     AND sqlc.arg(from_at)::timestamptz + (p.i + 1) * sqlc.arg(step_seconds)::integer * interval '1 second' >= w.from_at
     AND sqlc.arg(from_at)::timestamptz + (p.i + 1) * sqlc.arg(step_seconds)::integer * interval '1 second' < w.to_at
JOIN plan_at pl ON pl.i = p.i AND pl.plan = w.plan
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: CapacityLimits :many
-- Per step and plan, the plan's ceiling and floor (as stored) and the
-- pool's capacity (NULL: none) in force at the step's end, by
-- admission_limits_at: what CapacityRunning splits each step's runs by.
SELECT s.i::integer AS step, a.plan, a.max_running, a.floor, a.pool_capacity
FROM generate_series(0, sqlc.arg(points)::integer - 1) AS s(i)
CROSS JOIN LATERAL admission_limits_at(sqlc.arg(from_at)::timestamptz + (s.i + 1) * sqlc.arg(step_seconds)::integer * interval '1 second') a
ORDER BY 1, 2;

-- name: CapacityWaits :many
-- Per step and plan, the runs started in the step and the p50 and p99 of
-- their admission waits (docs/admission.md#admission-wait), by the
-- admission waits' started_at index, each run counted in the plan its
-- workspace was on when it started (workspace_limits_spans).
SELECT floor(extract(epoch FROM a.started_at - sqlc.arg(from_at)::timestamptz) / sqlc.arg(step_seconds)::integer)::integer AS step, w.plan,
       count(*)::integer AS starts,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY a.wait_ms)::double precision AS p50_ms,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY a.wait_ms)::double precision AS p99_ms
FROM admission_waits a
JOIN workspace_limits_spans w ON w.workspace_id = a.workspace_id
     AND a.started_at >= w.from_at AND a.started_at < w.to_at
WHERE a.started_at >= sqlc.arg(from_at)::timestamptz AND a.started_at < sqlc.arg(to_at)::timestamptz AND a.wait_ms IS NOT NULL
GROUP BY 1, 2
ORDER BY 1, 2;
