package dispatch

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// unsettledItem is a claimed item whose fate the dispatcher still owes.
type unsettledItem struct {
	item ports.ClaimedItem
	// accepted is true when Temporal accepted the start; otherwise whether
	// it started is unknown until DescribeWorkflow answers.
	accepted bool
}

// settle finishes what earlier cycles could not: items whose start is
// unresolved or whose marking failed, with those the outcome writer
// handed over since the last cycle.
func (d *Dispatcher) settle(ctx context.Context) {
	d.unsettled = append(d.unsettled, d.outcomes.take()...)
	if len(d.unsettled) == 0 {
		return
	}
	items := d.unsettled
	d.unsettled = nil
	started, released, unknown := d.resolve(ctx, items)
	d.unsettled = append(d.unsettled, unknown...)
	if len(started) > 0 {
		if _, err := d.markDispatched(ctx, started); err != nil {
			d.log.Warn("marking started items dispatched failed; retrying next cycle", "count", len(started), "error", err)
			for _, item := range started {
				d.unsettled = append(d.unsettled, unsettledItem{item: item, accepted: true})
			}
		}
	}
	if len(released) > 0 {
		if err := d.applyReleases(ctx, released); err != nil {
			// Stale recovery releases them if this keeps failing.
			d.log.Warn("releasing unstarted items failed", "count", len(released), "error", err)
		}
	}
	if len(d.unsettled) == 0 {
		d.log.Info("settled the items an outage left claimed", "count", len(items))
	}
}

// resolve asks Temporal whether items whose start failed for want of
// Temporal did start after all: those that did are returned as started,
// those Temporal has never seen are released without counting a failure,
// and those it cannot answer for stay unknown.
func (d *Dispatcher) resolve(ctx context.Context, items []unsettledItem) (started []ports.ClaimedItem, released []ports.QueueTransition, unknown []unsettledItem) {
	return d.resolveWith(ctx, items, "not started: temporal was unavailable")
}

// resolveWith is resolve for claimed items whose start is in doubt for
// any reason: an item Temporal accepted is started; any other is settled
// by SettleInDoubt, and an unknown answer because Temporal is unavailable
// trips the claim loop's breaker, which is the loop's alone to trip. why
// tells the user why an unstarted item waited.
func (d *Dispatcher) resolveWith(ctx context.Context, items []unsettledItem, why string) (started []ports.ClaimedItem, released []ports.QueueTransition, unknown []unsettledItem) {
	for _, u := range items {
		if u.accepted {
			started = append(started, u.item)
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
		s, err := SettleInDoubt(dctx, d.engine, u.item.QueueItem, u.item.ExecutionID, why)
		cancel()
		if err != nil {
			d.log.Error("error releasing unstarted queue item", "queue_item_id", u.item.ID, "error", err)
			continue
		}
		switch s.Verdict {
		case InDoubtStarted:
			started = append(started, u.item)
		case InDoubtNotStarted:
			released = append(released, s.Release)
		default:
			if errors.Is(s.Err, ports.ErrEngineUnavailable) {
				d.breaker.Trip(d.now(), s.Err)
			}
			unknown = append(unknown, u)
		}
	}
	return started, released, unknown
}

// InDoubtVerdict is what SettleInDoubt decides for a CLAIMED item whose
// workflow start may or may not have reached Temporal.
type InDoubtVerdict int

const (
	// InDoubtUnknown means Temporal could not say: the item stays CLAIMED,
	// holding its slot, and is asked about again later.
	InDoubtUnknown InDoubtVerdict = iota
	// InDoubtStarted means its workflow exists, in whatever state: the
	// item is marked DISPATCHED, so it never starts twice.
	InDoubtStarted
	// InDoubtNotStarted means Temporal has never seen its workflow: the
	// item goes back to PENDING and its execution row is dropped, freeing
	// its slot.
	InDoubtNotStarted
)

// InDoubt is SettleInDoubt's verdict on one item.
type InDoubt struct {
	Verdict InDoubtVerdict
	// Release is the item's return to PENDING (QueueState.ReleaseUnstarted)
	// guarded by the claim the verdict was reached on, and dropping the
	// claim's execution; set for InDoubtNotStarted only.
	Release ports.QueueTransition
	// Err is why Temporal could not answer; set for InDoubtUnknown only.
	Err error
}

// SettleInDoubt decides the fate of a CLAIMED item whose start may or may
// not have reached Temporal: it asks Temporal (DescribeWorkflow) about the
// claim's execution, the one answer that tells a started workflow from
// one that never was. It is the one rule for every such item: the claim
// loop's own unsettled starts, the claims of ended lease terms it takes
// over, and stale recovery's. why becomes the released item's LastError,
// so a user sees why it waited. What an unknown answer sets off (the
// claim loop's breaker) is the caller's; ctx bounds the question. The
// error is for an item that is not CLAIMED, which is no claim to settle.
func SettleInDoubt(ctx context.Context, engine ports.WorkflowEngine, item domain.QueueItem, executionID domain.ID, why string) (InDoubt, error) {
	next := item.QueueState
	if err := next.ReleaseUnstarted(why); err != nil {
		return InDoubt{}, err
	}
	state, err := engine.DescribeWorkflow(ctx, executionID)
	switch {
	case err != nil:
		return InDoubt{Verdict: InDoubtUnknown, Err: err}, nil
	case state != ports.WorkflowNotFound:
		return InDoubt{Verdict: InDoubtStarted}, nil
	}
	return InDoubt{Verdict: InDoubtNotStarted, Release: ports.QueueTransition{
		ID: item.ID, FromStatus: item.Status, FromClaimedAt: item.ClaimedAt, To: next, DropExecution: &executionID,
	}}, nil
}

// markDispatched marks started items DISPATCHED, each fenced by the
// lease term it was claimed under (ClaimedItem.Claimer). Items whose term
// has ended are not marked and not kept: the holder of a later term
// settles them, asking Temporal as this dispatcher would. An item no
// longer in its claim was either settled by stale recovery or a later
// holder, or cancelled meanwhile; a cancelled one's workflow, which should
// not run, is cancelled.
func (d *Dispatcher) markDispatched(ctx context.Context, items []ports.ClaimedItem) (int, error) {
	byClaimer := map[ports.Fence][]ports.ClaimedItem{}
	for _, it := range items {
		byClaimer[it.Claimer] = append(byClaimer[it.Claimer], it)
	}
	n := 0
	for claimer, items := range byClaimer {
		m, err := d.markDispatchedUnder(ctx, claimer, items)
		if errors.Is(err, ports.ErrLeaseLost) {
			d.log.Warn("the lease term these items were claimed under has ended; leaving them to its next holder",
				"count", len(items), "lease", claimer.Lease)
			continue
		}
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// markDispatchedUnder marks items claimed under claimer.
func (d *Dispatcher) markDispatchedUnder(ctx context.Context, claimer ports.Fence, items []ports.ClaimedItem) (int, error) {
	req := make([]ports.DispatchedItem, len(items))
	executionOf := make(map[domain.ID]domain.ID, len(items))
	for i, it := range items {
		req[i] = ports.DispatchedItem{ID: it.ID, ExecutionID: it.ExecutionID}
		executionOf[it.ID] = it.ExecutionID
	}
	recs, err := d.store.MarkDispatched(context.WithoutCancel(ctx), claimer, req)
	if err != nil {
		return 0, err
	}
	d.metrics.Dispatched.Add(float64(len(recs)))
	for _, r := range recs {
		d.metrics.started(r)
		d.log.Info("dispatched execution", "queue_item_id", r.ID, "execution_id", executionOf[r.ID])
	}
	n := len(recs)
	if len(recs) < len(items) {
		marked := make(map[domain.ID]bool, len(recs))
		for _, r := range recs {
			marked[r.ID] = true
		}
		var missed []ports.ClaimedItem
		for _, it := range items {
			if !marked[it.ID] {
				missed = append(missed, it)
			}
		}
		// A run admitted before this marking (AdmitRun) moved its item
		// DISPATCHED itself: started all the same, and counted here, its
		// latency up to now, a little after its admission, and the
		// admission wait its admission stored.
		statuses := d.cancelWithdrawn(ctx, missed, true)
		now := d.now()
		var admitted []domain.ID
		for _, it := range missed {
			if statuses[it.ID] == domain.QueueDispatched {
				n++
				d.metrics.Dispatched.Inc()
				d.metrics.Latency.Observe(now.Sub(it.CreatedAt).Seconds())
				admitted = append(admitted, it.ExecutionID)
			}
		}
		if len(admitted) > 0 {
			waits, err := d.store.AdmissionWaits(context.WithoutCancel(ctx), admitted)
			if err != nil {
				d.log.Warn("cannot read the admission waits of items their runs started", "count", len(admitted), "error", err)
			}
			for _, w := range waits {
				d.metrics.waited(w)
			}
		}
	}
	return n, nil
}

// applyReleases writes the releases of unstarted items; an item cancelled
// meanwhile gets its execution recorded CANCELLED, freeing its slot.
func (d *Dispatcher) applyReleases(ctx context.Context, ts []ports.QueueTransition) error {
	written, err := d.store.ApplyTransitions(context.WithoutCancel(ctx), ts)
	if err != nil {
		return err
	}
	if len(written) == len(ts) {
		return nil
	}
	done := make(map[domain.ID]bool, len(written))
	for _, id := range written {
		done[id] = true
	}
	var missed []ports.ClaimedItem
	for _, t := range ts {
		if !done[t.ID] && t.DropExecution != nil {
			missed = append(missed, ports.ClaimedItem{QueueItem: domain.QueueItem{ID: t.ID}, ExecutionID: *t.DropExecution})
		}
	}
	d.cancelWithdrawn(ctx, missed, false)
	return nil
}

// cancelWithdrawn handles claimed items that moved on while this
// dispatcher worked on them, and returns the statuses it found them in
// (none when they could not be read). Those cancelled meanwhile are
// withdrawn: a started workflow is asked to cancel (it records CANCELLED
// itself), an unstarted one's execution is recorded CANCELLED at once.
func (d *Dispatcher) cancelWithdrawn(ctx context.Context, items []ports.ClaimedItem, started bool) map[domain.ID]domain.QueueStatus {
	ids := make([]domain.ID, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	statuses, err := d.store.QueueStatuses(ctx, ids)
	if err != nil {
		d.log.Warn("cannot read the status of items that moved on during dispatch", "error", err)
		return nil
	}
	for _, it := range items {
		if statuses[it.ID] != domain.QueueCancelled {
			continue
		}
		if started {
			if err := d.engine.CancelWorkflow(ctx, it.ExecutionID); err != nil && !errors.Is(err, ports.ErrNotFound) {
				d.log.Error("cancelling the workflow of an item cancelled during dispatch failed", "queue_item_id", it.ID, "error", err)
			}
			continue
		}
		msg := "cancelled before its workflow started"
		if _, err := queue.FinishExecution(ctx, d.executions, d.log, it.ExecutionID, domain.ExecutionCancelled, msg, domain.DefaultRecordValueMax); err != nil {
			d.log.Error("recording a cancelled item's execution failed", "queue_item_id", it.ID, "error", err)
		}
	}
	return statuses
}
