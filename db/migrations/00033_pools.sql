-- +goose Up
-- Capacity shares (docs/admission.md#pools-floors-ceilings-and-weights).
-- The pool is the capacity every workspace shares: RUNNING executions of
-- all workspaces together. NULL capacity is no pool (unbounded), which
-- admits exactly as before: each workspace up to its own limit. One row,
-- the default pool; named so that a pool per worker queue can follow.
--
-- Locking: an edit takes AdmissionLimitsWriteLock, as a plan edit does. A
-- claim reads the capacity after AdmissionLimitsReadLock and, when there
-- is one, locks this row FOR UPDATE before its workspaces and recounts the
-- pool's RUNNING executions under it: every transaction that creates a
-- RUNNING execution then holds the row, so the count is exact with any
-- number of dispatchers. With no capacity nothing more is locked.
CREATE TABLE pools (
    name       text PRIMARY KEY CHECK (name = 'default'),
    capacity   integer CHECK (capacity BETWEEN 1 AND 10000000),
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pools (name) VALUES ('default');

-- A plan's floor is the RUNNING executions each of its workspaces is
-- guaranteed in the pool (admitted before any borrower); max_running is
-- its ceiling. Its weight is how borrowed capacity is shared between
-- borrowers. Seeded floors are 0 (nothing reserved) so that a pool set
-- without floors shares by weight alone.
ALTER TABLE plans
    ADD COLUMN floor integer NOT NULL DEFAULT 0 CHECK (floor BETWEEN 0 AND 100000),
    ADD COLUMN weight integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000);
UPDATE plans SET weight = 2 WHERE name = 'PRO';
UPDATE plans SET weight = 4 WHERE name = 'ENTERPRISE';
ALTER TABLE workspace_limits
    ADD COLUMN floor integer CHECK (floor BETWEEN 0 AND 100000);

-- +goose Down
ALTER TABLE workspace_limits DROP COLUMN floor;
ALTER TABLE plans DROP COLUMN weight, DROP COLUMN floor;
DROP TABLE pools;
