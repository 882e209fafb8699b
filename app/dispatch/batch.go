package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// outcome. The claim commits before any Temporal call, and no transaction is
// open while Temporal is called. A start that failed because Temporal is
// unavailable counts nothing against its item: whether it started is
// resolved with DescribeWorkflow, the breaker opens, and an item whose
// fate stays unknown is kept CLAIMED, holding its slot, until it is known.
func (d *Dispatcher) DispatchBatch(ctx context.Context) (BatchResult, error) {
	b, err := d.claimBatch(ctx)
	if err != nil {
		return BatchResult{}, err
	}
	res, unsettled, err := d.finishBatch(ctx, b)
	d.unsettled = append(d.unsettled, unsettled...)
	return res, err
}

// claimedBatch is a committed claim whose starts are under way.
type claimedBatch struct {
	// termNumber is the number of the lease's term the batch was claimed
	// in (QueueLease.TermNumber), read with the claim's fence.
	termNumber uint64
	items      []ports.ClaimedItem
	res        BatchResult
	begun      time.Time
	// errs holds each item's start error; read it only after done.
	errs []error
	// launched is closed once every start holds a slot of the start
	// concurrency (or ran), done once every start has returned.
	launched, done chan struct{}
}

// ErrLeaseNotHeld is what a dispatch batch returns, having claimed
// nothing, when its dispatcher has a lease and the lease's heartbeat does
// not hold it in a known term.
var ErrLeaseNotHeld = errors.New("dispatch lease not held")

// claimBatch runs the claim and, once it has committed, launches the
// batch's starts in the background; finishBatch waits for them and
// records the outcomes. A dispatcher with a lease claims only while the
// heartbeat holds it, fenced by the term it holds it in
// (QueueLease.claimFence), and otherwise returns ErrLeaseNotHeld: a claim
// the heartbeat does not know to be in a term of its own would have its
// starts refused (HeldUntil) and its items left CLAIMED for a peer to
// settle.
func (d *Dispatcher) claimBatch(ctx context.Context) (*claimedBatch, error) {
	b := &claimedBatch{begun: d.now(), launched: make(chan struct{}), done: make(chan struct{})}
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
	d.faultPoint(FaultAfterClaim)
	go d.startAll(ctx, b, claimSpan)
	return b, nil
}

// finishBatch waits for the batch's starts and records each outcome:
// started items DISPATCHED, failed ones released or FAILED, and those
// Temporal's absence left in doubt resolved, or returned as unsettled for
// the loop to keep. It runs beside the loop's next claim, so it touches no
// state of the loop's.
func (d *Dispatcher) finishBatch(ctx context.Context, b *claimedBatch) (res BatchResult, unsettled []unsettledItem, err error) {
	<-b.done
	res = b.res
	if len(b.items) == 0 {
		return res, nil, nil
	}
	d.faultPoint(FaultAfterStart)
	var ok []ports.ClaimedItem
	var unknown []unsettledItem
	var failed []ports.QueueTransition
	termEnded := 0
	for i, item := range b.items {
		switch {
		case b.errs[i] == nil:
			ok = append(ok, item)
			d.metrics.FailuresPerItem.Observe(float64(item.DispatchFailures))
			continue
		case errors.Is(b.errs[i], errLeaseTermEnded):
			termEnded++
			continue
		case errors.Is(b.errs[i], ports.ErrEngineUnavailable):
			d.metrics.dispatchFailed(startFailureReason(b.errs[i]), OutcomeHeld, item.WorkspaceID.String())
			unknown = append(unknown, unsettledItem{item: item})
			continue
		}
		d.log.Error("failed to start temporal workflow", "queue_item_id", item.ID, "execution_id", item.ExecutionID,
			"attempt_count", item.AttemptCount, "dispatch_failures", item.DispatchFailures+1, "error", b.errs[i])
		t, err := d.releaseAfterError(item, b.errs[i])
		if err != nil {
			d.log.Error("error processing queue item", "queue_item_id", item.ID, "error", err)
			continue
		}
		failed = append(failed, t)
		reason := startFailureReason(b.errs[i])
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
	d.metrics.Duration.Observe(d.now().Sub(b.begun).Seconds())
	return res, unsettled, nil
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
// of the dispatcher's adaptive start limit, which the batch claimed behind
// it shares, and records each item's error; each start's latency and
// outcome move the limit. A start that finds Temporal unavailable opens
// the breaker at once, so no further batch is claimed while this one's
// other starts are still failing.
func (d *Dispatcher) startAll(ctx context.Context, b *claimedBatch, claimSpan trace.SpanContext) {
	var wg sync.WaitGroup
	for i, item := range b.items {
		inFlight := d.starts.acquire()
		wg.Go(func() {
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
		})
	}
	close(b.launched)
	wg.Wait()
	close(b.done)
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
