-- name: FeedSequenceLock :exec
-- One sequencer at a time, for the rest of its transaction; the next
-- statement's snapshot then sees every earlier sequencer's commit.
SELECT pg_advisory_xact_lock(7305001);

-- name: FeedSequence :execrows
-- Gives committed, unsequenced events their seq, in insert order, a batch
-- at a time. Run under FeedSequenceLock.
UPDATE feed_events e SET seq = n.seq
FROM (SELECT x.id, nextval('feed_events_seq') AS seq
      FROM (SELECT u.id FROM feed_events u WHERE u.seq IS NULL ORDER BY u.id LIMIT @max_rows) x) n
WHERE e.id = n.id;

-- name: FeedAfter :many
-- Sequenced events after a seq, in order: the hub's feed.
SELECT seq::bigint AS seq, workspace_id, execution_id, kind, data FROM feed_events
WHERE seq > @after_seq::bigint ORDER BY seq LIMIT @max_rows;

-- name: FeedOfExecutionAfter :many
-- One execution's events after a seq: a stream's replay.
SELECT seq::bigint AS seq, workspace_id, execution_id, kind, data FROM feed_events
WHERE execution_id = @execution_id AND seq > @after_seq::bigint ORDER BY seq LIMIT @max_rows;

-- name: FeedOfWorkspaceAfter :many
-- A workspace's queue and run events after a seq: a stream's replay.
SELECT seq::bigint AS seq, workspace_id, execution_id, kind, data FROM feed_events
WHERE workspace_id = @workspace_id AND seq > @after_seq::bigint AND kind NOT LIKE 'node.%'
ORDER BY seq LIMIT @max_rows;

-- name: FeedLastSeq :one
SELECT coalesce(max(seq), 0)::bigint FROM feed_events WHERE seq IS NOT NULL;

-- name: FeedDeleteBefore :execrows
-- Sequenced events written before @before, oldest first, a batch at a
-- time (the purge's pass repeats it until a batch comes back short).
DELETE FROM feed_events WHERE id IN (
    SELECT d.id FROM feed_events d WHERE d.created_at < @before::timestamptz AND d.seq IS NOT NULL
    ORDER BY d.created_at LIMIT @max_rows);

-- name: FeedOldest :one
-- When the oldest event still stored was written (now() when there is
-- none): one probe of the created_at index, for the oldest-kept gauge.
SELECT coalesce(min(created_at), now())::timestamptz FROM feed_events;
