package maintenance

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// unansweredWalksToReport is how many walks in a row Temporal may leave
// unanswered the questions about one execution (or TEMPORAL_WORKFLOW
// child), while it answers for others, before the reconciler reports it
// (a warning naming it, and reconciler_unanswered_workflows_total): a
// question cut short once or twice is a blip (a shard moving between
// hosts); three walks in a row is a workflow an operator should look at.
const unansweredWalksToReport = 3

// passOverInARowMax is how many executions and children a run of the walk
// goes past in a row, with no question about one between them answered,
// before it takes Temporal for away although its health check answers:
// every question failing is an outage of the service that keeps
// workflows (history), which the frontend's health check does not see.
// It also bounds what such an outage costs a run: at most this many
// questions (and health checks) of up to SLUICE_DISPATCH_START_TIMEOUT
// each, as one question does at an outage the health check sees.
const passOverInARowMax = 8

// ReconcilerMetrics are the reconciler's series.
type ReconcilerMetrics struct {
	// UnansweredWorkflows counts the executions and TEMPORAL_WORKFLOW
	// children whose questions Temporal left unanswered
	// unansweredWalksToReport walks in a row while it answered for others:
	// each such streak once.
	UnansweredWorkflows prometheus.Counter
}

// NewReconcilerMetrics creates the series and registers them with reg.
func NewReconcilerMetrics(reg prometheus.Registerer) *ReconcilerMetrics {
	m := &ReconcilerMetrics{
		UnansweredWorkflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reconciler_unanswered_workflows_total",
			Help: "Executions and TEMPORAL_WORKFLOW children the reconciler's walk went past, still RUNNING, three walks in a row because Temporal did not answer about them while it answered otherwise; each streak counted once.",
		}),
	}
	reg.MustRegister(m.UnansweredWorkflows)
	return m
}

// passOver is the walk's one rule for a question about subject (an
// execution, or a TEMPORAL_WORKFLOW child) that Temporal did not answer
// (err: unavailable, or past its deadline): it returns nil when the walk
// goes past subject, and err when the walk stops there, as at an outage,
// to walk the page again next run.
//
// Temporal is away, and the walk stops, when the breaker is open, when
// its health check is not answered either (within askTimeout), or when
// the walk has already gone past passOverInARowMax in a row. Otherwise
// Temporal answers, but not about subject (its workflow's shard stuck,
// say): stopping would hold the walk at this page for as long as that
// lasts, and nothing after it would ever be checked. So the walk goes
// past it. Going past is no verdict: subject is left as it is (RUNNING,
// nothing recorded, terminated or ended) and asked about again on the
// next walk.
func (r *Reconciler) passOver(ctx context.Context, subject string, err error, about ...any) error {
	if !r.breaker.Closed() || r.passedOverInARow >= passOverInARowMax {
		return err
	}
	if askTemporal(ctx, r.askTimeout, r.engine.CheckHealth) != nil {
		return err
	}
	r.log.Debug("went past a workflow Temporal did not answer about", append(about, "error", err)...)
	r.passedOverInARow++
	r.passedOver = append(r.passedOver, unansweredSubject{key: subject, about: about})
	return nil
}

// unansweredSubject is an execution or child the walk went past: its key
// for passOver, and how to name it in the log.
type unansweredSubject struct {
	key   string
	about []any
}

// answered notes that Temporal answered every question the walk had
// about subject, which ends its streak of unanswered walks and the run's
// row of subjects gone past (passOver).
func (r *Reconciler) answered(subject string) {
	r.unanswered.Remove(subject)
	r.passedOverInARow = 0
}

// countUnanswered adds a walk to the streak of each subject the run went
// past, once it has walked its page to the end: a run stopped as an
// outage counts none. At most a page of subjects are remembered, the
// least recently unanswered forgotten first. At the
// unansweredWalksToReport-th walk in a row the reconciler warns once,
// naming the subject, and counts it in
// reconciler_unanswered_workflows_total.
func (r *Reconciler) countUnanswered() {
	for _, s := range r.passedOver {
		walks, _ := r.unanswered.Get(s.key)
		walks++
		r.unanswered.Add(s.key, walks)
		if walks == unansweredWalksToReport {
			r.metrics.UnansweredWorkflows.Inc()
			r.log.Warn("Temporal keeps leaving a workflow unanswered while it answers for others: the reconciler goes past it, leaving it RUNNING, and asks again each walk",
				append(s.about, "walks", walks)...)
		}
	}
	r.passedOver = nil
}
