package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outbound wait reasons, the values of outbound_wait_seconds' reason
// label: what an HTTP node's ask for its host's turn was told to wait for.
const (
	// OutboundWaitRate: the node reserved a later slot of the host's rate.
	OutboundWaitRate = "rate"
	// OutboundWaitPause: the host is paused for the workspace by an
	// upstream's Retry-After.
	OutboundWaitPause = "pause"
)

// Retry-After pause outcomes, the values of
// outbound_retry_after_pauses_total's outcome label.
const (
	// OutboundPauseHost: the host was paused for the workspace's calls.
	OutboundPauseHost = "host_paused"
	// OutboundPauseNodeOnly: the workspace had its bound of hosts paused
	// already (SLUICE_OUTBOUND_PAUSED_HOSTS_MAX), so only the node waited.
	OutboundPauseNodeOnly = "node_only"
)

// OutboundMetrics are the worker's series of HTTP nodes held to their
// workspace's host limits and pauses. They carry no host or workspace
// label: both are tenants' values without a bound, so the series would
// grow with them. A nil *OutboundMetrics observes nothing.
type OutboundMetrics struct {
	waits        *prometheus.HistogramVec
	pauses       *prometheus.CounterVec
	sendRefusals prometheus.Counter
}

// NewOutboundMetrics creates the series, every label value at zero, and
// registers them with reg.
func NewOutboundMetrics(reg prometheus.Registerer) *OutboundMetrics {
	m := &OutboundMetrics{
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "outbound_wait_seconds",
			Help: "Waits of HTTP nodes for their host's turn, by reason (rate: a later slot of the workspace's limit for the host; " +
				"pause: the host is paused by an upstream's Retry-After): each observation is one wait, on a durable timer.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}, []string{"reason"}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_retry_after_pauses_total",
			Help: "Upstream answers (429 or 503) with a Retry-After that paused a host for the workspace (host_paused), " +
				"or only the node when the workspace had its bound of hosts paused (node_only).",
		}, []string{"outcome"}),
		sendRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbound_send_refusals_total",
			Help: "HTTP calls refused just before they went, by the host's rate of calls sent or its pause; the node waits and goes again, spending no attempt.",
		}),
	}
	for _, r := range []string{OutboundWaitRate, OutboundWaitPause} {
		m.waits.WithLabelValues(r)
	}
	for _, o := range []string{OutboundPauseHost, OutboundPauseNodeOnly} {
		m.pauses.WithLabelValues(o)
	}
	reg.MustRegister(m.waits, m.pauses, m.sendRefusals)
	return m
}

// turnWaited observes a turn that told the node to wait: for its
// reserved slot of the rate, or else for the host's pause.
func (m *OutboundMetrics) turnWaited(wait time.Duration, reserved bool) {
	if m == nil || wait <= 0 {
		return
	}
	reason := OutboundWaitPause
	if reserved {
		reason = OutboundWaitRate
	}
	m.waits.WithLabelValues(reason).Observe(wait.Seconds())
}

// paused counts a Retry-After pause, shared by the host or the node's own.
func (m *OutboundMetrics) paused(shared bool) {
	if m == nil {
		return
	}
	outcome := OutboundPauseNodeOnly
	if shared {
		outcome = OutboundPauseHost
	}
	m.pauses.WithLabelValues(outcome).Inc()
}

// sendRefused counts a call refused just before it went.
func (m *OutboundMetrics) sendRefused() {
	if m == nil {
		return
	}
	m.sendRefusals.Inc()
}
