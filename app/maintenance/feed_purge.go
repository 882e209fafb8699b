package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/ports"
)

// FeedPurgeLeaseName is the feed purge's lease, so one api process purges
// however many there are.
const FeedPurgeLeaseName = "purgeFeedEvents"

// feedEventsKind is the feed's label on the retention series.
const feedEventsKind = "feed_events"

// FeedPurgeConfig is how long the live-event feed keeps events for
// Last-Event-ID resumption and how its purge deletes them.
type FeedPurgeConfig struct {
	// Retention is how long an event is kept after it was written.
	Retention time.Duration
	// Pass is a run's batches and the time it may spend on them.
	Pass PurgePass
	// Now is the clock cutoffs are taken from.
	Now func() time.Time
}

// FeedPurge deletes the feed's events past their retention. Every node,
// run and queue change writes one, a thousand and more a second under
// load, so each run deletes in batches until none past the retention is
// left (FeedPurgeConfig.Pass), and the oldest kept stays within the
// retention and one run's interval.
type FeedPurge struct {
	store   ports.FeedStore
	cfg     FeedPurgeConfig
	metrics *RetentionMetrics
	log     *slog.Logger
	loop    maintenance
}

// NewFeedPurge builds the feed's purge; it counts on retention's series
// under the kind feed_events.
func NewFeedPurge(store ports.FeedStore, lease ports.Lease, schedule JobSchedule, cfg FeedPurgeConfig,
	metrics *RetentionMetrics, leaseMetrics *dispatch.LeaseMetrics, log *slog.Logger) *FeedPurge {
	p := &FeedPurge{store: store, cfg: cfg, metrics: metrics, log: log}
	p.loop = maintenance{name: FeedPurgeLeaseName, lease: lease, schedule: schedule, metrics: leaseMetrics, log: log, job: p.run}
	return p
}

// Run purges on the schedule until ctx ends.
func (p *FeedPurge) Run(ctx context.Context) { p.loop.run(ctx) }

func (p *FeedPurge) run(ctx context.Context) {
	before := p.cfg.Now().Add(-p.cfg.Retention)
	caughtUp, err := p.cfg.Pass.run(ctx, p.cfg.Now, []purgeStep{func(ctx context.Context, limit int) (int, error) {
		n, err := p.store.DeleteFeedEventsBefore(ctx, before, limit)
		p.metrics.Deleted.WithLabelValues(feedEventsKind).Add(float64(n))
		return n, err
	}})
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("deleting old feed events failed", "error", err)
		}
		return
	}
	if !caughtUp {
		p.log.Warn("the feed purge left events past their retention for the next run: its pass's time was spent", "budget", p.cfg.Pass.Budget)
	}
	oldest, err := p.store.OldestFeedEvent(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("reading the oldest feed event failed", "error", err)
		}
		return
	}
	p.metrics.OldestKeptAge.WithLabelValues(feedEventsKind).Set(max(0, p.cfg.Now().Sub(oldest).Seconds()))
}
