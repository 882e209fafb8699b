-- Retention deletes, a batch per statement, each its own short
-- transaction. The candidates are read per workspace of the plan from an
-- index that starts with the workspace and orders by age, so a batch
-- costs one index probe per workspace and the rows it deletes, never a
-- walk over rows that other plans keep. Rows locked by other work are
-- skipped (SKIP LOCKED) and taken on a later run.

-- name: RetentionDeleteExecutions :execrows
-- Finished executions completed before @before; their node records go
-- with them (ON DELETE CASCADE).
DELETE FROM workflow_executions e
USING (
    SELECT x.id FROM workspaces w
    CROSS JOIN LATERAL (
        SELECT f.id FROM workflow_executions f
        WHERE f.workspace_id = w.id AND f.status <> 'RUNNING' AND f.completed_at < @before::timestamptz
        ORDER BY f.completed_at
        LIMIT @max_rows
        FOR UPDATE SKIP LOCKED
    ) x
    WHERE w.plan = @plan
    LIMIT @max_rows
) d
WHERE e.id = d.id;

-- name: RetentionDeleteQueueItems :execrows
-- FAILED and CANCELLED items enqueued before @before. Workspaces are read
-- from the stored-items counts, which outlive a deleted workspace; its
-- items have the plan '' (the longest period).
DELETE FROM workflow_execution_queue q
USING (
    SELECT x.id FROM workspace_queue_stored s
    LEFT JOIN workspaces w ON w.id = s.workspace_id
    CROSS JOIN LATERAL (
        SELECT i.id FROM workflow_execution_queue i
        WHERE i.workspace_id = s.workspace_id AND i.status IN ('FAILED', 'CANCELLED') AND i.created_at < @before::timestamptz
        ORDER BY i.created_at
        LIMIT @max_rows
        FOR UPDATE SKIP LOCKED
    ) x
    WHERE s.items > 0 AND coalesce(w.plan, '') = @plan::text
    LIMIT @max_rows
) d
WHERE q.id = d.id AND q.status IN ('FAILED', 'CANCELLED');

-- name: RetentionDeleteActivity :execrows
-- Activity rows written before @before.
DELETE FROM activity a
USING (
    SELECT x.id FROM workspaces w
    CROSS JOIN LATERAL (
        SELECT b.id FROM activity b
        WHERE b.workspace_id = w.id AND b.created_at < @before::timestamptz
        ORDER BY b.created_at
        LIMIT @max_rows
        FOR UPDATE SKIP LOCKED
    ) x
    WHERE w.plan = @plan
    LIMIT @max_rows
) d
WHERE a.id = d.id;

-- name: RetentionDeleteActivityOfNoWorkspace :execrows
-- Activity rows of no workspace (the admin's) written before @before.
DELETE FROM activity a
USING (
    SELECT b.id FROM activity b
    WHERE b.workspace_id IS NULL AND b.created_at < @before::timestamptz
    ORDER BY b.created_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
) d
WHERE a.id = d.id;

-- name: RetentionDeleteDefinitionVersions :execrows
-- Versions older than their definition's current one, replaced before
-- @before (a newer version was created before it), that no stored
-- execution uses, no stored queue item pins (a retry runs the version it
-- pins) and no stored version's SUB_WORKFLOW pins. The current version is never deleted; a claim about to run a
-- pinned version holds a key-share lock on it (DefinitionVersionsFound),
-- which the row lock below skips.
DELETE FROM workflow_definition_versions v
USING (
    SELECT o.workflow_definition_id, o.version
    FROM workspaces w
    JOIN workflow_definitions d ON d.workspace_id = w.id
    JOIN workflow_definition_versions o ON o.workflow_definition_id = d.id AND o.version < d.current_version
    WHERE w.plan = @plan
      AND EXISTS (SELECT 1 FROM workflow_definition_versions n
                  WHERE n.workflow_definition_id = o.workflow_definition_id AND n.version > o.version AND n.created_at < @before::timestamptz)
      AND NOT EXISTS (SELECT 1 FROM workflow_executions e
                      WHERE e.workflow_definition_id = o.workflow_definition_id AND e.workflow_version = o.version)
      AND NOT EXISTS (SELECT 1 FROM workflow_execution_queue q
                      WHERE q.workflow_definition_id = o.workflow_definition_id AND q.pinned_version = o.version)
      AND NOT EXISTS (SELECT 1 FROM workflow_definition_version_pins p
                      WHERE p.child_definition_id = o.workflow_definition_id AND p.child_version = o.version)
    LIMIT @max_rows
    FOR UPDATE OF o SKIP LOCKED
) x
WHERE v.workflow_definition_id = x.workflow_definition_id AND v.version = x.version;

-- name: RetentionDeleteDefinitions :execrows
-- Definitions deleted before @before that no stored execution uses and
-- none of whose versions a stored SUB_WORKFLOW pins; their versions go
-- with them (ON DELETE CASCADE).
DELETE FROM workflow_definitions d
USING (
    SELECT x.id FROM workspaces w
    CROSS JOIN LATERAL (
        SELECT g.id FROM workflow_definitions g
        WHERE g.workspace_id = w.id AND g.deleted_at < @before::timestamptz
          AND NOT EXISTS (SELECT 1 FROM workflow_executions e WHERE e.workflow_definition_id = g.id)
          AND NOT EXISTS (SELECT 1 FROM workflow_definition_version_pins p
                          WHERE p.child_definition_id = g.id)
        ORDER BY g.deleted_at
        LIMIT @max_rows
        FOR UPDATE SKIP LOCKED
    ) x
    WHERE w.plan = @plan
    LIMIT @max_rows
) x
WHERE d.id = x.id;

-- name: RetentionOldestKept :one
-- The age mark of the oldest row of each kind still stored, for the
-- oldest-kept gauges (now() when there is none): one index probe per
-- workspace (or definition) each. A version's mark is when the version
-- after it was created.
SELECT
    coalesce((SELECT min(x.completed_at) FROM workspaces w CROSS JOIN LATERAL (
        SELECT f.completed_at FROM workflow_executions f WHERE f.workspace_id = w.id AND f.status <> 'RUNNING'
        ORDER BY f.completed_at LIMIT 1) x), now())::timestamptz AS executions,
    coalesce((SELECT min(x.created_at) FROM workspace_queue_stored s CROSS JOIN LATERAL (
        SELECT i.created_at FROM workflow_execution_queue i WHERE i.workspace_id = s.workspace_id AND i.status IN ('FAILED', 'CANCELLED')
        ORDER BY i.created_at LIMIT 1) x WHERE s.items > 0), now())::timestamptz AS queue_items,
    coalesce(least(
        (SELECT min(x.created_at) FROM workspaces w CROSS JOIN LATERAL (
            SELECT b.created_at FROM activity b WHERE b.workspace_id = w.id ORDER BY b.created_at LIMIT 1) x),
        (SELECT min(b.created_at) FROM activity b WHERE b.workspace_id IS NULL)), now())::timestamptz AS activity,
    coalesce((SELECT min(x.replaced_at) FROM workflow_definitions d CROSS JOIN LATERAL (
        SELECT n.created_at AS replaced_at FROM workflow_definition_versions o
        JOIN workflow_definition_versions n ON n.workflow_definition_id = o.workflow_definition_id AND n.version > o.version
        WHERE o.workflow_definition_id = d.id AND o.version < d.current_version
        ORDER BY o.version, n.version LIMIT 1) x), now())::timestamptz AS definition_versions,
    coalesce((SELECT min(x.deleted_at) FROM workspaces w CROSS JOIN LATERAL (
        SELECT g.deleted_at FROM workflow_definitions g WHERE g.workspace_id = w.id AND g.deleted_at IS NOT NULL
        ORDER BY g.deleted_at LIMIT 1) x), now())::timestamptz AS deleted_definitions;

-- name: AdmissionLimitsHistoryDelete :execrows
-- The admission limits' snapshots no capacity window reads any more:
-- per plan, those set before the one in force at @before (the start of
-- the longest window); that one and every later one are kept.
DELETE FROM admission_limits_history h
WHERE h.set_at < (SELECT max(k.set_at) FROM admission_limits_history k
                  WHERE k.plan = h.plan AND k.set_at <= @before::timestamptz);

-- name: WorkspaceLimitsHistoryDelete :execrows
-- The workspaces' replaced figures no capacity window reads any more:
-- those replaced before @before (the start of the longest window). Each
-- later one is kept, the earliest per workspace being what stood then.
DELETE FROM workspace_limits_history h WHERE h.replaced_at < @before::timestamptz;
