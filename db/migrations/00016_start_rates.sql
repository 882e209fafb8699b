-- +goose Up
-- Start rates: a plan, a workspace and a concurrency key may each limit
-- how often executions start (start_rate per start_rate_per, at most
-- start_burst in any window of one period), on top of the concurrency
-- limits. All three NULL is no rate. Read in the claim transaction under
-- AdmissionLimitsReadLock, as max_running is (see 00010).
ALTER TABLE plans
    ADD COLUMN start_rate     integer CHECK (start_rate BETWEEN 1 AND 10000),
    ADD COLUMN start_rate_per text CHECK (start_rate_per IN ('second', 'minute')),
    ADD COLUMN start_burst    integer CHECK (start_burst BETWEEN 1 AND 10000),
    ADD CONSTRAINT plans_start_rate_whole
        CHECK ((start_rate IS NULL) = (start_rate_per IS NULL) AND (start_rate IS NULL) = (start_burst IS NULL)
               AND (start_burst IS NULL OR start_burst >= start_rate));
ALTER TABLE workspace_limits
    ADD COLUMN start_rate     integer CHECK (start_rate BETWEEN 1 AND 10000),
    ADD COLUMN start_rate_per text CHECK (start_rate_per IN ('second', 'minute')),
    ADD COLUMN start_burst    integer CHECK (start_burst BETWEEN 1 AND 10000),
    ADD CONSTRAINT workspace_limits_start_rate_whole
        CHECK ((start_rate IS NULL) = (start_rate_per IS NULL) AND (start_rate IS NULL) = (start_burst IS NULL)
               AND (start_burst IS NULL OR start_burst >= start_rate));
-- A concurrency key's rate is the definition's, stored on the item at
-- enqueue beside its limit, as the limit is.
ALTER TABLE workflow_execution_queue
    ADD COLUMN concurrency_rate     integer CHECK (concurrency_rate BETWEEN 1 AND 10000),
    ADD COLUMN concurrency_rate_per text CHECK (concurrency_rate_per IN ('second', 'minute')),
    ADD COLUMN concurrency_burst    integer CHECK (concurrency_burst BETWEEN 1 AND 10000),
    ADD CONSTRAINT workflow_execution_queue_concurrency_rate_whole
        CHECK ((concurrency_rate IS NULL) = (concurrency_rate_per IS NULL) AND (concurrency_rate IS NULL) = (concurrency_burst IS NULL)
               AND (concurrency_rate IS NULL OR concurrency_key IS NOT NULL));

-- One GCRA bucket per workspace (concurrency_key '') and per rated key,
-- each one theoretical arrival time (tat) and the time its next start is
-- due (next_at, tat less the rate's tolerance, so SQL can pass over a key
-- that is over its rate without knowing the rate). A bucket whose tat has
-- passed is at rest, the same as no row: the claim deletes those, so rows
-- exist only for buckets that started something within the last
-- burst/rate periods. Written only by a claim that holds the workspace's
-- admission lock (WorkspacesLockForAdmission), which is what makes the
-- rate exact across dispatchers; the database's clock is the only clock.
CREATE TABLE start_rate_buckets (
    workspace_id    uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    concurrency_key text NOT NULL CHECK (octet_length(concurrency_key) <= 256),
    tat             timestamptz NOT NULL,
    next_at         timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, concurrency_key)
);
CREATE INDEX start_rate_buckets_tat_idx ON start_rate_buckets (tat);

-- The delayed items (notBefore ahead, or backing off after a failed
-- start): available_at is later than created_at only for them. The claim
-- probes this per workspace it locked for the earliest that comes due, so
-- the dispatcher sleeps until then instead of a whole poll.
CREATE INDEX workflow_execution_queue_delayed_idx ON workflow_execution_queue (workspace_id, available_at)
    WHERE status = 'PENDING' AND available_at > created_at;

-- +goose Down
DROP INDEX workflow_execution_queue_delayed_idx;
DROP TABLE start_rate_buckets;
ALTER TABLE workflow_execution_queue
    DROP CONSTRAINT workflow_execution_queue_concurrency_rate_whole,
    DROP COLUMN concurrency_burst,
    DROP COLUMN concurrency_rate_per,
    DROP COLUMN concurrency_rate;
ALTER TABLE workspace_limits
    DROP CONSTRAINT workspace_limits_start_rate_whole,
    DROP COLUMN start_burst,
    DROP COLUMN start_rate_per,
    DROP COLUMN start_rate;
ALTER TABLE plans
    DROP CONSTRAINT plans_start_rate_whole,
    DROP COLUMN start_burst,
    DROP COLUMN start_rate_per,
    DROP COLUMN start_rate;
