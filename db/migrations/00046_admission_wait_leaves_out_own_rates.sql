-- +goose Up
-- An item a start rate of its own tenant held back (its workspace's, or
-- its concurrency key's) waited for its own tenant's limit, as one held
-- by its running limit does: its admission wait now leaves that out.
-- rate_allowed_at is when the last of those rates let the item go, as the
-- claim that started it read the buckets (domain.RateBucket.AllowedSince);
-- NULL when no rate held it back after it was enqueued and due. The claim
-- writes it in its own transaction, after the row is written, so the
-- marking and the run's admission, both after the claim's commit, read it.
ALTER TABLE admission_waits ADD COLUMN rate_allowed_at timestamptz;

-- queue_admission_wait_ms is the one definition of an item's admission
-- wait, in milliseconds up to now (its start being recorded): from the
-- latest of its enqueue (created), its notBefore or back-off (available),
-- the moment its workspace's own running limit last stopped holding its
-- items before its claim (slot_freed, admission_waits.slot_freed_at), and
-- the moment its own start rates let it go (rate_allowed,
-- admission_waits.rate_allowed_at). greatest() passes over NULLs.
-- +goose StatementBegin
CREATE FUNCTION queue_admission_wait_ms(created timestamptz, available timestamptz, slot_freed timestamptz, rate_allowed timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(0, floor(1000 * extract(epoch FROM now() - greatest(created, available, slot_freed, rate_allowed))))::bigint
$$;
-- +goose StatementEnd
DROP FUNCTION queue_admission_wait_ms(timestamptz, timestamptz, timestamptz);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION queue_admission_wait_ms(created timestamptz, available timestamptz, slot_freed timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(0, floor(1000 * extract(epoch FROM now() - greatest(created, available, slot_freed))))::bigint
$$;
-- +goose StatementEnd
DROP FUNCTION queue_admission_wait_ms(timestamptz, timestamptz, timestamptz, timestamptz);
ALTER TABLE admission_waits DROP COLUMN rate_allowed_at;
