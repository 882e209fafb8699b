package engine

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Node outcomes, the values of the outcome label: how one run of a node's
// executor ended. A retryable error may be followed by another attempt.
const (
	NodeOutcomeCompleted = "completed"
	NodeOutcomeFailed    = "failed"
	NodeOutcomeRetryable = "retryable_error"
	NodeOutcomeCancelled = "cancelled"
)

// NodeMetrics are the worker's per-node series, labelled by node type and
// outcome: both small fixed sets.
type NodeMetrics struct {
	Duration *prometheus.HistogramVec
}

// NewNodeMetrics creates the series and registers them with reg.
func NewNodeMetrics(reg prometheus.Registerer) *NodeMetrics {
	m := &NodeMetrics{
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "node_duration_seconds",
			Help:    "Time one attempt of a node took in its executor on this worker, by node type and outcome (completed, failed, retryable_error, cancelled).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"type", "outcome"}),
	}
	reg.MustRegister(m.Duration)
	return m
}
