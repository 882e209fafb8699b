package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/ports"
)

// staleReason is the LastError of an item stale recovery releases.
const staleReason = "not started: the dispatcher that claimed it stopped before starting it"

// staleBatch bounds the items one recovery run settles; the rest wait for
// the next run.
const staleBatch = 500

// StaleRecovery settles queue items left CLAIMED by a dispatcher that died
// or lost its way between its claim and its outcome. It asks Temporal
// whether each item's workflow started, so an item is never started twice,
// and runs in one process at a time under the recoverStaleQueueItems
// lease. A run goes past a claim whose workflow Temporal does not answer
// about while it answers otherwise (passOver), as the reconciler's walk
// goes past such a run.
type StaleRecovery struct {
	store      ports.DispatchStore
	engine     ports.WorkflowEngine
	breaker    *dispatch.Breaker
	staleAfter time.Duration
	// askTimeout bounds each question to Temporal (askTemporal), as the
	// claim loop's questions about its own claims in doubt are bounded.
	askTimeout time.Duration
	metrics    *dispatch.Metrics
	log        *slog.Logger
	loop       maintenance
	// unanswered is the rule for a claim Temporal does not answer about
	// (passOver), and its streaks of runs gone past them, by the claim's
	// execution id.
	unanswered *unansweredSubjects
}

// NewStaleRecovery builds the stale recovery service; staleAfter is how
// long an item may stay CLAIMED before recovery settles it, askTimeout
// how long it waits for each answer from Temporal (the dispatcher's
// StartTimeout, which bounds the claim loop's own questions).
func NewStaleRecovery(store ports.DispatchStore, engine ports.WorkflowEngine, breaker *dispatch.Breaker, lease ports.Lease,
	staleAfter, askTimeout time.Duration, schedule JobSchedule, metrics *dispatch.Metrics, leaseMetrics *dispatch.LeaseMetrics, log *slog.Logger) *StaleRecovery {
	r := &StaleRecovery{store: store, engine: engine, breaker: breaker, staleAfter: staleAfter, askTimeout: askTimeout, metrics: metrics, log: log}
	r.unanswered = newUnansweredSubjects(engine, breaker, askTimeout, staleBatch, metrics.StaleUnansweredClaims, metrics.StaleUnansweredClaimsNow,
		"stale recovery goes past its claim, leaving the item CLAIMED and holding its slot, and asks again each run", log)
	r.loop = maintenance{name: StaleRecoveryLeaseName, lease: lease, schedule: schedule, metrics: leaseMetrics, log: log, job: r.run,
		elsewhere: r.unanswered.runElsewhere}
	return r
}

// Run recovers stale items on the schedule until ctx ends.
func (r *StaleRecovery) Run(ctx context.Context) { r.loop.run(ctx) }

// run is one scheduled run. It first deletes the expired registration
// leases of dispatchers that are gone, which needs only Postgres; the
// recovery itself is skipped while the breaker is open, since it must ask
// Temporal and waits for the probe that closes it.
func (r *StaleRecovery) run(ctx context.Context) {
	if n, err := r.store.ForgetExpiredLeases(ctx, dispatch.RegistrationLeasePrefix); err != nil {
		r.log.Error("forgetting expired dispatcher registrations failed", "error", err)
	} else if n > 0 {
		r.log.Info("forgot expired dispatcher registrations", "count", n)
	}
	if !r.breaker.Closed() {
		return
	}
	if n, err := r.Recover(ctx); err != nil {
		r.log.Error("stale recovery failed", "error", err)
	} else if n > 0 {
		r.log.Info("recovered stale queue items", "recovered_count", n)
	}
}

// Recover settles items CLAIMED for longer than staleAfter (by the
// database's clock, which set their claimed_at), oldest claim first, by
// dispatch.SettleInDoubt, the rule the claim loop settles its own
// doubtful claims by: one whose workflow did start is marked DISPATCHED
// (so it never starts twice); one Temporal has never seen goes back to
// PENDING, but only if it is still in the claim that was observed, and
// its execution row is dropped to free the slot. Each question waits at
// most askTimeout. An item whose workflow Temporal refuses to describe is
// left for the next run. A question Temporal did not answer (unavailable,
// a deadline passed included) is no verdict either: passOver either goes
// past that item, which stays CLAIMED, holding its slot, to be asked
// about again next run, while the items after it are settled; or finds
// Temporal away and stops the batch, as the reconciler's walk does, so an
// outage costs one question (at most passOverInARowMax while Temporal's
// health check answers) rather than one per item: what was settled before
// it is written, the items after it stay CLAIMED for the next run, and
// the outage is the error. The breaker is the claim loop's to trip, and
// this job waits for it.
func (r *StaleRecovery) Recover(ctx context.Context) (int, error) {
	stale, err := r.store.StaleClaimed(ctx, r.staleAfter, staleBatch)
	if err != nil {
		return 0, err
	}
	r.unanswered.startRun()
	var started []ports.DispatchedItem
	var released []ports.QueueTransition
	var outage error
	for _, item := range stale {
		if item.ExecutionID == nil {
			continue
		}
		var s dispatch.InDoubt
		err := askTemporal(ctx, r.askTimeout, func(ctx context.Context) (err error) {
			s, err = dispatch.SettleInDoubt(ctx, r.engine, item, *item.ExecutionID, staleReason)
			return err
		})
		if err != nil {
			r.log.Warn("stale recovery refused", "queue_item_id", item.ID, "error", err)
			continue
		}
		subject := item.ExecutionID.String()
		if s.Verdict == dispatch.InDoubtUnknown && errors.Is(s.Err, ports.ErrEngineUnavailable) {
			outage = r.unanswered.passOver(ctx, subject, fmt.Errorf("describing workflows: %w", s.Err),
				"queue_item_id", item.ID, "execution_id", *item.ExecutionID)
			if outage != nil {
				break
			}
			continue
		}
		r.unanswered.answered(subject)
		switch s.Verdict {
		case dispatch.InDoubtStarted:
			started = append(started, ports.DispatchedItem{ID: item.ID, ExecutionID: *item.ExecutionID})
		case dispatch.InDoubtNotStarted:
			released = append(released, s.Release)
		default:
			r.log.Warn("cannot tell whether a stale item's workflow started; leaving it", "queue_item_id", item.ID, "error", s.Err)
		}
	}
	r.unanswered.endRun(outage == nil)
	n := 0
	if len(started) > 0 {
		recs, err := r.store.MarkDispatched(ctx, ports.Fence{}, started)
		if err != nil {
			return n, err
		}
		n += len(recs)
	}
	if len(released) > 0 {
		ids, err := r.store.ApplyTransitions(ctx, released)
		if err != nil {
			return n, err
		}
		n += len(ids)
	}
	r.metrics.StaleRecovered.Add(float64(n))
	return n, outage
}
