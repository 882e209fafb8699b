package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
)

// QueueCollector reports the queue's depth and the RUNNING executions as
// gauges, read from the per-workspace counts the triggers keep, so a
// scrape sees current figures whichever process serves it, at the cost of
// one aggregate over workspace_queue_stats; and per plan the age of the
// oldest item that could be claimed now, at the cost of the claim's
// prefilter and one index probe per workspace with room. /metrics is unauthenticated
// on the API port, so the figures are read at most once per
// queueStatsFresh however often it is scraped.
type QueueCollector struct {
	pool      *pgxpool.Pool
	q         *dbsqlc.Queries
	log       *slog.Logger
	workspace bool
	plans     []string
	depth     *prometheus.Desc
	running   *prometheus.Desc
	oldest    *prometheus.Desc

	// mu is held while the figures are read, so concurrent scrapes share
	// one read.
	mu     sync.Mutex
	readAt time.Time
	last   []prometheus.Metric
}

// queueStatsFresh is how long the queue gauges' figures are served again.
const queueStatsFresh = 5 * time.Second

var _ prometheus.Collector = (*QueueCollector)(nil)

// NewQueueCollector reads the counts through pool; the limits that tell a
// workspace with room from one at capacity are read with them, as stored.
// byWorkspace adds a workspace label to the counts (one series
// per workspace with work: opt in only where the tenant count is small).
func NewQueueCollector(pool *pgxpool.Pool, log *slog.Logger, byWorkspace bool) *QueueCollector {
	labels := []string{"plan"}
	if byWorkspace {
		labels = append(labels, "workspace")
	}
	c := &QueueCollector{
		pool: pool, q: dbsqlc.New(), log: log, workspace: byWorkspace,
		depth:   prometheus.NewDesc("queue_depth", "PENDING queue items, by workspace plan.", labels, nil),
		running: prometheus.NewDesc("executions_running", "RUNNING executions (slots in use), by workspace plan.", labels, nil),
		oldest: prometheus.NewDesc("queue_oldest_admissible_age_seconds",
			"Age of the oldest PENDING item that could be claimed now (due, in a workspace with a free slot), by plan; 0 when there is none.", []string{"plan"}, nil),
	}
	for _, plan := range domain.Plans() {
		c.plans = append(c.plans, string(plan))
	}
	return c
}

// Describe sends the gauges' descriptions.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.running
	ch <- c.oldest
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
	metrics, err := c.readOldest(ctx)
	if err != nil {
		return nil, err
	}
	if c.workspace {
		rows, werr := c.q.QueueStatsByWorkspace(ctx, c.pool)
		if werr != nil {
			return nil, werr
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

// readOldest reads every plan's oldest admissible age.
func (c *QueueCollector) readOldest(ctx context.Context) ([]prometheus.Metric, error) {
	rows, err := c.q.QueueOldestAdmissibleByPlan(ctx, c.pool)
	if err != nil {
		return nil, err
	}
	age := make(map[string]float64, len(c.plans))
	for _, r := range rows {
		age[r.Plan] = r.AgeSeconds
	}
	metrics := make([]prometheus.Metric, 0, len(c.plans))
	for _, plan := range c.plans {
		metrics = append(metrics, prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age[plan], plan))
	}
	return metrics, nil
}
