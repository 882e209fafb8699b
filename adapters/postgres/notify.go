package postgres

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
)

// NotifyGap is the least time between two NOTIFY transactions one store
// sends: the wake-ups of every commit within it are one.
const NotifyGap = 5 * time.Millisecond

// notifyTimeout bounds one NOTIFY transaction; a wake-up not sent by then
// is left to the listeners' polls.
const notifyTimeout = 5 * time.Second

// notifier sends the wake-ups a store's commits owe the listeners
// (Listener, FeedHub): after the commit, outside the writing transaction,
// and coalesced. In Postgres a transaction that ran NOTIFY takes one lock
// for the whole database at commit and holds it through its commit's WAL
// flush, so when the writes themselves notified, every notifying commit
// waited for the one before it. Here the writes never take that lock;
// this store's one NOTIFY transaction does, at most once per gap, names
// every channel woken since the last, and commits without waiting for its
// flush (a lost wake-up is a late one, not a lost write).
//
// The first wake-up after a quiet gap is sent at once; those that follow
// within the gap are sent together at its end, so the last commit is
// always followed by a NOTIFY sent after it. If the process dies between
// a commit and its NOTIFY, or the NOTIFY fails, nothing is lost: what the
// commit wrote is in the tables, and the listeners' polls find it.
type notifier struct {
	send func(ctx context.Context, channels []string) error
	gap  time.Duration
	log  *slog.Logger

	mu      sync.Mutex
	pending map[string]struct{}
	// busy is true from the moment a send is scheduled until the send
	// that finds nothing pending after it returns.
	busy bool
	last time.Time // when the last send began
}

func newNotifier(pool *pgxpool.Pool, log *slog.Logger) *notifier {
	return &notifier{send: notifyOn(pool), gap: NotifyGap, log: log, pending: map[string]struct{}{}}
}

// notifyOn sends one NOTIFY per channel in one transaction that does not
// wait for its commit's flush. The channels are this package's constants.
func notifyOn(pool *pgxpool.Pool) func(ctx context.Context, channels []string) error {
	return func(ctx context.Context, channels []string) error {
		calls := make([]string, len(channels))
		for i, c := range channels {
			calls[i] = "pg_notify('" + c + "', '')"
		}
		_, err := pool.Exec(ctx, "BEGIN; SET LOCAL synchronous_commit = off; SELECT "+strings.Join(calls, ", ")+"; COMMIT")
		return err
	}
}

// wake asks for a NOTIFY on each channel, sent after every commit that
// returned before the call.
func (n *notifier) wake(channels ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range channels {
		n.pending[c] = struct{}{}
	}
	if n.busy || len(n.pending) == 0 {
		return
	}
	n.busy = true
	time.AfterFunc(n.gap-time.Since(n.last), n.flush)
}

// flush sends what is pending, then schedules the next send if more came
// meanwhile.
func (n *notifier) flush() {
	n.mu.Lock()
	channels := slices.Sorted(maps.Keys(n.pending))
	clear(n.pending)
	n.last = time.Now()
	n.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	err := n.send(ctx, channels)
	cancel()
	if err != nil && !errors.Is(err, puddle.ErrClosedPool) { // closed: the process is stopping
		n.log.Warn("a wake-up was not sent; the listeners' polls find the work", "channels", channels, "error", err)
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) == 0 {
		n.busy = false
		return
	}
	time.AfterFunc(n.gap-time.Since(n.last), n.flush)
}
