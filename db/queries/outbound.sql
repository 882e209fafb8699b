-- name: OutboundLimitsList :many
SELECT host, rate_per_second, burst, created_at, updated_at
FROM workspace_outbound_limits WHERE workspace_id = @workspace_id ORDER BY host;

-- name: OutboundLimitsLock :exec
-- Serialises a workspace's limit writes until commit, so the count read
-- after it stays exact until the insert.
SELECT pg_advisory_xact_lock(1869968244, hashtext(CAST(@workspace_id::uuid AS text)));

-- name: OutboundLimitsCount :one
SELECT count(*)::int FROM workspace_outbound_limits WHERE workspace_id = @workspace_id;

-- name: OutboundLimitExists :one
SELECT EXISTS (SELECT 1 FROM workspace_outbound_limits WHERE workspace_id = @workspace_id AND host = @host);

-- name: OutboundLimitPut :one
INSERT INTO workspace_outbound_limits (workspace_id, host, rate_per_second, burst)
VALUES (@workspace_id, @host, @rate_per_second, @burst)
ON CONFLICT (workspace_id, host) DO UPDATE
SET rate_per_second = EXCLUDED.rate_per_second, burst = EXCLUDED.burst, updated_at = now()
RETURNING host, rate_per_second, burst, created_at, updated_at;

-- name: OutboundLimitDelete :execrows
DELETE FROM workspace_outbound_limits WHERE workspace_id = @workspace_id AND host = @host;

-- name: OutboundHostEnsure :exec
-- Makes the host's state row exist so that OutboundHostLock has a row to
-- lock.
INSERT INTO workspace_outbound_hosts (workspace_id, host) VALUES (@workspace_id, @host)
ON CONFLICT (workspace_id, host) DO NOTHING;

-- name: OutboundHostLock :one
-- The host's limit (rate 0 for none), its state locked until commit, and
-- the database's clock, the one clock every worker's turn is measured by.
SELECT coalesce(l.rate_per_second, 0)::float8 AS rate_per_second, coalesce(l.burst, 0)::int AS burst,
       h.next_at, h.sent_next_at, h.paused_until, clock_timestamp()::timestamptz AS now
FROM workspace_outbound_hosts h
LEFT JOIN workspace_outbound_limits l ON l.workspace_id = h.workspace_id AND l.host = h.host
WHERE h.workspace_id = @workspace_id AND h.host = @host
FOR UPDATE OF h;

-- name: OutboundHostState :one
-- Whether the workspace limits the host, and the end of the host's pause
-- (null when it has none): all that a call to a host without a limit
-- needs, read in one statement that takes no lock and writes nothing.
SELECT
    EXISTS (SELECT 1 FROM workspace_outbound_limits l WHERE l.workspace_id = @workspace_id AND l.host = @host) AS limited,
    (SELECT h.paused_until FROM workspace_outbound_hosts h WHERE h.workspace_id = @workspace_id AND h.host = @host) AS paused_until,
    clock_timestamp()::timestamptz AS now;

-- name: OutboundHostSetNext :exec
UPDATE workspace_outbound_hosts SET next_at = @next_at WHERE workspace_id = @workspace_id AND host = @host;

-- name: OutboundHostsForgetPassed :exec
-- Drops the workspace's pause rows that no longer hold anything: their
-- pause has passed and their host has no limit.
DELETE FROM workspace_outbound_hosts h
WHERE h.workspace_id = @workspace_id AND (h.paused_until IS NULL OR h.paused_until <= now())
  AND NOT EXISTS (SELECT 1 FROM workspace_outbound_limits l WHERE l.workspace_id = h.workspace_id AND l.host = h.host);

-- name: OutboundHostsPausedCount :one
SELECT count(*)::int FROM workspace_outbound_hosts
WHERE workspace_id = @workspace_id AND paused_until > now() AND host <> @host;

-- name: OutboundHostPause :one
-- Pauses the host until now plus the wait, never shortening a longer
-- pause already there; returns the pause's end.
INSERT INTO workspace_outbound_hosts (workspace_id, host, paused_until)
VALUES (@workspace_id, @host, clock_timestamp() + make_interval(secs => @wait_seconds::float8))
ON CONFLICT (workspace_id, host) DO UPDATE
SET paused_until = greatest(workspace_outbound_hosts.paused_until, EXCLUDED.paused_until)
RETURNING paused_until;

-- name: OutboundHostSetSent :exec
UPDATE workspace_outbound_hosts SET sent_next_at = @sent_next_at WHERE workspace_id = @workspace_id AND host = @host;

-- name: OutboundPausesList :many
-- The workspace's hosts paused now by an upstream's Retry-After, by host,
-- with the pause's end. A workspace has at most
-- SLUICE_OUTBOUND_PAUSED_HOSTS_MAX of them (at most 10,000), which the
-- LIMIT holds the answer to as well.
SELECT host, paused_until::timestamptz AS paused_until FROM workspace_outbound_hosts
WHERE workspace_id = @workspace_id AND paused_until > now()
ORDER BY host
LIMIT 10000;
