package app

import (
	"github.com/prometheus/client_golang/prometheus"
)

// DispatchMetrics are the dispatcher's Prometheus series, named as in the
// seeds so existing dashboards keep working.
type DispatchMetrics struct {
	BatchSize      prometheus.Histogram
	Duration       prometheus.Histogram
	Dispatched     prometheus.Counter
	AtCapacity     prometheus.Counter
	Failed         *prometheus.CounterVec
	StaleRecovered prometheus.Counter
	LeaseFailures  prometheus.Counter
	QueueDepth     *prometheus.GaugeVec
	Latency        prometheus.Histogram
	BreakerOpen    prometheus.Gauge
	BreakerTrips   prometheus.Counter
}

// NewDispatchMetrics creates the series and registers them with reg.
func NewDispatchMetrics(reg prometheus.Registerer) *DispatchMetrics {
	m := &DispatchMetrics{
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "queue_processing_batch_size", Help: "Items claimed per dispatch batch.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "queue_processing_duration_seconds", Help: "Time to process one dispatch batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		Dispatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queue_items_dispatched_total", Help: "Queue items whose workflow was started on Temporal.",
		}),
		AtCapacity: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queue_items_at_capacity_total", Help: "Workspaces the claim locked that turned out to have no free slot (full workspaces are filtered out before locking and not counted).",
		}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "queue_items_failed_total", Help: "Queue items failed for good, by reason.",
		}, []string{"reason"}),
		StaleRecovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "queue_stale_recovery_count", Help: "Stale CLAIMED items settled by recovery.",
		}),
		LeaseFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedlock_acquisition_failures", Help: "Lease acquisitions that failed or found the lease held elsewhere.",
		}),
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "queue_depth", Help: "PENDING queue items by workspace plan.",
		}, []string{"plan"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "queue_enqueue_to_dispatch_seconds", Help: "Time from enqueue to DISPATCHED.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		BreakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dispatcher_temporal_breaker_open", Help: "1 while the dispatcher's circuit breaker holds dispatch back because Temporal is unavailable, else 0.",
		}),
		BreakerTrips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dispatcher_temporal_breaker_trips_total", Help: "Times the circuit breaker opened because Temporal was unavailable.",
		}),
	}
	reg.MustRegister(m.BatchSize, m.Duration, m.Dispatched, m.AtCapacity, m.Failed, m.StaleRecovered, m.LeaseFailures, m.QueueDepth, m.Latency,
		m.BreakerOpen, m.BreakerTrips)
	return m
}

func (m *DispatchMetrics) setDepth(depth map[string]int64) {
	m.QueueDepth.Reset()
	for plan, n := range depth {
		m.QueueDepth.WithLabelValues(plan).Set(float64(n))
	}
}
