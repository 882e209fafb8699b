package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// runMaintenance runs stale recovery and the reconciler on their own
// schedule beside the dispatch loop.
func (d *Dispatcher) runMaintenance(ctx context.Context) {
	tick := time.NewTicker(d.cfg.RecoveryInterval)
	defer tick.Stop()
	for {
		d.maintain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (d *Dispatcher) maintain(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("maintenance panicked", "panic", fmt.Sprint(r))
		}
	}()
	held, err := d.lease.TryAcquire(ctx, RecoveryLeaseName, d.cfg.RecoveryLeaseAtMostFor)
	if err != nil || !held {
		if err != nil && ctx.Err() == nil {
			d.log.Error("acquiring recovery lease failed", "lease", RecoveryLeaseName, "error", err)
		}
		d.metrics.LeaseFailures.Inc()
		return
	}
	defer func() {
		if err := d.lease.Release(context.WithoutCancel(ctx), RecoveryLeaseName, d.cfg.RecoveryLeaseAtLeastFor); err != nil {
			d.log.Warn("releasing recovery lease failed", "error", err)
		}
	}()
	if !d.breaker.closed() {
		// Stale recovery and the reconciler ask Temporal; they wait for
		// the probe that closes the breaker.
		return
	}
	if n, err := d.RecoverStale(ctx); err != nil {
		d.log.Error("stale recovery failed", "error", err)
	} else if n > 0 {
		d.log.Info("recovered stale queue items", "recovered_count", n)
	}
	if n, err := d.Reconcile(ctx); err != nil {
		d.log.Error("reconciling stuck executions failed", "error", err)
	} else if n > 0 {
		d.log.Info("reconciled stuck executions", "count", n)
	}
	if _, err := d.store.PurgeIdempotencyKeys(ctx); err != nil {
		d.log.Error("purging idempotency keys failed", "error", err)
	}
}

// RecoverStale settles items CLAIMED for longer than StaleAfter: one whose
// workflow did start is marked DISPATCHED (so it never starts twice); any
// other goes back to PENDING, but only if it is still in the claim that was
// observed, and its execution row is dropped to free the slot.
func (d *Dispatcher) RecoverStale(ctx context.Context) (int, error) {
	stale, err := d.store.StaleClaimed(ctx, d.cfg.StaleAfter, 500)
	if err != nil {
		return 0, err
	}
	var started []ports.DispatchedItem
	var released []ports.QueueTransition
	for _, item := range stale {
		if item.ExecutionID == nil {
			continue
		}
		state, err := d.engine.DescribeWorkflow(ctx, *item.ExecutionID)
		if err != nil {
			d.log.Warn("cannot tell whether a stale item's workflow started; leaving it", "queue_item_id", item.ID, "error", err)
			continue
		}
		if state != ports.WorkflowNotFound {
			started = append(started, ports.DispatchedItem{ID: item.ID, ExecutionID: *item.ExecutionID})
			continue
		}
		next := item.QueueState
		if err := next.RecoverStale(*item.ClaimedAt, d.now(), d.cfg.StaleAfter); err != nil {
			if !errors.Is(err, domain.ErrNotStale) {
				d.log.Warn("stale recovery refused", "queue_item_id", item.ID, "error", err)
			}
			continue
		}
		released = append(released, ports.QueueTransition{
			ID: item.ID, FromStatus: item.Status, FromClaimedAt: item.ClaimedAt, To: next, DropExecution: item.ExecutionID,
		})
	}
	n := 0
	if len(started) > 0 {
		recs, err := d.store.MarkDispatched(ctx, started)
		if err != nil {
			return n, err
		}
		n += len(recs)
	}
	if len(released) > 0 {
		ids, err := d.store.ApplyTransitions(ctx, released)
		if err != nil {
			return n, err
		}
		n += len(ids)
	}
	d.metrics.StaleRecovered.Add(float64(n))
	return n, nil
}

// Reconcile checks one page of RUNNING executions past ReconcileAfter
// against Temporal and records the real final status of those whose
// workflow is closed or missing (terminated outside Sluice, say), freeing
// their slots. Pages follow each other across calls in (started_at, id)
// order and wrap around at the end, so every such execution is checked
// within ceil(total/ReconcilePageSize) calls however many long runs are
// older. Executions whose item is still CLAIMED are stale recovery's
// business and are not returned by the store.
func (d *Dispatcher) Reconcile(ctx context.Context) (int, error) {
	running, err := d.store.RunningAdmittedBefore(ctx, d.cfg.ReconcileAfter, d.reconcileAfter, d.cfg.ReconcilePageSize)
	if err != nil {
		return 0, err
	}
	if len(running) < d.cfg.ReconcilePageSize {
		d.reconcileAfter = ports.ExecutionCursor{}
	} else {
		last := running[len(running)-1]
		d.reconcileAfter = ports.ExecutionCursor{AdmittedAt: last.AdmittedAt, ID: last.ID}
	}
	n := 0
	for _, e := range running {
		state, err := d.engine.DescribeWorkflow(ctx, e.ID)
		if err != nil {
			if errors.Is(err, ports.ErrEngineUnavailable) {
				return n, fmt.Errorf("describing workflows: %w", err)
			}
			d.log.Warn("cannot describe execution's workflow", "execution_id", e.ID, "error", err)
			continue
		}
		status, msg, closed := finalStatus(state)
		if !closed {
			continue
		}
		if state == ports.WorkflowCompleted {
			// A DAG that failed or was cancelled also ends its workflow
			// normally; the status it recorded is in its result.
			if status, msg, err = d.engine.WorkflowResult(ctx, e.ID); err != nil {
				d.log.Warn("cannot read a completed workflow's result", "execution_id", e.ID, "error", err)
				continue
			}
		}
		found, err := finishExecution(ctx, d.executions, d.log, e.ID, status, msg)
		if err != nil {
			return n, err
		}
		if found {
			n++
			d.log.Warn("reconciled stuck execution", "execution_id", e.ID, "workflow_state", state, "status", status)
		}
	}
	return n, nil
}

// finalStatus maps a closed or missing workflow to the execution status to
// record.
func finalStatus(s ports.WorkflowState) (domain.ExecutionStatus, string, bool) {
	switch s {
	case ports.WorkflowNotFound:
		return domain.ExecutionFailed, "workflow not found in Temporal", true
	case ports.WorkflowCompleted:
		return domain.ExecutionCompleted, "", true
	case ports.WorkflowFailed:
		return domain.ExecutionFailed, "workflow failed without recording completion", true
	case ports.WorkflowCancelled:
		return domain.ExecutionCancelled, "workflow cancelled outside Sluice", true
	case ports.WorkflowTerminated:
		return domain.ExecutionFailed, "workflow terminated outside Sluice", true
	case ports.WorkflowTimedOut:
		return domain.ExecutionFailed, "workflow timed out", true
	default:
		return "", "", false
	}
}
