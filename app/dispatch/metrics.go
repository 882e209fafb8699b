package dispatch

import (
	"context"
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Metrics are the dispatcher's Prometheus series. The queue_*
// names are stable: dashboards and alerts are written against them. Labels are
// bounded: plan and reason take a handful of values; a workspace label is
// added only when WorkspaceLabel is set (SLUICE_METRICS_WORKSPACE_LABEL),
// as it grows with the tenants.
type Metrics struct {
	// Cycles counts the claim loop's finished cycles, idle ones included,
	// so an idle dispatcher (counting up) and a stuck one (flat) differ.
	Cycles         prometheus.Counter
	BatchSize      prometheus.Histogram
	Duration       prometheus.Histogram
	Dispatched     prometheus.Counter
	AtCapacity     prometheus.Counter
	Failed         *prometheus.CounterVec
	StaleRecovered prometheus.Counter
	// StaleUnansweredClaims counts the stale claims stale recovery went
	// past, left CLAIMED, unansweredRunsToReport runs in a row because
	// Temporal did not answer about their workflow while it answered
	// otherwise: each such streak once.
	StaleUnansweredClaims prometheus.Counter
	// StaleUnansweredClaimsNow is how many of them are in a reported
	// streak at the end of stale recovery's last run: what the alert
	// reads, so that it lasts as long as Temporal leaves one unanswered
	// and clears once it answers (or the claim ends).
	StaleUnansweredClaimsNow prometheus.Gauge
	// TermClaimsSettled counts the claims of ended lease terms settled by
	// a later holder (settleEndedTerms).
	TermClaimsSettled prometheus.Counter
	Latency           prometheus.Histogram
	// AdmissionWait observes, by plan, each started item's admission wait:
	// from the moment it was admissible (the latest of its enqueue, its
	// notBefore or back-off, and the last moment its workspace's own
	// running limit stopped holding it) to its start being recorded. The
	// latency SLO is written on it (docs/admission.md#admission-wait).
	AdmissionWait *prometheus.HistogramVec
	// DispatchFailures counts failed Temporal starts by reason and by what
	// became of the item: released for a retry, failed for good, or held
	// CLAIMED with no failure counted because Temporal was unavailable.
	DispatchFailures *prometheus.CounterVec
	// FailuresPerItem observes, when an item settles (dispatched or failed
	// for good), how many failed starts it took.
	FailuresPerItem prometheus.Histogram
	// AdmissionRefusals counts, per batch and plan, the workspaces with
	// pending work that had no free slot: those the prefilter skipped by
	// their counts and those found full once locked.
	AdmissionRefusals *prometheus.CounterVec
	// PassedOver counts, by reason, the workspaces with pending work a
	// claim gave no start: workspace_limit (no free slot), start_rate (its
	// start rate allowed none yet), not_before (room, but every item due
	// later: a notBefore or a back-off) or key_limit (room, but every due
	// item held by its key's limit or rate). No workspace or key label.
	PassedOver *prometheus.CounterVec
	// BreakerOpen is 1 while the circuit breaker holds dispatch back
	// because Temporal is unavailable.
	BreakerOpen prometheus.Gauge
	// BreakerTrips counts the times the breaker opened.
	BreakerTrips prometheus.Counter
	// StartLimit is the adaptive limit of the Temporal starts in flight
	// (domain.StartLimit), between SLUICE_DISPATCH_START_CONCURRENCY and
	// SLUICE_DISPATCH_START_CONCURRENCY_MAX.
	StartLimit prometheus.Gauge

	workspaceLabel bool
}

// Dispatch failure reasons, the values of the reason label: Temporal did
// not answer in time, could not be reached, or refused the start itself;
// and, for queue_items_failed_total, the item's workspace or definition is
// gone, or its last allowed start failed.
const (
	ReasonStartTimeout        = "start_timeout"
	ReasonTemporalUnavailable = "temporal_unavailable"
	ReasonStartError          = "start_error"
	ReasonMissingReference    = "missing_workspace_or_definition"
	ReasonAttemptsExhausted   = "dispatch_attempts_exhausted"
)

// Dispatch failure outcomes, the values of the outcome label: the item
// went back to PENDING for a retry, failed for good, or is held CLAIMED,
// with no failure counted against it, until Temporal says whether it
// started.
const (
	OutcomeReleased = "released"
	OutcomeFailed   = "failed"
	OutcomeHeld     = "held"
)

// MetricsOption adjusts the series before they are created.
type MetricsOption func(*Metrics)

// WithWorkspaceLabel adds a workspace label to queue_dispatch_failures_total.
// Its cardinality grows with the tenants, so it is for operators who opt in.
func WithWorkspaceLabel() MetricsOption {
	return func(m *Metrics) { m.workspaceLabel = true }
}

// NewMetrics creates the series and registers them with reg.
func NewMetrics(reg prometheus.Registerer, opts ...MetricsOption) *Metrics {
	m := &Metrics{}
	for _, o := range opts {
		o(m)
	}
	failureLabels := []string{"reason", "outcome"}
	if m.workspaceLabel {
		failureLabels = append(failureLabels, "workspace")
	}
	m.Cycles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "queue_dispatch_cycles_total", Help: "Finished cycles of the dispatcher's claim loop, idle ones included.",
	})
	m.BatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "queue_processing_batch_size", Help: "Items claimed per dispatch batch.",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
	})
	m.Duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "queue_processing_duration_seconds", Help: "Time to process one dispatch batch.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	m.Dispatched = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "queue_items_dispatched_total", Help: "Queue items whose workflow was started on Temporal.",
	})
	m.AtCapacity = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "queue_items_at_capacity_total", Help: "Workspaces the claim locked that turned out to have no free slot (full workspaces are filtered out before locking; queue_admission_refusals_total counts those too).",
	})
	m.Failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_items_failed_total", Help: "Queue items failed for good, by reason.",
	}, []string{"reason"})
	m.StaleRecovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "queue_stale_recovery_count", Help: "Stale CLAIMED items settled by recovery.",
	})
	m.StaleUnansweredClaims = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "queue_stale_recovery_unanswered_claims_total",
		Help: "Stale CLAIMED items stale recovery went past, left CLAIMED, three runs in a row because Temporal did not answer about their workflow while it answered otherwise; each streak counted once.",
	})
	m.StaleUnansweredClaimsNow = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "queue_stale_recovery_unanswered_claims",
		Help: "Stale CLAIMED items in a reported streak (three runs or more in a row gone past unanswered) at the end of stale recovery's last run.",
	})
	m.TermClaimsSettled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "queue_term_claims_settled_total", Help: "CLAIMED items of an ended lease term settled by a later holder.",
	})
	m.Latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "queue_enqueue_to_dispatch_seconds", Help: "Time from enqueue to DISPATCHED.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	})
	m.AdmissionWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "queue_admission_wait_seconds",
		Help:    "Time a started item waited while admissible, by plan: from the latest of its enqueue, its notBefore and the last moment its workspace's own running limit stopped holding it, to its start being recorded.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"plan"})
	m.DispatchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_dispatch_failures_total",
		Help: "Failed Temporal starts of queue items, by reason (start_timeout, temporal_unavailable, start_error), and by outcome: released for a retry, failed for good, or held claimed while Temporal is unavailable.",
	}, failureLabels)
	m.FailuresPerItem = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "queue_item_dispatch_failures",
		Help:    "Failed Temporal starts an item had when it settled (dispatched or failed for good).",
		Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21},
	})
	m.AdmissionRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_admission_refusals_total",
		Help: "Workspaces with pending work passed over by a dispatch batch for want of a free slot, by plan, whether the prefilter skipped them by their counts or admission found them full under the lock.",
	}, []string{"plan"})
	m.PassedOver = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "queue_admission_passed_over_total",
		Help: "Workspaces with pending work a dispatch batch gave no start, by what held them: workspace_limit (no free slot), start_rate (the workspace's start rate allowed none yet), not_before (every item due later) or key_limit (every due item held by its key's limit or rate).",
	}, []string{"reason"})
	m.BreakerOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dispatcher_temporal_breaker_open", Help: "1 while the dispatcher's circuit breaker holds dispatch back because Temporal is unavailable, else 0.",
	})
	m.BreakerTrips = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dispatcher_temporal_breaker_trips_total", Help: "Times the circuit breaker opened because Temporal was unavailable.",
	})
	m.StartLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dispatcher_start_limit", Help: "The adaptive limit of the dispatcher's Temporal starts in flight: it rises while starts are answered as fast as ever and falls when they slow down, time out or find Temporal unavailable.",
	})
	// Every bounded label value starts at zero, so the series exist (and
	// rate() over them reads 0) before the first event.
	if !m.workspaceLabel {
		for _, reason := range []string{ReasonStartTimeout, ReasonTemporalUnavailable, ReasonStartError} {
			for _, outcome := range []string{OutcomeReleased, OutcomeFailed, OutcomeHeld} {
				m.DispatchFailures.WithLabelValues(reason, outcome)
			}
		}
	}
	for _, reason := range []string{ReasonAttemptsExhausted, ReasonMissingReference} {
		m.Failed.WithLabelValues(reason)
	}
	for _, plan := range domain.Plans() {
		m.AdmissionRefusals.WithLabelValues(string(plan))
		m.AdmissionWait.WithLabelValues(string(plan))
	}
	for _, reason := range []domain.WaitReason{domain.WaitWorkspaceLimit, domain.WaitStartRate} {
		m.PassedOver.WithLabelValues(passedOverLabel(reason))
	}
	reg.MustRegister(m.Cycles, m.BatchSize, m.Duration, m.Dispatched, m.AtCapacity, m.Failed, m.StaleRecovered, m.StaleUnansweredClaims, m.StaleUnansweredClaimsNow, m.TermClaimsSettled,
		m.Latency, m.AdmissionWait, m.DispatchFailures, m.FailuresPerItem, m.AdmissionRefusals, m.PassedOver, m.BreakerOpen, m.BreakerTrips, m.StartLimit)
	return m
}

// started observes a started item's enqueue-to-dispatch latency and, when
// one was stored, its admission wait under its plan. An item whose
// workspace is gone has no plan and is left out of the per-plan series.
func (m *Metrics) started(r ports.DispatchedRecord) {
	m.Latency.Observe(r.DispatchedAt.Sub(r.CreatedAt).Seconds())
	if r.AdmissionWait != nil && r.Plan != "" {
		m.waited(ports.AdmissionWait{Plan: r.Plan, Wait: *r.AdmissionWait})
	}
}

// waited observes one admission wait under its plan.
func (m *Metrics) waited(w ports.AdmissionWait) {
	m.AdmissionWait.WithLabelValues(string(w.Plan)).Observe(w.Wait.Seconds())
}

// dispatchFailed counts one failed start of an item of workspace ws.
func (m *Metrics) dispatchFailed(reason, outcome string, ws string) {
	labels := []string{reason, outcome}
	if m.workspaceLabel {
		labels = append(labels, ws)
	}
	m.DispatchFailures.WithLabelValues(labels...).Inc()
}

// refused counts the workspaces passed over in one batch, by plan.
func (m *Metrics) refused(byPlan map[domain.Plan]int) {
	for plan, n := range byPlan {
		m.AdmissionRefusals.WithLabelValues(string(plan)).Add(float64(n))
	}
}

// passedOver counts the workspaces passed over in one batch, by reason.
func (m *Metrics) passedOver(byReason map[domain.WaitReason]int) {
	for reason, n := range byReason {
		m.PassedOver.WithLabelValues(passedOverLabel(reason)).Add(float64(n))
	}
}

// passedOverLabel is a wait reason as a label value: WORKSPACE_LIMIT
// reads workspace_limit. The reasons are a closed set, so the label is
// bounded.
func passedOverLabel(r domain.WaitReason) string {
	return strings.ToLower(string(r))
}

// LeaseMetrics are the series of the ShedLock leases every lease holder
// shares: the queue lease's heartbeat and the maintenance jobs' leases, in
// whichever roles run them. One process registers them once.
type LeaseMetrics struct {
	// Failures counts lease attempts that failed or found the lease held
	// elsewhere; a standby counts up steadily.
	Failures prometheus.Counter
	// Held is 1 while this process holds the named lease.
	Held *prometheus.GaugeVec
}

// NewLeaseMetrics creates the series and registers them with reg.
func NewLeaseMetrics(reg prometheus.Registerer) *LeaseMetrics {
	m := &LeaseMetrics{
		Failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shedlock_acquisition_failures", Help: "Lease acquisitions that failed or found the lease held elsewhere.",
		}),
		Held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dispatcher_lease_held", Help: "1 while this process holds the named lease, else 0.",
		}, []string{"lease"}),
	}
	reg.MustRegister(m.Failures, m.Held)
	return m
}

// setHeld records whether this process holds lease.
func (m *LeaseMetrics) setHeld(lease string, held bool) {
	v := 0.0
	if held {
		v = 1
	}
	m.Held.WithLabelValues(lease).Set(v)
}

// startFailureReason names why a Temporal start failed, from a small fixed
// set, so the label stays bounded whatever the error says.
func startFailureReason(err error) string {
	switch {
	case errors.Is(err, ports.ErrEngineTimeout), errors.Is(err, context.DeadlineExceeded):
		return ReasonStartTimeout
	case errors.Is(err, ports.ErrEngineUnavailable):
		return ReasonTemporalUnavailable
	}
	return ReasonStartError
}
