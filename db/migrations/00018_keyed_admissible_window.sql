-- +goose Up
-- queue_admissible_window is the claim's read of one locked workspace's
-- items (QueueAdmissibleWindow): up to n items that may be claimed now, in
-- claim order (priority, then age), each with its key's RUNNING count.
--
-- It walks the workspace's PENDING items in claim order, in chunks read
-- by keyset from the pending index (the first as large as the window,
-- then doubling up to 1,024; one query without a LIMIT, planned for every
-- pending item of the workspace, took 6 ms a workspace at 1,000 pending
-- in make bench), and passes over an item whose key has no slot left,
-- counting as taken both the key's RUNNING executions and the items of
-- that key the walk has already kept. So a burst of one key's items at the head fills
-- the window with as many of them as the key can run, not with n items of
-- which one can run: make bench (BenchmarkDispatchWithConcurrencyKeys,
-- keys of limit 1 enqueued in bursts of 10) measured the plain lateral
-- scan, which counted RUNNING executions only, at 62 items a claim against
-- 193 without keys. A key's RUNNING count is read once per walk (one probe
-- of workflow_executions_key_running_idx), not once per item passed.
--
-- Its two statements are planned once per connection: the pool's
-- force_custom_plan (see adapters/postgres) would plan them again on every
-- execution, and planning the key probe cost more than running it (the
-- walk took 3 ms a workspace in make bench; the generic plans are the
-- pending index's range scan and the key index's probe).
--
-- The walk keeps its per-key counts for the first 256 keys it meets
-- (array lookups, linear in the keys kept); past that a key's items are
-- checked against RUNNING alone with one probe each, as the plain scan
-- did, so no head of thousands of distinct full keys costs more than it
-- did. The counts are a filter only: domain.ChooseKeyed picks from the
-- window with the same rule, under the workspace's lock, which is what
-- keeps a key's limit exact.
--
-- Start rates (00016): an item whose key is over its rate (its bucket's
-- next start still ahead) is passed over too, read once per key kept
-- (one primary-key probe of start_rate_buckets), and each row carries its
-- key's rate for ChooseKeyed.
-- +goose StatementBegin
CREATE FUNCTION queue_admissible_window(ws uuid, n integer)
RETURNS TABLE (id uuid, concurrency_key text, concurrency_limit integer, key_running integer,
               concurrency_rate integer, concurrency_rate_per text, concurrency_burst integer)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    item record;
    keys text[] := '{}';
    running integer[] := '{}';
    taken integer[] := '{}';
    -- rate_held[k] is set when key k is over its start rate.
    rate_held boolean[] := '{}';
    held boolean;
    k integer;
    r integer;
    kept integer := 0;
    seen integer;
    chunk integer := greatest(n, 16);
    after_priority smallint := -32768;
    after_created_at timestamptz := '-infinity';
    after_id uuid := '00000000-0000-0000-0000-000000000000';
BEGIN
    IF n IS NULL OR n <= 0 THEN
        RETURN;
    END IF;
    LOOP
        seen := 0;
        FOR item IN
            SELECT i.id, i.priority, i.created_at, i.concurrency_key, i.concurrency_limit,
                   i.concurrency_rate, i.concurrency_rate_per, i.concurrency_burst
            FROM workflow_execution_queue i
            WHERE i.workspace_id = ws AND i.status = 'PENDING' AND i.available_at <= now()
              AND (i.priority, i.created_at, i.id) > (after_priority, after_created_at, after_id)
            ORDER BY i.priority, i.created_at, i.id
            LIMIT chunk
        LOOP
            seen := seen + 1;
            after_priority := item.priority;
            after_created_at := item.created_at;
            after_id := item.id;
            r := 0;
            IF item.concurrency_key IS NOT NULL THEN
                k := array_position(keys, item.concurrency_key);
                IF k IS NULL THEN
                    SELECT count(*)::integer INTO r FROM workflow_executions e
                    WHERE e.workspace_id = ws AND e.concurrency_key = item.concurrency_key AND e.status = 'RUNNING';
                    held := item.concurrency_rate IS NOT NULL AND EXISTS (
                        SELECT 1 FROM start_rate_buckets b
                        WHERE b.workspace_id = ws AND b.concurrency_key = item.concurrency_key AND b.next_at > now());
                    IF cardinality(keys) < 256 THEN
                        keys := keys || item.concurrency_key;
                        running := running || r;
                        taken := taken || 0;
                        rate_held := rate_held || held;
                        k := cardinality(keys);
                    END IF;
                ELSE
                    r := running[k];
                    held := rate_held[k];
                END IF;
                IF held OR r + coalesce(taken[k], 0) >= item.concurrency_limit THEN
                    CONTINUE;
                END IF;
                IF k IS NOT NULL THEN
                    taken[k] := taken[k] + 1;
                END IF;
            END IF;
            id := item.id;
            concurrency_key := coalesce(item.concurrency_key, '');
            concurrency_limit := coalesce(item.concurrency_limit, 0);
            key_running := r;
            concurrency_rate := coalesce(item.concurrency_rate, 0);
            concurrency_rate_per := coalesce(item.concurrency_rate_per, '');
            concurrency_burst := coalesce(item.concurrency_burst, 0);
            RETURN NEXT;
            kept := kept + 1;
            IF kept >= n THEN
                RETURN;
            END IF;
        END LOOP;
        IF seen < chunk THEN
            RETURN;
        END IF;
        chunk := least(chunk * 2, 1024);
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION queue_admissible_window(uuid, integer);
