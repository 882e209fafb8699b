package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
)

// QueueCollector reports the queue's depth and the RUNNING executions as
// gauges, read at scrape time from the per-workspace counts the triggers
// keep, so every scrape sees current figures whichever process serves it,
// at the cost of one aggregate over workspace_queue_stats.
type QueueCollector struct {
	pool      *pgxpool.Pool
	q         *dbsqlc.Queries
	log       *slog.Logger
	workspace bool
	depth     *prometheus.Desc
	running   *prometheus.Desc
}

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

// Collect reads the counts. A failed read is logged and reports nothing,
// rather than failing the whole scrape.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.workspace {
		rows, err := c.q.QueueStatsByWorkspace(ctx, c.pool)
		if err != nil {
			c.log.Warn("reading queue counts for metrics failed", "error", err)
			return
		}
		for _, r := range rows {
			ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(r.Pending), r.Plan, r.WorkspaceID.String())
			ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(r.Running), r.Plan, r.WorkspaceID.String())
		}
		return
	}
	rows, err := c.q.QueueStatsByPlan(ctx, c.pool)
	if err != nil {
		c.log.Warn("reading queue counts for metrics failed", "error", err)
		return
	}
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(r.Pending), r.Plan)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(r.Running), r.Plan)
	}
}
