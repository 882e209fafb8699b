package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// FeedChannel is the NOTIFY channel that wakes the event streams' hubs:
// every store wakes it after each transaction it commits, as the feed's
// triggers (feed_from_*) write events in most of them, and after the
// statements that write events on their own (feedWritten).
const FeedChannel = "sluice_feed"

// eventsPage bounds one read of events, by the hub or a replay.
const eventsPage = 500

// replayMax bounds the stored events one subscription replays at once;
// a stream further behind is closed after them and resumes from there.
const replayMax = 5000

// subscriberBuffer is how many events a subscriber may fall behind before
// its stream is closed (it resumes with Last-Event-ID).
const subscriberBuffer = 1024

// FeedHub feeds the event streams of one API process. On every wake-up
// on FeedChannel (and once a second as a fallback) it gives
// committed events their seq (one sequencer at a time in the whole
// deployment, under an advisory lock), reads the new ones once, and hands
// each to the subscribers whose filter it matches: one reader per
// process, whatever the number of streams. While the process has no
// subscriber it does so only on the tick: nobody here waits for the
// events, and under load notifications come tens of times a second, each
// answered by a committed transaction; the first subscriber wakes it.
type FeedHub struct {
	pool     *pgxpool.Pool
	q        *dbsqlc.Queries
	log      *slog.Logger
	listener *Listener

	mu   sync.Mutex
	last int64
	subs map[*subscriber]struct{}
	// subscribed wakes Run when a subscriber arrives.
	subscribed chan struct{}
}

var _ ports.FeedHub = (*FeedHub)(nil)

type subscriber struct {
	filter ports.FeedFilter
	in     chan domain.FeedEvent
	closed bool
}

// NewFeedHub builds a hub; call Run to start it. The events it has sent
// are deleted by maintenance.FeedPurge.
func NewFeedHub(pool *pgxpool.Pool, log *slog.Logger) *FeedHub {
	return &FeedHub{
		pool: pool, q: dbsqlc.New(), log: log,
		listener: NewChannelListener(pool, log, FeedChannel), subs: map[*subscriber]struct{}{},
		subscribed: make(chan struct{}, 1),
	}
}

// Run feeds the subscribers until ctx ends.
func (h *FeedHub) Run(ctx context.Context) {
	go h.listener.Run(ctx)
	if last, err := h.q.FeedLastSeq(ctx, h.pool); err == nil {
		h.mu.Lock()
		h.last = max(h.last, last)
		h.mu.Unlock()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		if err := h.feed(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("feeding event streams failed; trying again", "error", err)
		}
		notified := h.listener.C()
		h.mu.Lock()
		if len(h.subs) == 0 {
			notified = nil // a nil channel is never ready
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-notified:
		case <-h.subscribed:
		case <-tick.C:
		}
	}
	h.mu.Lock()
	for s := range h.subs {
		h.drop(s)
	}
	h.mu.Unlock()
}

// feed sequences what has committed, then hands out what is new.
func (h *FeedHub) feed(ctx context.Context) error {
	if err := h.sequence(ctx); err != nil {
		return err
	}
	for {
		h.mu.Lock()
		after := h.last
		h.mu.Unlock()
		rows, err := h.q.FeedAfter(ctx, h.pool, dbsqlc.FeedAfterParams{AfterSeq: after, MaxRows: eventsPage})
		if err != nil {
			return err
		}
		h.mu.Lock()
		for _, r := range rows {
			e := domain.FeedEvent{Seq: r.Seq, WorkspaceID: r.WorkspaceID, ExecutionID: r.ExecutionID, Kind: r.Kind, Data: r.Data}
			for s := range h.subs {
				if !s.filter.Matches(e) {
					continue
				}
				select {
				case s.in <- e:
				default:
					h.drop(s) // too far behind: it resumes from its last seq
				}
			}
			h.last = e.Seq
		}
		h.mu.Unlock()
		if len(rows) < eventsPage {
			return nil
		}
	}
}

// drop closes and forgets s; h.mu is held.
func (h *FeedHub) drop(s *subscriber) {
	if !s.closed {
		s.closed = true
		close(s.in)
	}
	delete(h.subs, s)
}

// sequence gives committed events their seq, under the sequencers' lock.
func (h *FeedHub) sequence(ctx context.Context) error {
	tx, err := h.pool.BeginTx(ctx, cachedPlans)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := h.q.FeedSequenceLock(ctx, tx); err != nil {
		return err
	}
	for {
		n, err := h.q.FeedSequence(ctx, tx, 5000)
		if err != nil {
			return err
		}
		if n < 5000 {
			break
		}
	}
	return tx.Commit(ctx)
}

// Subscribe replays f's stored events after after, then forwards the live
// ones. The subscription is registered before the replay is read, so an
// event that commits between the two is in one or the other.
func (h *FeedHub) Subscribe(ctx context.Context, f ports.FeedFilter, after int64) (<-chan domain.FeedEvent, error) {
	s := &subscriber{filter: f, in: make(chan domain.FeedEvent, subscriberBuffer)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	upTo := h.last
	h.mu.Unlock()
	select {
	case h.subscribed <- struct{}{}:
	default:
	}
	unsubscribe := func() {
		h.mu.Lock()
		h.drop(s)
		h.mu.Unlock()
	}
	replay, truncated, err := h.replay(ctx, f, after, upTo)
	if err != nil {
		unsubscribe()
		return nil, err
	}
	out := make(chan domain.FeedEvent)
	go func() {
		defer close(out)
		defer unsubscribe()
		sent := after
		send := func(e domain.FeedEvent) bool {
			if e.Seq <= sent {
				return true
			}
			select {
			case out <- e:
				sent = e.Seq
				return true
			case <-ctx.Done():
				return false
			}
		}
		for _, e := range replay {
			if !send(e) {
				return
			}
		}
		if truncated {
			return
		}
		for {
			select {
			case e, ok := <-s.in:
				if !ok || !send(e) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// replay reads f's stored events in (after, upTo], at most replayMax;
// truncated says there are more.
func (h *FeedHub) replay(ctx context.Context, f ports.FeedFilter, after, upTo int64) (out []domain.FeedEvent, truncated bool, err error) {
	for after < upTo {
		if len(out) >= replayMax {
			return out, true, nil
		}
		var rows []dbsqlc.FeedAfterRow
		if f.ExecutionID != nil {
			var rs []dbsqlc.FeedOfExecutionAfterRow
			rs, err = h.q.FeedOfExecutionAfter(ctx, h.pool, dbsqlc.FeedOfExecutionAfterParams{ExecutionID: f.ExecutionID, AfterSeq: after, MaxRows: eventsPage})
			for _, r := range rs {
				rows = append(rows, dbsqlc.FeedAfterRow(r))
			}
		} else {
			var rs []dbsqlc.FeedOfWorkspaceAfterRow
			rs, err = h.q.FeedOfWorkspaceAfter(ctx, h.pool, dbsqlc.FeedOfWorkspaceAfterParams{WorkspaceID: f.WorkspaceID, AfterSeq: after, MaxRows: eventsPage})
			for _, r := range rs {
				rows = append(rows, dbsqlc.FeedAfterRow(r))
			}
		}
		if err != nil {
			return nil, false, interpretError(err)
		}
		for _, r := range rows {
			if r.Seq > upTo {
				return out, false, nil
			}
			out = append(out, domain.FeedEvent{Seq: r.Seq, WorkspaceID: r.WorkspaceID, ExecutionID: r.ExecutionID, Kind: r.Kind, Data: r.Data})
			after = r.Seq
		}
		if len(rows) < eventsPage {
			break
		}
	}
	return out, false, nil
}

var _ ports.FeedStore = (*Store)(nil)

// DeleteFeedEventsBefore deletes at most limit sequenced events written
// before before, oldest first.
func (s *Store) DeleteFeedEventsBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := s.q.FeedDeleteBefore(ctx, s.pool, dbsqlc.FeedDeleteBeforeParams{Before: before, MaxRows: int32(limit)})
	return int(n), interpretError(err)
}

// OldestFeedEvent returns when the oldest stored event was written.
func (s *Store) OldestFeedEvent(ctx context.Context) (time.Time, error) {
	t, err := s.q.FeedOldest(ctx, s.pool)
	return t, interpretError(err)
}
