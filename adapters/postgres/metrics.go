package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
)

// QueueCollector reports the queue's depth and the RUNNING executions as
// gauges, read at scrape time from the per-workspace counts the triggers
// keep, so every scrape sees current figures whichever process serves it,
// at the cost of one aggregate over workspace_queue_stats; and per plan the
// age of the oldest item that could be claimed now, at the cost of the
// claim's prefilter and one index probe per workspace with room.
type QueueCollector struct {
	pool      *pgxpool.Pool
	q         *dbsqlc.Queries
	log       *slog.Logger
	workspace bool
	plans     []string
	limits    []int32
	depth     *prometheus.Desc
	running   *prometheus.Desc
	oldest    *prometheus.Desc
}

var _ prometheus.Collector = (*QueueCollector)(nil)

// NewQueueCollector reads the counts through pool; limits are the plans'
// concurrency limits, which tell a workspace with room from one at
// capacity. byWorkspace adds a workspace label to the counts (one series
// per workspace with work: opt in only where the tenant count is small).
func NewQueueCollector(pool *pgxpool.Pool, log *slog.Logger, limits map[domain.Plan]int, byWorkspace bool) *QueueCollector {
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
	for plan, n := range limits {
		c.plans, c.limits = append(c.plans, string(plan)), append(c.limits, int32(n))
	}
	return c
}

// Describe sends the gauges' descriptions.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.running
	ch <- c.oldest
}

// Collect reads the counts and ages. A failed read is logged and reports
// nothing, rather than failing the whole scrape.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.collectOldest(ctx, ch)
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

// collectOldest reports every configured plan's oldest admissible age.
func (c *QueueCollector) collectOldest(ctx context.Context, ch chan<- prometheus.Metric) {
	rows, err := c.q.QueueOldestAdmissibleByPlan(ctx, c.pool, dbsqlc.QueueOldestAdmissibleByPlanParams{Plans: c.plans, Limits: c.limits})
	if err != nil {
		c.log.Warn("reading the oldest admissible items for metrics failed", "error", err)
		return
	}
	age := make(map[string]float64, len(c.plans))
	for _, r := range rows {
		age[r.Plan] = r.AgeSeconds
	}
	for _, plan := range c.plans {
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age[plan], plan)
	}
}
