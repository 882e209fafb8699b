-- name: DefinitionInsert :one
INSERT INTO workflow_definitions (id, workspace_id, name)
VALUES (@id, @workspace_id, @name)
RETURNING *;

-- name: DefinitionVersionInsert :one
INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph)
VALUES (@workflow_definition_id, @version, @graph)
RETURNING *;

-- name: DefinitionVersionPinsInsert :exec
-- The child versions a new version's SUB_WORKFLOW nodes pin by number
-- (domain.Graph.PinnedVersions), written with it.
INSERT INTO workflow_definition_version_pins (workflow_definition_id, version, child_definition_id, child_version)
SELECT @workflow_definition_id, @version, unnest(@child_definition_ids::uuid[]), unnest(@child_versions::int[]);

-- name: DefinitionGet :one
SELECT * FROM workflow_definitions WHERE id = @id AND deleted_at IS NULL;

-- name: DefinitionList :many
-- A page of live definitions with their current graphs, in one statement:
-- the page is a range of the definitions' primary key, and each graph one
-- probe of the versions' key.
SELECT sqlc.embed(d), v.graph
FROM workflow_definitions d
JOIN workflow_definition_versions v ON v.workflow_definition_id = d.id AND v.version = d.current_version
WHERE d.workspace_id = @workspace_id AND d.deleted_at IS NULL
  AND (sqlc.narg(after)::uuid IS NULL OR d.id > sqlc.narg(after)::uuid)
ORDER BY d.id
LIMIT @max_rows;

-- name: DefinitionNextVersion :one
-- Takes the definition's row lock, so concurrent new versions get distinct
-- numbers.
UPDATE workflow_definitions
SET current_version = current_version + 1, updated_at = now()
WHERE id = @id AND deleted_at IS NULL
RETURNING current_version;

-- name: DefinitionSoftDelete :execrows
UPDATE workflow_definitions SET deleted_at = now(), updated_at = now()
WHERE id = @id AND deleted_at IS NULL;

-- name: DefinitionVersionGet :one
SELECT * FROM workflow_definition_versions
WHERE workflow_definition_id = @workflow_definition_id AND version = @version;

-- name: DefinitionWorkspace :one
-- The owner of a live definition, for the ownership check on enqueue.
SELECT workspace_id FROM workflow_definitions WHERE id = @id AND deleted_at IS NULL;

-- name: WorkspaceStorageLock :one
-- Serialises the workspace's definition and version writes until commit,
-- so the counts read after it stay exact until the insert. An advisory
-- lock rather than the workspace row's: admission locks that row with SKIP
-- LOCKED, and would pass the workspace over while a definition is saved.
-- The first key names this lock among the database's advisory locks; two
-- workspaces whose ids hash alike only take turns. Returns the plan.
SELECT w.plan FROM workspaces w
WHERE w.id = @workspace_id AND pg_advisory_xact_lock(1936488035, hashtext(w.id::text)) IS NOT NULL;

-- name: DefinitionStorageCounts :one
-- The workspace's stored definitions (live or deleted) and their versions,
-- both until retention deletes them.
SELECT
    (SELECT count(*) FROM workflow_definitions d WHERE d.workspace_id = @workspace_id)::int AS definitions,
    (SELECT count(*) FROM workflow_definition_versions v JOIN workflow_definitions d ON d.id = v.workflow_definition_id
     WHERE d.workspace_id = @workspace_id)::int AS versions;

-- name: DefinitionVersionGraphs :many
-- The graphs of the claimed items' definition versions, read in the claim's
-- transaction so each workflow starts with its graph in its input.
SELECT v.workflow_definition_id, v.version, v.graph
FROM workflow_definition_versions v
JOIN (SELECT unnest(@workflow_definition_ids::uuid[]) AS id, unnest(@versions::int[]) AS version) AS w
  ON v.workflow_definition_id = w.id AND v.version = w.version;

-- name: DefinitionVersionsFound :many
-- Which of the pinned (definition, version) pairs of the claimed retries
-- still exist, each one primary-key probe, key-share locked until the
-- claim commits so retention cannot delete one between this check and the
-- execution's insert. Asked only for items that pin a version, apart from
-- QueueClaimCandidates, whose join on the current version keeps its plan
-- (joining coalesce(pinned_version, current_version) there lost it: the
-- dispatcher crash test stalled with 1,780 of 3,000 items undispatched).
SELECT v.workflow_definition_id, v.version
FROM (SELECT unnest(@workflow_definition_ids::uuid[]) AS id, unnest(@versions::int[]) AS version) AS w
JOIN workflow_definition_versions v ON v.workflow_definition_id = w.id AND v.version = w.version
FOR KEY SHARE OF v;

-- name: DefinitionConcurrency :one
-- The concurrency key a version declares (NULL for none), which an enqueue
-- resolves over the item's input: the version the item will run, @version
-- for a retry pinned to one, else the current version.
SELECT (v.graph -> 'concurrency')::jsonb AS concurrency
FROM workflow_definitions d
JOIN workflow_definition_versions v ON v.workflow_definition_id = d.id
 AND v.version = coalesce(sqlc.narg(version)::int, d.current_version)
WHERE d.id = @id AND d.deleted_at IS NULL;
