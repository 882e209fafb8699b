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

// EventChannel is the NOTIFY channel the events triggers write to.
const EventChannel = "sluice_events"

// eventsPage bounds one read of events, by the hub or a replay.
const eventsPage = 500

// replayMax bounds the stored events one subscription replays at once;
// a stream further behind is closed after them and resumes from there.
const replayMax = 5000

// subscriberBuffer is how many events a subscriber may fall behind before
// its stream is closed (it resumes with Last-Event-ID).
const subscriberBuffer = 1024

// EventHub feeds the event streams of one API process. On every NOTIFY
// from the events triggers (and once a second as a fallback) it gives
// committed events their seq (one sequencer at a time in the whole
// deployment, under an advisory lock), reads the new ones once, and hands
// each to the subscribers whose filter it matches: one reader per
// process, whatever the number of streams.
type EventHub struct {
	pool      *pgxpool.Pool
	q         *dbsqlc.Queries
	log       *slog.Logger
	listener  *Listener
	retention time.Duration

	mu   sync.Mutex
	last int64
	subs map[*subscriber]struct{}
}

var _ ports.EventHub = (*EventHub)(nil)

type subscriber struct {
	filter ports.EventFilter
	in     chan domain.Event
	closed bool
}

// NewEventHub builds a hub; call Run to start it. Events older than
// retention are deleted.
func NewEventHub(pool *pgxpool.Pool, log *slog.Logger, retention time.Duration) *EventHub {
	return &EventHub{
		pool: pool, q: dbsqlc.New(), log: log, retention: retention,
		listener: NewChannelListener(pool, log, EventChannel), subs: map[*subscriber]struct{}{},
	}
}

// Run feeds the subscribers until ctx ends.
func (h *EventHub) Run(ctx context.Context) {
	go h.listener.Run(ctx)
	if last, err := h.q.EventsLastSeq(ctx, h.pool); err == nil {
		h.mu.Lock()
		h.last = max(h.last, last)
		h.mu.Unlock()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	purged := time.Now()
	for ctx.Err() == nil {
		if err := h.feed(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("feeding event streams failed; trying again", "error", err)
		}
		if time.Since(purged) > time.Minute {
			purged = time.Now()
			if _, err := h.q.EventsDeleteBefore(ctx, h.pool, dbsqlc.EventsDeleteBeforeParams{Before: time.Now().Add(-h.retention), MaxRows: 10_000}); err != nil && ctx.Err() == nil {
				h.log.Warn("deleting old events failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-h.listener.C():
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
func (h *EventHub) feed(ctx context.Context) error {
	if err := h.sequence(ctx); err != nil {
		return err
	}
	for {
		h.mu.Lock()
		after := h.last
		h.mu.Unlock()
		rows, err := h.q.EventsAfter(ctx, h.pool, dbsqlc.EventsAfterParams{AfterSeq: after, MaxRows: eventsPage})
		if err != nil {
			return err
		}
		h.mu.Lock()
		for _, r := range rows {
			e := domain.Event{Seq: r.Seq, WorkspaceID: r.WorkspaceID, ExecutionID: r.ExecutionID, Kind: r.Kind, Data: r.Data}
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
func (h *EventHub) drop(s *subscriber) {
	if !s.closed {
		s.closed = true
		close(s.in)
	}
	delete(h.subs, s)
}

// sequence gives committed events their seq, under the sequencers' lock.
func (h *EventHub) sequence(ctx context.Context) error {
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := h.q.EventsSequenceLock(ctx, tx); err != nil {
		return err
	}
	for {
		n, err := h.q.EventsSequence(ctx, tx, 5000)
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
func (h *EventHub) Subscribe(ctx context.Context, f ports.EventFilter, after int64) (<-chan domain.Event, error) {
	s := &subscriber{filter: f, in: make(chan domain.Event, subscriberBuffer)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	upTo := h.last
	h.mu.Unlock()
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
	out := make(chan domain.Event)
	go func() {
		defer close(out)
		defer unsubscribe()
		sent := after
		send := func(e domain.Event) bool {
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
func (h *EventHub) replay(ctx context.Context, f ports.EventFilter, after, upTo int64) (out []domain.Event, truncated bool, err error) {
	for after < upTo {
		if len(out) >= replayMax {
			return out, true, nil
		}
		var rows []dbsqlc.EventsAfterRow
		if f.ExecutionID != nil {
			var rs []dbsqlc.EventsOfExecutionAfterRow
			rs, err = h.q.EventsOfExecutionAfter(ctx, h.pool, dbsqlc.EventsOfExecutionAfterParams{ExecutionID: f.ExecutionID, AfterSeq: after, MaxRows: eventsPage})
			for _, r := range rs {
				rows = append(rows, dbsqlc.EventsAfterRow(r))
			}
		} else {
			var rs []dbsqlc.EventsOfWorkspaceAfterRow
			rs, err = h.q.EventsOfWorkspaceAfter(ctx, h.pool, dbsqlc.EventsOfWorkspaceAfterParams{WorkspaceID: f.WorkspaceID, AfterSeq: after, MaxRows: eventsPage})
			for _, r := range rs {
				rows = append(rows, dbsqlc.EventsAfterRow(r))
			}
		}
		if err != nil {
			return nil, false, interpretError(err)
		}
		for _, r := range rows {
			if r.Seq > upTo {
				return out, false, nil
			}
			out = append(out, domain.Event{Seq: r.Seq, WorkspaceID: r.WorkspaceID, ExecutionID: r.ExecutionID, Kind: r.Kind, Data: r.Data})
			after = r.Seq
		}
		if len(rows) < eventsPage {
			break
		}
	}
	return out, false, nil
}
