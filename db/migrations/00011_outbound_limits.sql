-- +goose Up
-- A workspace's rates for the target hosts of its HTTP_REQUEST nodes, set
-- through the API (at most SLUICE_OUTBOUND_HOSTS_MAX per workspace).
CREATE TABLE workspace_outbound_limits (
    workspace_id     uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    host             text NOT NULL CHECK (length(host) BETWEEN 1 AND 253),
    rate_per_second  double precision NOT NULL CHECK (rate_per_second >= 0.001 AND rate_per_second <= 1000),
    burst            integer NOT NULL CHECK (burst BETWEEN 1 AND 1000),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, host)
);

-- The shared state of a workspace's calls to one host, which every worker
-- reads and moves under the row's lock: next_at is the rate's bucket of
-- reserved slots (domain.OutboundLimit.Turn), sent_next_at its bucket of
-- calls sent (domain.OutboundLimit.Admit), paused_until the end of the pause an
-- upstream's Retry-After asked for. A row exists while the host has a
-- limit or a pause; a pause row of a host without a limit is dropped once
-- it has passed.
CREATE TABLE workspace_outbound_hosts (
    workspace_id  uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    host          text NOT NULL CHECK (length(host) BETWEEN 1 AND 253),
    next_at       timestamptz,
    sent_next_at  timestamptz,
    paused_until  timestamptz,
    PRIMARY KEY (workspace_id, host)
);

-- +goose Down
DROP TABLE workspace_outbound_hosts;
DROP TABLE workspace_outbound_limits;
