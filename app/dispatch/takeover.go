package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/ports"
)

// takeoverBatch bounds the claims of ended terms one look settles, as
// stale recovery bounds its run: when a look was full, the loop looks
// again at its next cycle for the rest.
const takeoverBatch = 500

// takeover is what the claim loop knows of the claims of ended lease
// terms: the number of its lease's term it last settled them in, and when
// it looks for them next.
type takeover struct {
	settledTermNumber uint64
	nextLook          time.Time
}

// settleEndedTerms settles, before the loop claims anything new, the
// claims made under lease terms that have ended: a dead or paused
// dispatcher's, whose marks its term's fence now refuses. It runs when
// this dispatcher's lease begins a new term (it took the queue lease
// over, or took its registration lease back after a lapse), and otherwise
// at the heartbeat's cadence (a fifth of the lease's term), which is how a
// dispatcher beside others finds the claims of one whose registration
// expired. Each item is asked of Temporal as stale recovery asks: one
// whose workflow started is marked DISPATCHED, one Temporal has never seen
// goes back to PENDING and frees its slot, and one Temporal cannot answer
// for stays CLAIMED, looked at again next cycle. It reports whether the
// loop may claim: not when the claims could not be read or written, nor
// when Temporal turned out to be unavailable.
func (d *Dispatcher) settleEndedTerms(ctx context.Context) bool {
	if d.lease == nil {
		return true
	}
	termNumber := d.lease.TermNumber()
	if termNumber == d.takeover.settledTermNumber && d.now().Before(d.takeover.nextLook) {
		return true
	}
	items, err := d.store.ClaimsOfEndedTerms(ctx, takeoverBatch)
	if err != nil {
		d.log.Error("reading the claims of ended lease terms failed; not claiming", "error", err)
		return false
	}
	next := d.cfg.LeaseTTL / 5
	if len(items) > 0 {
		unsettled := make([]unsettledItem, 0, len(items))
		for _, item := range items {
			if item.ExecutionID != nil { // a CLAIMED item always has one
				unsettled = append(unsettled, unsettledItem{item: ports.ClaimedItem{QueueItem: item, ExecutionID: *item.ExecutionID}})
			}
		}
		started, released, unknown := d.resolveWith(ctx, unsettled, "not started: the dispatcher that claimed it lost its lease")
		if len(started) > 0 {
			if _, err := d.markDispatched(ctx, started); err != nil {
				d.log.Error("marking the started claims of ended lease terms failed; not claiming", "error", err)
				return false
			}
		}
		if len(released) > 0 {
			if err := d.applyReleases(ctx, released); err != nil {
				d.log.Error("releasing the unstarted claims of ended lease terms failed; not claiming", "error", err)
				return false
			}
		}
		d.metrics.TermClaimsSettled.Add(float64(len(started) + len(released)))
		d.log.Info("settled the claims of ended lease terms", "dispatched", len(started), "released", len(released),
			"unknown", len(unknown))
		if len(unknown) > 0 || len(items) == takeoverBatch {
			next = 0 // the rest next cycle
		}
	}
	d.takeover = takeover{settledTermNumber: termNumber, nextLook: d.now().Add(next)}
	return d.breaker.Closed()
}

// errLeaseTermEnded is the outcome of a start not made because the lease
// term its item was claimed under had run out: the item stays CLAIMED for
// the term's next holder, which finds it never started.
var errLeaseTermEnded = errors.New("the lease term the item was claimed under has ended")

// startDeadline is the deadline of the Temporal start of an item claimed
// under claimer: StartTimeout from now, but no later than the end of the
// claim's lease term (HeldUntil of its term), and not at all (false) once
// that term is over, even if the lease has since been renewed as a new
// term. The next holder takes over only after the term ends, and then asks
// Temporal whether each of the term's claims started; a start that left
// before the term ended but lands after that is refused by the run's
// admission, which the release has already withdrawn (AdmitRun).
func (d *Dispatcher) startDeadline(claimer ports.Fence) (time.Time, bool) {
	now := d.now()
	deadline := now.Add(d.cfg.StartTimeout)
	if d.lease == nil {
		return deadline, true
	}
	until := d.lease.HeldUntil(claimer.Term)
	if !now.Before(until) {
		return time.Time{}, false
	}
	if until.Before(deadline) {
		deadline = until
	}
	return deadline, true
}

// faultPoint halts at p when the fault suite asked for it.
func (d *Dispatcher) faultPoint(p FaultPoint) {
	if d.halt != nil {
		d.halt(p)
	}
}
