package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Lease names and default durations, as in the seeds' ShedLock
// configuration.
const (
	QueueLeaseName          = "processExecutionQueue"
	QueueLeaseAtMostFor     = 4 * time.Minute
	QueueLeaseAtLeastFor    = 10 * time.Second
	RecoveryLeaseName       = "recoverStaleQueueItems"
	RecoveryLeaseAtMostFor  = 2 * time.Minute
	RecoveryLeaseAtLeastFor = 30 * time.Second
)

// DispatcherConfig tunes the dispatcher. The defaults come from the seeds.
type DispatcherConfig struct {
	// Enabled turns the engine off without removing the module.
	Enabled bool
	// BatchSize bounds the items claimed by one admission transaction.
	BatchSize int
	// PollInterval is the fallback cadence when no wake-up arrives.
	PollInterval time.Duration
	// Exclusive makes one dispatcher hold the processExecutionQueue lease,
	// as in the seeds. Without it several dispatch at once, which is safe
	// because admission is atomic per workspace and starts are idempotent.
	Exclusive bool
	// StartConcurrency bounds the Temporal starts in flight per batch.
	StartConcurrency int
	// StartTimeout bounds one Temporal start, so an unreachable server
	// costs a failed attempt instead of a hung loop.
	StartTimeout time.Duration
	// StaleAfter is how long an item may stay CLAIMED before recovery.
	StaleAfter time.Duration
	// RecoveryInterval is how often stale recovery and the reconciler run.
	RecoveryInterval time.Duration
	// ReconcileAfter is the minimum age of a RUNNING execution before the
	// reconciler asks Temporal about it.
	ReconcileAfter time.Duration
	// Backoff spaces out dispatch retries; its Base is at least PollInterval.
	Backoff domain.DispatchBackoff
	// RecoveryLeaseAtMostFor and RecoveryLeaseAtLeastFor are the
	// recoverStaleQueueItems lease's ShedLock terms. A holder that dies
	// keeps recovery away for up to AtMostFor.
	RecoveryLeaseAtMostFor  time.Duration
	RecoveryLeaseAtLeastFor time.Duration
}

// DefaultDispatcherConfig returns the seeds' settings: batches of 10, a 5 s
// poll, a 5 min stale threshold checked every 60 s.
func DefaultDispatcherConfig() DispatcherConfig {
	return DispatcherConfig{
		Enabled:          true,
		BatchSize:        10,
		PollInterval:     5 * time.Second,
		Exclusive:        true,
		StartConcurrency: 16,
		StartTimeout:     10 * time.Second,
		StaleAfter:       5 * time.Minute,
		RecoveryInterval: time.Minute,
		ReconcileAfter:   time.Minute,
		Backoff:          domain.DispatchBackoff{Base: 5 * time.Second, Max: 5 * time.Minute},

		RecoveryLeaseAtMostFor:  RecoveryLeaseAtMostFor,
		RecoveryLeaseAtLeastFor: RecoveryLeaseAtLeastFor,
	}
}

// Dispatcher moves queue items into Temporal: it admits them against their
// workspace's limit, starts their workflows and records the outcome.
type Dispatcher struct {
	store      ports.DispatchStore
	executions ports.ExecutionStore
	engine     ports.WorkflowEngine
	lease      ports.Lease
	wakeups    ports.Wakeups
	tiers      domain.TierPolicy
	cfg        DispatcherConfig
	log        *slog.Logger
	metrics    *DispatchMetrics
	tracer     trace.Tracer
	now        func() time.Time

	// lastServed is the workspace the previous batch started its
	// round-robin after, so that no workspace is always first.
	lastServed domain.ID
	// leaseRenewedAt is when the queue lease was last taken or extended.
	leaseRenewedAt time.Time
	// leaseSeen is what the last attempt on the queue lease found, for
	// readiness.
	leaseSeen leaseState
}

// leaseState is the outcome of the latest queue lease attempt.
type leaseState struct {
	mu    sync.Mutex
	tried bool
	err   error
}

// ErrLeaseNotTried means the dispatcher has not yet tried the queue lease.
var ErrLeaseNotTried = errors.New("queue lease not tried yet")

// LeaseReady reports whether the dispatcher can take part in the queue
// lease: nil when it holds the lease or saw it held elsewhere (a standby is
// ready to take over), the error when the last attempt failed. A dispatcher
// that is disabled, or not exclusive, needs no lease.
func (d *Dispatcher) LeaseReady() error {
	if !d.cfg.Enabled || !d.cfg.Exclusive {
		return nil
	}
	d.leaseSeen.mu.Lock()
	defer d.leaseSeen.mu.Unlock()
	if !d.leaseSeen.tried {
		return ErrLeaseNotTried
	}
	return d.leaseSeen.err
}

func (d *Dispatcher) recordLease(held bool, err error) {
	d.leaseSeen.mu.Lock()
	d.leaseSeen.tried, d.leaseSeen.err = true, err
	d.leaseSeen.mu.Unlock()
	d.metrics.leaseHeld(QueueLeaseName, held && err == nil)
}

// NewDispatcher builds a Dispatcher.
func NewDispatcher(store ports.DispatchStore, executions ports.ExecutionStore, engine ports.WorkflowEngine, lease ports.Lease,
	wakeups ports.Wakeups, tiers domain.TierPolicy, cfg DispatcherConfig, metrics *DispatchMetrics, log *slog.Logger) *Dispatcher {
	return &Dispatcher{
		store: store, executions: executions, engine: engine, lease: lease, wakeups: wakeups,
		tiers: tiers, cfg: cfg, metrics: metrics, log: log, now: time.Now,
	}
}

// BatchResult says what one dispatch batch did.
type BatchResult struct {
	Claimed    int
	Dispatched int
	Released   int
	Failed     int
	// Full is true when the batch claimed as many items as it could, so
	// more work is likely waiting and the loop should not sleep.
	Full bool
}

// Run dispatches until ctx ends: on every wake-up, on every poll tick, and
// back to back while batches come back full. Errors are logged and retried
// on the next cycle; the loop never dies of them.
func (d *Dispatcher) Run(ctx context.Context) {
	if !d.cfg.Enabled {
		d.log.Info("dispatcher disabled by configuration")
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.runMaintenance(ctx)
	}()
	defer wg.Wait()

	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	for {
		full := d.cycle(ctx)
		if ctx.Err() != nil {
			d.releaseQueueLease()
			return
		}
		if full {
			continue
		}
		select {
		case <-ctx.Done():
			d.releaseQueueLease()
			return
		case <-poll.C:
		case <-d.wakeups.C():
		}
	}
}

func (d *Dispatcher) cycle(ctx context.Context) (full bool) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("dispatch cycle panicked", "panic", fmt.Sprint(r))
			full = false
		}
	}()
	if d.cfg.Exclusive {
		held, err := d.holdQueueLease(ctx)
		d.recordLease(held, err)
		if err != nil {
			d.metrics.LeaseFailures.Inc()
			d.log.Error("acquiring queue lease failed", "lease", QueueLeaseName, "error", err)
			return false
		}
		if !held {
			d.metrics.LeaseFailures.Inc()
			d.log.Debug("queue lease held elsewhere", "lease", QueueLeaseName)
			return false
		}
	}
	res, err := d.DispatchBatch(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Error("dispatch batch failed; retrying next cycle", "error", err)
		}
		return false
	}
	return res.Full
}

// holdQueueLease takes the lease, or extends it once a quarter of its term
// has passed, so a dispatcher that keeps working keeps it.
func (d *Dispatcher) holdQueueLease(ctx context.Context) (bool, error) {
	if !d.leaseRenewedAt.IsZero() && d.now().Sub(d.leaseRenewedAt) < QueueLeaseAtMostFor/4 {
		return true, nil
	}
	held, err := d.lease.TryAcquire(ctx, QueueLeaseName, QueueLeaseAtMostFor)
	if err != nil || !held {
		d.leaseRenewedAt = time.Time{}
		return false, err
	}
	if d.leaseRenewedAt.IsZero() {
		d.log.Info("queue lease acquired", "lease", QueueLeaseName)
	}
	d.leaseRenewedAt = d.now()
	return true, nil
}

func (d *Dispatcher) releaseQueueLease() {
	if d.leaseRenewedAt.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.lease.Release(ctx, QueueLeaseName, QueueLeaseAtLeastFor); err != nil {
		d.log.Warn("releasing queue lease failed", "error", err)
	}
	d.leaseRenewedAt = time.Time{}
	d.metrics.leaseHeld(QueueLeaseName, false)
}

// DispatchBatch claims one batch, starts its workflows and records each
// outcome. The claim commits before any Temporal call, and no transaction is
// open while Temporal is called.
func (d *Dispatcher) DispatchBatch(ctx context.Context) (BatchResult, error) {
	started := d.now()
	claim, claimSpan, err := d.claim(ctx)
	if err != nil {
		return BatchResult{}, fmt.Errorf("claim: %w", err)
	}
	d.metrics.AtCapacity.Add(float64(claim.AtCapacity))
	d.metrics.refused(claim.Refused)
	if claim.Failed > 0 {
		d.metrics.Failed.WithLabelValues(ReasonMissingReference).Add(float64(claim.Failed))
	}
	res := BatchResult{Claimed: len(claim.Claimed), Failed: claim.Failed, Full: len(claim.Claimed) >= d.cfg.BatchSize}
	if len(claim.Claimed) == 0 {
		return res, nil
	}
	d.metrics.BatchSize.Observe(float64(len(claim.Claimed)))
	d.log.Debug("processing queue items", "batch_size", len(claim.Claimed))

	errs := d.startAll(ctx, claim.Claimed, claimSpan)
	var ok []ports.DispatchedItem
	var failed []ports.QueueTransition
	for i, item := range claim.Claimed {
		if errs[i] == nil {
			ok = append(ok, ports.DispatchedItem{ID: item.ID, ExecutionID: item.ExecutionID})
			d.metrics.FailuresPerItem.Observe(float64(item.DispatchFailures))
			continue
		}
		d.log.Error("failed to start temporal workflow", "queue_item_id", item.ID, "execution_id", item.ExecutionID,
			"attempt_count", item.AttemptCount, "dispatch_failures", item.DispatchFailures+1, "error", errs[i])
		t, err := d.releaseAfterError(item, errs[i])
		if err != nil {
			d.log.Error("error processing queue item", "queue_item_id", item.ID, "error", err)
			continue
		}
		failed = append(failed, t)
		reason := startFailureReason(errs[i])
		if t.To.Status == domain.QueueFailed {
			res.Failed++
			d.metrics.Failed.WithLabelValues("dispatch_attempts_exhausted").Inc()
			d.metrics.dispatchFailed(reason, OutcomeFailed, item.WorkspaceID.String())
			d.metrics.FailuresPerItem.Observe(float64(t.To.DispatchFailures))
		} else {
			res.Released++
			d.metrics.dispatchFailed(reason, OutcomeReleased, item.WorkspaceID.String())
		}
	}
	if len(ok) > 0 {
		recs, err := d.store.MarkDispatched(context.WithoutCancel(ctx), ok)
		if err != nil {
			// The workflows run; stale recovery will find them started and
			// mark their items DISPATCHED.
			return res, fmt.Errorf("mark dispatched: %w", err)
		}
		res.Dispatched = len(recs)
		d.metrics.Dispatched.Add(float64(len(recs)))
		for _, r := range recs {
			d.metrics.Latency.Observe(r.DispatchedAt.Sub(r.CreatedAt).Seconds())
			d.log.Info("dispatched execution", "queue_item_id", r.ID)
		}
	}
	if len(failed) > 0 {
		if _, err := d.store.ApplyTransitions(context.WithoutCancel(ctx), failed); err != nil {
			return res, fmt.Errorf("release failed dispatches: %w", err)
		}
	}
	d.metrics.Duration.Observe(d.now().Sub(started).Seconds())
	return res, nil
}

// admit turns the workspaces' locked counts into claim quotas: each
// workspace gets at most its free slots, handed out one at a time in
// round-robin order from after the workspace served first last time, until
// the batch is full. A workspace at capacity gets nothing, so its backlog
// never stands in front of anyone else's items.
func (d *Dispatcher) admit(workspaces []ports.PendingWorkspace) map[domain.ID]int {
	sort.Slice(workspaces, func(i, j int) bool { return bytes.Compare(workspaces[i].ID[:], workspaces[j].ID[:]) < 0 })
	start := sort.Search(len(workspaces), func(i int) bool {
		return bytes.Compare(workspaces[i].ID[:], d.lastServed[:]) > 0
	})
	free := make([]int, len(workspaces))
	for i, w := range workspaces {
		free[i] = d.freeSlots(w)
	}
	quotas := map[domain.ID]int{}
	budget := d.cfg.BatchSize
	first := true
	for budget > 0 {
		progressed := false
		for k := 0; k < len(workspaces) && budget > 0; k++ {
			i := (start + k) % len(workspaces)
			if free[i] == 0 {
				continue
			}
			if first {
				d.lastServed = workspaces[i].ID
				first = false
			}
			free[i]--
			quotas[workspaces[i].ID]++
			budget--
			progressed = true
		}
		if !progressed {
			break
		}
	}
	return quotas
}

// freeSlots asks the tier policy how many more executions the workspace
// may start now.
func (d *Dispatcher) freeSlots(w ports.PendingWorkspace) int {
	adm, err := d.tiers.Admit(w.Plan, len(w.Running), false)
	if err != nil {
		d.log.Error("workspace has an unknown plan; not admitting", "workspace_id", w.ID, "plan", w.Plan, "error", err)
		return 0
	}
	if !adm.Admitted {
		d.log.Debug("workspace at capacity", "workspace_id", w.ID, "active_count", len(w.Running), "tier_limit", adm.Limit)
		return 0
	}
	return adm.Limit - len(w.Running)
}

// startAll starts the claimed items' workflows concurrently, bounded by
// StartConcurrency, and returns each item's error.
func (d *Dispatcher) startAll(ctx context.Context, items []ports.ClaimedItem, claimSpan trace.SpanContext) []error {
	errs := make([]error, len(items))
	sem := make(chan struct{}, max(1, d.cfg.StartConcurrency))
	var wg sync.WaitGroup
	for i, item := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.log.Info("dispatching queue item", "queue_item_id", item.ID, "workflow_definition_id", item.DefinitionID,
				"execution_id", item.ExecutionID)
			ctx, span := d.startSpan(ctx, item, claimSpan)
			defer func() { endStartSpan(span, errs[i]) }()
			ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
			defer cancel()
			errs[i] = d.engine.StartWorkflow(ctx, ports.WorkflowStart{
				ExecutionID:  item.ExecutionID,
				WorkspaceID:  item.WorkspaceID,
				DefinitionID: item.DefinitionID,
				Version:      item.Version,
				Input:        item.Input,
				Plan:         item.Plan,
				Graph:        item.Graph,
			})
		}()
	}
	wg.Wait()
	return errs
}

// releaseAfterError computes the item's next state after a failed start
// with the domain state machine: back to PENDING after a backoff, or FAILED
// at the last allowed attempt. Its execution row goes either way, freeing
// the slot; the execution id stays on the item so a retry reuses it.
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

// Reconcile finds RUNNING executions whose workflow is closed or missing
// in Temporal (terminated outside Sluice, say), records their real final
// status and frees their slots. Executions whose item is still CLAIMED are
// stale recovery's business and are not returned by the store.
func (d *Dispatcher) Reconcile(ctx context.Context) (int, error) {
	running, err := d.store.RunningStartedBefore(ctx, d.cfg.ReconcileAfter, 500)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range running {
		state, err := d.engine.DescribeWorkflow(ctx, e.ID)
		if err != nil {
			d.log.Warn("cannot describe execution's workflow", "execution_id", e.ID, "error", err)
			continue
		}
		status, msg, closed := finalStatus(state)
		if !closed {
			continue
		}
		var errMsg *string
		if msg != "" {
			errMsg = &msg
		}
		found, err := d.executions.FinishExecution(ctx, e.ID, status, errMsg)
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
