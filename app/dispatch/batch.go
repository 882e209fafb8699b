package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// BatchResult says what one dispatch batch did.
type BatchResult struct {
	Claimed    int
	Dispatched int
	Released   int
	Failed     int
	// Full is true when the batch claimed its whole budget, or the claim
	// found more items that could start now than the budget let it take
	// (ports.ClaimResult.More): more work is likely waiting and the loop
	// should not sleep. A batch left short by workspaces whose items are
	// held (by a limit, a rate or a notBefore) is counted against what was
	// admissible, not against the budget.
	Full bool
}

// DispatchBatch claims one batch, starts its workflows and records each
// outcome, all of them once every start has returned. The claim commits
// before any Temporal call, and no transaction is open while Temporal is
// called. A start that failed because Temporal is unavailable counts
// nothing against its item: whether it started is resolved with
// DescribeWorkflow, the breaker opens, and an item whose fate stays
// unknown is kept CLAIMED, holding its slot, until it is known.
func (d *Dispatcher) DispatchBatch(ctx context.Context) (BatchResult, error) {
	b, err := d.claimBatch(ctx, false)
	if err != nil {
		return BatchResult{}, err
	}
	<-b.done
	written, unsettled, err := d.writeOutcomes(ctx, b.outcomes())
	d.unsettled = append(d.unsettled, unsettled...)
	res := b.res
	res.Dispatched, res.Released, res.Failed = written.Dispatched, written.Released, res.Failed+written.Failed
	return res, err
}

// claimedBatch is a committed claim whose starts are under way.
type claimedBatch struct {
	// ctx is the claim's, under which its outcomes are written.
	ctx context.Context
	// termNumber is the number of the lease's term the batch was claimed
	// in (QueueLease.TermNumber), read with the claim's fence.
	termNumber uint64
	items      []ports.ClaimedItem
	res        BatchResult
	begun      time.Time
	// errs holds each item's start error; read it only once that start
	// has returned.
	errs []error
	// streamed hands each start's outcome to the dispatcher's outcome
	// writer as it returns (the claim loop's batches); otherwise the
	// caller writes them all once done is closed (DispatchBatch).
	streamed bool
	// unwritten counts the items whose outcome is still to be written, so
	// the last one written observes the batch's duration; unreturned
	// those whose start has not returned, which the outcome writer waits
	// for a while.
	unwritten, unreturned atomic.Int32
	// launched is closed once every start holds a slot of the start
	// concurrency (or ran), done once every start has returned.
	launched, done chan struct{}
}

// outcomes are the batch's start outcomes, once done is closed.
func (b *claimedBatch) outcomes() []startOutcome {
	out := make([]startOutcome, len(b.items))
	for i, item := range b.items {
		out[i] = startOutcome{batch: b, item: item, err: b.errs[i]}
	}
	return out
}

// ErrLeaseNotHeld is what a dispatch batch returns, having claimed
// nothing, when its dispatcher has a lease and the lease's heartbeat does
// not hold it in a known term.
var ErrLeaseNotHeld = errors.New("dispatch lease not held")

// claimBatch runs the claim and, once it has committed, launches the
// batch's starts in the background; a streamed batch's outcomes are
// written as its starts return (outcomeWriter), another's by the caller
// once they all have. A dispatcher with a lease claims only while the
// heartbeat holds it, fenced by the term it holds it in
// (QueueLease.claimFence), and otherwise returns ErrLeaseNotHeld: a claim
// the heartbeat does not know to be in a term of its own would have its
// starts refused (HeldUntil) and its items left CLAIMED for a peer to
// settle.
func (d *Dispatcher) claimBatch(ctx context.Context, streamed bool) (*claimedBatch, error) {
	b := &claimedBatch{ctx: ctx, begun: d.now(), streamed: streamed, launched: make(chan struct{}), done: make(chan struct{})}
	var fence ports.Fence
	if d.lease != nil {
		var held bool
		if fence, b.termNumber, held = d.lease.claimFence(); !held {
			return nil, ErrLeaseNotHeld
		}
	}
	claim, claimSpan, err := d.claim(ctx, fence)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	d.metrics.AtCapacity.Add(float64(claim.AtCapacity))
	d.metrics.refused(claim.Refused)
	d.metrics.passedOver(claim.PassedOver)
	d.nextDue = claim.NextDue
	if claim.Failed > 0 {
		d.metrics.Failed.WithLabelValues(ReasonMissingReference).Add(float64(claim.Failed))
	}
	b.items = claim.Claimed
	b.res = BatchResult{Claimed: len(claim.Claimed), Failed: claim.Failed, Full: len(claim.Claimed) >= d.batchSize || claim.More}
	d.adaptBatch(b.res.Full)
	if len(b.items) == 0 {
		close(b.launched)
		close(b.done)
		return b, nil
	}
	d.metrics.BatchSize.Observe(float64(len(b.items)))
	d.log.Debug("processing queue items", "batch_size", len(b.items))
	b.errs = make([]error, len(b.items))
	b.unwritten.Store(int32(len(b.items)))
	b.unreturned.Store(int32(len(b.items)))
	if streamed {
		d.outcomes.expect(len(b.items))
	}
	d.faultPoint(FaultAfterClaim)
	go d.startAll(ctx, b, claimSpan)
	return b, nil
}

// startOutcome is what one start of a batch returned.
type startOutcome struct {
	batch *claimedBatch
	item  ports.ClaimedItem
	err   error
}

// writeOutcomes records the outcomes of returned starts, of one batch or
// of several: started items DISPATCHED (one marking per lease term among
// them), failed ones released or FAILED, and those Temporal's absence
// left in doubt resolved, or returned as unsettled for the loop to keep.
// It runs beside the loop, so it touches no state of the loop's; the
// counts it returns are of the outcomes given.
func (d *Dispatcher) writeOutcomes(ctx context.Context, outs []startOutcome) (res BatchResult, unsettled []unsettledItem, err error) {
	if len(outs) == 0 {
		return res, nil, nil
	}
	defer d.written(outs)
	var ok []ports.ClaimedItem
	var unknown []unsettledItem
	var failed []ports.QueueTransition
	termEnded := 0
	for _, o := range outs {
		item := o.item
		switch {
		case o.err == nil:
			ok = append(ok, item)
			d.metrics.FailuresPerItem.Observe(float64(item.DispatchFailures))
			continue
		case errors.Is(o.err, errLeaseTermEnded):
			termEnded++
			continue
		case errors.Is(o.err, ports.ErrEngineUnavailable):
			d.metrics.dispatchFailed(startFailureReason(o.err), OutcomeHeld, item.WorkspaceID.String())
			unknown = append(unknown, unsettledItem{item: item})
			continue
		}
		d.log.Error("failed to start temporal workflow", "queue_item_id", item.ID, "execution_id", item.ExecutionID,
			"attempt_count", item.AttemptCount, "dispatch_failures", item.DispatchFailures+1, "error", o.err)
		t, err := d.releaseAfterError(item, o.err)
		if err != nil {
			d.log.Error("error processing queue item", "queue_item_id", item.ID, "error", err)
			continue
		}
		failed = append(failed, t)
		reason := startFailureReason(o.err)
		if t.To.Status == domain.QueueFailed {
			res.Failed++
			d.metrics.Failed.WithLabelValues(ReasonAttemptsExhausted).Inc()
			d.metrics.dispatchFailed(reason, OutcomeFailed, item.WorkspaceID.String())
			d.metrics.FailuresPerItem.Observe(float64(t.To.DispatchFailures))
		} else {
			res.Released++
			d.metrics.dispatchFailed(reason, OutcomeReleased, item.WorkspaceID.String())
		}
	}
	if termEnded > 0 {
		d.log.Warn("not starting claimed items: the lease term they were claimed under has ended; leaving them to its settling",
			"count", termEnded)
	}
	if len(unknown) > 0 {
		d.log.Warn("temporal unavailable; pausing dispatch", "unresolved_items", len(unknown), "error", d.breaker.Err())
		started, released, stillUnknown := d.resolve(ctx, unknown)
		ok = append(ok, started...)
		failed = append(failed, released...)
		res.Released += len(released)
		unsettled = append(unsettled, stillUnknown...)
	}
	if len(ok) > 0 {
		n, err := d.markDispatched(ctx, ok)
		res.Dispatched = n
		if err != nil {
			for _, item := range ok {
				unsettled = append(unsettled, unsettledItem{item: item, accepted: true})
			}
			return res, unsettled, fmt.Errorf("mark dispatched: %w", err)
		}
	}
	if len(failed) > 0 {
		if err := d.applyReleases(ctx, failed); err != nil {
			return res, unsettled, fmt.Errorf("release failed dispatches: %w", err)
		}
	}
	return res, unsettled, nil
}

// written counts outs as written, and observes the duration of each
// batch whose last outcome this was.
func (d *Dispatcher) written(outs []startOutcome) {
	for _, o := range outs {
		if o.batch.unwritten.Add(-1) == 0 {
			d.metrics.Duration.Observe(d.now().Sub(o.batch.begun).Seconds())
		}
	}
}

// claim runs the admission transaction, fenced by fence (the zero Fence
// for a dispatcher without a lease), inside a span of its own.
func (d *Dispatcher) claim(ctx context.Context, fence ports.Fence) (ports.ClaimResult, trace.SpanContext, error) {
	ctx, span := d.startClaimSpan(ctx)
	claim, err := d.store.Claim(ctx, fence, d.batchSize, d.plan, RejectUnrunnable)
	endClaimSpan(span, claim, err)
	return claim, span.SpanContext(), err
}

// adaptBatch sizes the next batch after the backlog: double after a full
// batch, up to MaxBatchSize, since more items are waiting; back to
// BatchSize after one that was not, so a shallow queue's items are claimed
// by small, quick transactions.
func (d *Dispatcher) adaptBatch(full bool) {
	if full {
		d.batchSize = min(d.batchSize*2, d.cfg.MaxBatchSize)
	} else {
		d.batchSize = d.cfg.BatchSize
	}
}

// startAll starts the batch's workflows concurrently, each holding a slot
// of the dispatcher's adaptive start limit, which the batches claimed
// behind it share, and records each item's error; each start's latency
// and outcome move the limit. A streamed batch hands each outcome to the
// outcome writer as its start returns, so an item waits for its own start
// and not for its batch's slowest. A start that finds Temporal
// unavailable opens the breaker at once, so no further batch is claimed
// while this one's other starts are still failing.
func (d *Dispatcher) startAll(ctx context.Context, b *claimedBatch, claimSpan trace.SpanContext) {
	// The fault suite's halt after the starts (FaultAfterStart) finds
	// every start of the batch returned and none of them written.
	handEach := b.streamed && d.halt == nil
	var wg sync.WaitGroup
	for i, item := range b.items {
		inFlight := d.starts.acquire()
		wg.Go(func() {
			d.start(ctx, b, i, item, inFlight, claimSpan)
			b.unreturned.Add(-1)
			if handEach {
				d.outcomes.add(d, startOutcome{batch: b, item: item, err: b.errs[i]})
			}
		})
	}
	close(b.launched)
	wg.Wait()
	d.faultPoint(FaultAfterStart)
	if b.streamed && !handEach {
		for _, o := range b.outcomes() {
			d.outcomes.add(d, o)
		}
	}
	close(b.done)
}

// start makes the Temporal start of the batch's item i, which holds a
// slot of the start limit taken with inFlight starts in flight, and
// frees the slot as it returns.
func (d *Dispatcher) start(ctx context.Context, b *claimedBatch, i int, item ports.ClaimedItem, inFlight int, claimSpan trace.SpanContext) {
	called, took := false, time.Duration(0)
	defer func() { d.starts.release(inFlight, took, b.errs[i], called) }()
	d.log.Info("dispatching queue item", "queue_item_id", item.ID, "workflow_definition_id", item.DefinitionID,
		"execution_id", item.ExecutionID)
	startCtx, span := d.startSpan(ctx, item, claimSpan)
	defer func() { endStartSpan(span, b.errs[i]) }()
	d.faultPoint(FaultBeforeStart)
	deadline, ok := d.startDeadline(item.Claimer)
	if !ok {
		b.errs[i] = errLeaseTermEnded
		return
	}
	startCtx, cancel := context.WithDeadline(startCtx, deadline)
	defer cancel()
	began := time.Now()
	b.errs[i] = d.engine.StartWorkflow(startCtx, ports.WorkflowStart{
		ExecutionID:  item.ExecutionID,
		WorkspaceID:  item.WorkspaceID,
		DefinitionID: item.DefinitionID,
		Version:      item.Version,
		Input:        item.Input,
		Plan:         item.Plan,
		Graph:        item.Graph,
		RetryOf:      item.RetryOf,
		RunTimeout:   item.RunTimeout,
	})
	called, took = true, time.Since(began)
	if errors.Is(b.errs[i], ports.ErrEngineUnavailable) {
		d.breaker.Trip(d.now(), b.errs[i])
	}
}

// releaseAfterError computes the item's next state after a failed start
// with the domain state machine: back to PENDING after a backoff, or FAILED
// at the last allowed attempt. Its execution row goes either way, freeing
// the slot, and its execution id with it: should the failed start have
// reached Temporal after all, that run is refused admission.
func (d *Dispatcher) releaseAfterError(item ports.ClaimedItem, cause error) (ports.QueueTransition, error) {
	next := item.QueueState
	from := next.Status
	fromClaimedAt := next.ClaimedAt
	if err := next.ReleaseAfterDispatchError(cause.Error(), d.now(), d.cfg.Backoff); err != nil {
		return ports.QueueTransition{}, err
	}
	exec := item.ExecutionID
	return ports.QueueTransition{ID: item.ID, FromStatus: from, FromClaimedAt: fromClaimedAt, To: next, DropExecution: &exec}, nil
}
