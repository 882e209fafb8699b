-- +goose Up
-- retryAfterRounds caps, per plan, the Retry-After answers one node run
-- (each FOR_EACH iteration is one) waits out; the next fails the node.
-- Each round is a call to the host and about a dozen events of the run's
-- history. Seeded from the worker's default, 10 rounds for every plan;
-- SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS stays the operator's ceiling over it.
ALTER TABLE plans
    ADD COLUMN retry_after_rounds integer NOT NULL DEFAULT 10 CHECK (retry_after_rounds BETWEEN 1 AND 1000);
ALTER TABLE workspace_limits
    ADD COLUMN retry_after_rounds integer CHECK (retry_after_rounds BETWEEN 1 AND 1000);

-- +goose Down
ALTER TABLE workspace_limits DROP COLUMN retry_after_rounds;
ALTER TABLE plans DROP COLUMN retry_after_rounds;
