package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
)

// QueueCollector reports the queue's depth and the RUNNING executions as
// gauges, read from the per-workspace counts the triggers keep, so a
// scrape sees current figures whichever process serves it, at the cost of
// one aggregate over workspace_queue_stats. /metrics is unauthenticated
// on the API port, so the figures are read at most once per
// queueStatsFresh however often it is scraped.
type QueueCollector struct {
	pool      *pgxpool.Pool
	q         *dbsqlc.Queries
	log       *slog.Logger
	workspace bool
	depth     *prometheus.Desc
	running   *prometheus.Desc

	// mu is held while the figures are read, so concurrent scrapes share
	// one read.
	mu     sync.Mutex
	readAt time.Time
	last   []prometheus.Metric
}

// queueStatsFresh is how long the queue gauges' figures are served again.
const queueStatsFresh = 5 * time.Second

var _ prometheus.Collector = (*QueueCollector)(nil)

// NewQueueCollector reads the counts through pool. byWorkspace adds a
// workspace label (one series per workspace with work: opt in only where
// the tenant count is small).
func NewQueueCollector(pool *pgxpool.Pool, log *slog.Logger, byWorkspace bool) *QueueCollector {
	labels := []string{"plan"}
	if byWorkspace {
		labels = append(labels, "workspace")
	}
	return &QueueCollector{
		pool: pool, q: dbsqlc.New(), log: log, workspace: byWorkspace,
		depth:   prometheus.NewDesc("queue_depth", "PENDING queue items, by workspace plan.", labels, nil),
		running: prometheus.NewDesc("executions_running", "RUNNING executions (slots in use), by workspace plan.", labels, nil),
	}
}

// Describe sends the gauges' descriptions.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.running
}

// Collect sends the counts, read again when the last read is older than
// queueStatsFresh. A failed read is logged and reports nothing, rather
// than failing the whole scrape.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || time.Since(c.readAt) >= queueStatsFresh {
		metrics, err := c.read()
		if err != nil {
			c.log.Warn("reading queue counts for metrics failed", "error", err)
			return
		}
		c.readAt, c.last = time.Now(), metrics
	}
	for _, m := range c.last {
		ch <- m
	}
}

func (c *QueueCollector) read() ([]prometheus.Metric, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	metrics := []prometheus.Metric{}
	if c.workspace {
		rows, err := c.q.QueueStatsByWorkspace(ctx, c.pool)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			metrics = append(metrics,
				prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(r.Pending), r.Plan, r.WorkspaceID.String()),
				prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(r.Running), r.Plan, r.WorkspaceID.String()))
		}
		return metrics, nil
	}
	rows, err := c.q.QueueStatsByPlan(ctx, c.pool)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		metrics = append(metrics,
			prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(r.Pending), r.Plan),
			prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(r.Running), r.Plan))
	}
	return metrics, nil
}
