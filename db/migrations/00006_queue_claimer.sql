-- +goose Up
-- A claim records its claimer: the lease it was made under (the queue
-- lease in exclusive mode, the dispatcher's own registration lease
-- otherwise), the process holding it (shedlock.locked_by) and the term,
-- which is that lease's locked_at: ShedLock's acquire keeps locked_at while
-- the same holder extends an unexpired lease and sets it anew on every
-- other acquisition, so (lease, holder, term) names one unbroken tenure.
-- A CLAIMED item whose term is no longer live (its lease row expired,
-- released or taken over) belongs to a dispatcher that can no longer act
-- on it, and the next holder settles it at once instead of waiting for
-- stale recovery. The columns describe the item's last claim; they are
-- NULL on items never claimed since this migration, which stale recovery
-- alone settles.
ALTER TABLE workflow_execution_queue
    ADD COLUMN claim_lease text,
    ADD COLUMN claimed_by  text,
    ADD COLUMN claim_term  timestamptz;

-- +goose Down
ALTER TABLE workflow_execution_queue
    DROP COLUMN claim_term,
    DROP COLUMN claimed_by,
    DROP COLUMN claim_lease;
