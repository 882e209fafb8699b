package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/ports"
)

// QueueChannel is the NOTIFY channel for enqueues and freed slots.
const QueueChannel = "sluice_queue"

// Listener turns NOTIFYs on QueueChannel into wake-ups. It holds one
// connection in LISTEN, taken out of the pool (hijacked, as River's
// notifier does) so that it holds none of the pool's connections for as
// long as it listens: with pgx's default of four, a process's two
// listeners left the dispatcher's claims, its markings and the worker's
// local activities two connections to share, and under a flood most of
// their statements waited for one (docs/benchmarks.md#the-slo-under-a-flood).
// It reconnects after errors; while it is down the dispatcher's polling
// covers.
type Listener struct {
	pool    *pgxpool.Pool
	channel string
	log     *slog.Logger
	c       chan struct{}
}

var _ ports.Wakeups = (*Listener)(nil)

// NewListener builds a listener on QueueChannel; call Run to start it.
func NewListener(pool *pgxpool.Pool, log *slog.Logger) *Listener {
	return NewChannelListener(pool, log, QueueChannel)
}

// NewChannelListener builds a listener on another channel, such as
// WebhookChannel.
func NewChannelListener(pool *pgxpool.Pool, log *slog.Logger, channel string) *Listener {
	return &Listener{pool: pool, channel: channel, log: log, c: make(chan struct{}, 1)}
}

// C delivers coalesced wake-ups.
func (l *Listener) C() <-chan struct{} { return l.c }

func (l *Listener) signal() {
	select {
	case l.c <- struct{}{}:
	default:
	}
}

// Run listens until ctx ends.
func (l *Listener) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := l.listen(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("listener lost its connection; polling covers until it is back", "channel", l.channel, "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (l *Listener) listen(ctx context.Context) error {
	pooled, err := l.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is the listener's from here on, and is closed, never
	// returned, when it stops listening.
	conn := pooled.Hijack()
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closing)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+l.channel); err != nil {
		return err
	}
	// Work may have arrived while we were not listening.
	l.signal()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		l.signal()
	}
}
