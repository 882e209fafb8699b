-- +goose Up
-- The whole data model of Sluice. Enumerations are CHECK constraints rather
-- than Postgres enum types so that adding a value later is a plain
-- constraint swap inside a transaction.

CREATE TABLE workspaces (
    id         uuid PRIMARY KEY,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    plan       text NOT NULL CHECK (plan IN ('FREE', 'PRO', 'ENTERPRISE')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Workspace API keys: only a SHA-256 of the secret is stored; the prefix lets
-- people tell keys apart in listings without revealing them.
CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    prefix       text NOT NULL,
    secret_hash  bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);
CREATE INDEX api_keys_workspace_idx ON api_keys (workspace_id, created_at);

CREATE TABLE workflow_definitions (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    current_version integer NOT NULL DEFAULT 1 CHECK (current_version >= 1),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- Soft delete: queued items of a deleted definition fail at dispatch with
    -- a clear error instead of vanishing with a cascade.
    deleted_at      timestamptz
);
CREATE INDEX workflow_definitions_workspace_idx ON workflow_definitions (workspace_id, created_at) WHERE deleted_at IS NULL;

-- Versions are immutable: a change of graph is a new row.
CREATE TABLE workflow_definition_versions (
    workflow_definition_id uuid NOT NULL REFERENCES workflow_definitions (id) ON DELETE CASCADE,
    version                integer NOT NULL CHECK (version >= 1),
    graph                  jsonb NOT NULL CHECK (jsonb_typeof(graph) = 'object'),
    created_at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_definition_id, version)
);

CREATE TABLE workflow_executions (
    id                     uuid PRIMARY KEY,
    workspace_id           uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    workflow_definition_id uuid NOT NULL,
    workflow_version       integer NOT NULL,
    status                 text NOT NULL CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    input                  jsonb NOT NULL DEFAULT '{}'::jsonb,
    started_at             timestamptz NOT NULL DEFAULT now(),
    completed_at           timestamptz,
    duration_ms            bigint CHECK (duration_ms >= 0),
    error                  text,
    FOREIGN KEY (workflow_definition_id, workflow_version)
        REFERENCES workflow_definition_versions (workflow_definition_id, version),
    CHECK ((status = 'RUNNING') = (completed_at IS NULL))
);
-- The admission count: RUNNING executions per workspace.
CREATE INDEX workflow_executions_active_idx ON workflow_executions (workspace_id) WHERE status = 'RUNNING';
CREATE INDEX workflow_executions_list_idx ON workflow_executions (workspace_id, started_at DESC, id DESC);

-- Queue items deliberately carry no foreign keys to their workspace and
-- definition: an item outlives a deleted workspace or definition so that the
-- dispatcher can mark it FAILED with a clear last_error instead of it
-- vanishing in a cascade. execution_id has none either: after a failed start
-- the execution row is removed to free the slot, and the id is kept so that
-- the retry starts the same Temporal workflow id (execution-{id}).
CREATE TABLE workflow_execution_queue (
    id                     uuid PRIMARY KEY,
    workspace_id           uuid NOT NULL,
    workflow_definition_id uuid NOT NULL,
    status                 text NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'CLAIMED', 'DISPATCHED', 'FAILED', 'CANCELLED')),
    input                  jsonb NOT NULL DEFAULT '{}'::jsonb,
    priority               smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    created_at             timestamptz NOT NULL DEFAULT now(),
    available_at           timestamptz NOT NULL DEFAULT now(),
    claimed_at             timestamptz,
    dispatched_at          timestamptz,
    -- attempt_count counts every release back to PENDING; dispatch_failures
    -- counts only dispatch errors and alone is compared with the maximum.
    attempt_count          integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    dispatch_failures      integer NOT NULL DEFAULT 0 CHECK (dispatch_failures >= 0),
    last_error             text,
    execution_id           uuid,
    CHECK ((status = 'CLAIMED') = (claimed_at IS NOT NULL)),
    CHECK (status <> 'DISPATCHED' OR (dispatched_at IS NOT NULL AND execution_id IS NOT NULL)),
    CHECK (status <> 'CLAIMED' OR execution_id IS NOT NULL)
);
-- The claim: pending items in fairness order.
CREATE INDEX workflow_execution_queue_pending_idx
    ON workflow_execution_queue (workspace_id, priority, created_at, id) WHERE status = 'PENDING';
CREATE INDEX workflow_execution_queue_claimed_idx
    ON workflow_execution_queue (claimed_at) WHERE status = 'CLAIMED';
CREATE INDEX workflow_execution_queue_list_idx ON workflow_execution_queue (workspace_id, status, created_at);
CREATE UNIQUE INDEX workflow_execution_queue_execution_idx ON workflow_execution_queue (execution_id);

CREATE TABLE workflow_execution_nodes (
    id           uuid PRIMARY KEY,
    execution_id uuid NOT NULL REFERENCES workflow_executions (id) ON DELETE CASCADE,
    node_key     text NOT NULL,
    node_type    text NOT NULL,
    status       text NOT NULL CHECK (status IN ('RUNNING', 'COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED')),
    attempt      integer NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    input        jsonb,
    output       jsonb,
    error        text,
    started_at   timestamptz,
    completed_at timestamptz,
    UNIQUE (execution_id, node_key)
);

-- Idempotency-Key records for enqueue, scoped per workspace.
CREATE TABLE idempotency_keys (
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    key          text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash bytea NOT NULL,
    queue_id     uuid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, key)
);

-- The audit log.
CREATE TABLE activity (
    id           uuid PRIMARY KEY,
    workspace_id uuid REFERENCES workspaces (id) ON DELETE CASCADE,
    actor        text NOT NULL,
    action       text NOT NULL,
    subject_id   uuid,
    details      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX activity_workspace_idx ON activity (workspace_id, created_at);

-- ShedLock-compatible lease table: the same columns ShedLock's JDBC provider
-- uses, so a JVM service could share it.
CREATE TABLE shedlock (
    name       varchar(64) PRIMARY KEY,
    lock_until timestamptz NOT NULL,
    locked_at  timestamptz NOT NULL,
    locked_by  varchar(255) NOT NULL
);

-- +goose Down
DROP TABLE shedlock;
DROP TABLE activity;
DROP TABLE idempotency_keys;
DROP TABLE workflow_execution_nodes;
DROP TABLE workflow_execution_queue;
DROP TABLE workflow_executions;
DROP TABLE workflow_definition_versions;
DROP TABLE workflow_definitions;
DROP TABLE api_keys;
DROP TABLE workspaces;
