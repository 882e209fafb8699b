package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Lease names and default durations. The queue lease is short and renewed
// by a heartbeat, so a dispatcher that dies hands dispatch over within one
// lease term; the recovery lease keeps ShedLock's terms, since recovery
// running a minute late harms nothing.
const (
	QueueLeaseName          = "processExecutionQueue"
	QueueLeaseTTL           = 10 * time.Second
	RecoveryLeaseName       = "recoverStaleQueueItems"
	RecoveryLeaseAtMostFor  = 2 * time.Minute
	RecoveryLeaseAtLeastFor = 30 * time.Second
)

// DispatcherConfig tunes the dispatcher.
type DispatcherConfig struct {
	// Enabled turns the engine off without removing the module.
	Enabled bool
	// BatchSize is the smallest batch one admission transaction claims:
	// the batch while the queue is shallow, which keeps a lone item's wait
	// short.
	BatchSize int
	// MaxBatchSize caps the batch. A batch that comes back full doubles
	// the next one up to this cap, and one that does not returns to
	// BatchSize, so the batch follows the backlog.
	MaxBatchSize int
	// PollInterval is the fallback cadence when no wake-up arrives.
	PollInterval time.Duration
	// Exclusive makes one dispatcher at a time hold the
	// processExecutionQueue lease and dispatch. Without it several dispatch
	// at once, which is as exact, because admission locks each workspace
	// and starts are idempotent; see the README for the trade-off.
	Exclusive bool
	// LeaseTTL is the queue lease's term. The holder renews it every fifth
	// of a term and others try as often, so a dead holder's lease passes on
	// within about LeaseTTL * 6/5.
	LeaseTTL time.Duration
	// StartConcurrency bounds the Temporal starts in flight per batch.
	StartConcurrency int
	// StartTimeout bounds one Temporal start, so an unreachable server
	// costs a failed attempt instead of a hung loop.
	StartTimeout time.Duration
	// BreakerBackoff spaces the probes of an unavailable Temporal: the
	// first after Base, doubling to Max.
	BreakerBackoff domain.DispatchBackoff
	// StaleAfter is how long an item may stay CLAIMED before recovery.
	StaleAfter time.Duration
	// RecoveryInterval is how often stale recovery and the reconciler run.
	RecoveryInterval time.Duration
	// ReconcileAfter is the minimum age of a RUNNING execution before the
	// reconciler asks Temporal about it.
	ReconcileAfter time.Duration
	// ReconcilePageSize is how many RUNNING executions the reconciler
	// checks per cycle; it walks through all of them over successive
	// cycles.
	ReconcilePageSize int
	// Backoff spaces out dispatch retries; its Base is at least PollInterval.
	Backoff domain.DispatchBackoff
	// RecoveryLeaseAtMostFor and RecoveryLeaseAtLeastFor are the
	// recoverStaleQueueItems lease's ShedLock terms. A holder that dies
	// keeps recovery away for up to AtMostFor.
	RecoveryLeaseAtMostFor  time.Duration
	RecoveryLeaseAtLeastFor time.Duration
}

// DefaultDispatcherConfig returns the defaults: batches from 10, a 5 s
// fallback poll (LISTEN/NOTIFY wakes the dispatcher sooner), a 5 min stale
// threshold checked every 60 s, and a 10 s queue lease.
func DefaultDispatcherConfig() DispatcherConfig {
	return DispatcherConfig{
		Enabled:           true,
		BatchSize:         10,
		MaxBatchSize:      200,
		PollInterval:      5 * time.Second,
		Exclusive:         true,
		LeaseTTL:          QueueLeaseTTL,
		StartConcurrency:  16,
		StartTimeout:      10 * time.Second,
		BreakerBackoff:    domain.DispatchBackoff{Base: time.Second, Max: 30 * time.Second},
		StaleAfter:        5 * time.Minute,
		RecoveryInterval:  time.Minute,
		ReconcileAfter:    time.Minute,
		ReconcilePageSize: 500,
		Backoff:           domain.DispatchBackoff{Base: 5 * time.Second, Max: 5 * time.Minute},

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
	breaker    *breaker

	// lastServed is the workspace the previous batch started its
	// round-robin after, so that no workspace is always first.
	lastServed domain.ID
	// batchSize is the next batch's size, between BatchSize and
	// MaxBatchSize.
	batchSize int
	// leaseHeld says the heartbeat holds the queue lease; the claim's fence
	// is what makes acting on it safe.
	leaseHeld atomic.Bool
	// leaseGained wakes the loop when the heartbeat takes the lease over.
	leaseGained chan struct{}
	// leaseRenewedAt is when the heartbeat last took or renewed the lease;
	// only the heartbeat touches it.
	leaseRenewedAt time.Time
	// unsettled are claimed items whose start or marking could not be
	// finished (Temporal or Postgres away); every cycle tries to settle
	// them before claiming more. Stale recovery covers them if this
	// process dies.
	unsettled []unsettledItem
	// reconcileAfter is where the reconciler's walk resumes.
	reconcileAfter ports.ExecutionCursor
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

// unsettledItem is a claimed item whose fate the dispatcher still owes.
type unsettledItem struct {
	item ports.ClaimedItem
	// started is true when Temporal accepted the start; otherwise whether
	// it did is unknown until DescribeWorkflow answers.
	started bool
}

// NewDispatcher builds a Dispatcher.
func NewDispatcher(store ports.DispatchStore, executions ports.ExecutionStore, engine ports.WorkflowEngine, lease ports.Lease,
	wakeups ports.Wakeups, tiers domain.TierPolicy, cfg DispatcherConfig, metrics *DispatchMetrics, log *slog.Logger) *Dispatcher {
	if cfg.MaxBatchSize < cfg.BatchSize {
		cfg.MaxBatchSize = cfg.BatchSize
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = QueueLeaseTTL
	}
	if cfg.ReconcilePageSize <= 0 {
		cfg.ReconcilePageSize = 500
	}
	if cfg.BreakerBackoff.Base <= 0 {
		cfg.BreakerBackoff = DefaultDispatcherConfig().BreakerBackoff
	}
	return &Dispatcher{
		store: store, executions: executions, engine: engine, lease: lease, wakeups: wakeups,
		tiers: tiers, cfg: cfg, metrics: metrics, log: log, now: time.Now,
		breaker: newBreaker(cfg.BreakerBackoff, metrics), batchSize: cfg.BatchSize, leaseGained: make(chan struct{}, 1),
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

// Ready reports whether the dispatcher can dispatch: an error while the
// circuit breaker holds dispatch back because Temporal is unavailable.
// Readiness probes call it.
func (d *Dispatcher) Ready() error {
	return d.breaker.err()
}

// Run dispatches until ctx ends: on every wake-up, on every poll tick, and
// back to back while batches come back full. Errors are logged and retried
// on the next cycle; the loop never dies of them. In exclusive mode a
// heartbeat holds the queue lease beside the loop and releases it at once
// when ctx ends.
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
	if d.cfg.Exclusive {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.runLease(ctx)
		}()
	}
	defer wg.Wait()

	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	probe := time.NewTimer(time.Hour)
	defer probe.Stop()
	for {
		full := d.cycle(ctx)
		if ctx.Err() != nil {
			return
		}
		if full {
			continue
		}
		if at, open := d.breaker.nextProbe(); open {
			probe.Reset(max(0, at.Sub(d.now())))
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-d.wakeups.C():
		case <-d.leaseGained:
		case <-probe.C:
		}
	}
}

// cycle runs one turn of the loop: probe Temporal if the breaker is open,
// settle what earlier cycles left unsettled, then claim and dispatch a
// batch. It reports whether the batch came back full.
func (d *Dispatcher) cycle(ctx context.Context) (full bool) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("dispatch cycle panicked", "panic", fmt.Sprint(r))
			full = false
		}
	}()
	if !d.probeEngine(ctx) {
		return false
	}
	d.settle(ctx)
	if !d.breaker.closed() {
		return false
	}
	if d.cfg.Exclusive && !d.leaseHeld.Load() {
		return false
	}
	res, err := d.DispatchBatch(ctx)
	switch {
	case errors.Is(err, ports.ErrLeaseLost):
		d.leaseHeld.Store(false)
		d.metrics.LeaseFailures.Inc()
		d.log.Warn("queue lease lost before the claim; not dispatching", "lease", QueueLeaseName)
		return false
	case err != nil:
		if ctx.Err() == nil {
			d.log.Error("dispatch batch failed; retrying next cycle", "error", err)
		}
		return false
	}
	return res.Full
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

// probeEngine asks an unavailable Temporal whether it is back, once its
// backoff has passed. It reports whether dispatch may go on.
func (d *Dispatcher) probeEngine(ctx context.Context) bool {
	at, open := d.breaker.nextProbe()
	if !open {
		return true
	}
	if d.now().Before(at) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	if err := d.engine.CheckHealth(pctx); err != nil {
		d.breaker.trip(d.now(), err)
		d.log.Warn("temporal still unavailable; dispatch stays paused", "error", err)
		return false
	}
	d.breaker.reset()
	d.log.Info("temporal reachable again; dispatch resumes")
	return true
}

// fence is what the claim must still hold: the queue lease in exclusive
// mode, nothing otherwise.
func (d *Dispatcher) fence() ports.Fence {
	if !d.cfg.Exclusive {
		return ports.Fence{}
	}
	return ports.Fence{Lease: QueueLeaseName, Holder: d.lease.Holder()}
}

// runLease is the queue lease's heartbeat: it takes the lease when free and
// renews it while held, every fifth of its term, and releases it at once
// when ctx ends, so a graceful stop hands dispatch over without waiting
// out the term.
func (d *Dispatcher) runLease(ctx context.Context) {
	every := max(d.cfg.LeaseTTL/5, 10*time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		d.beatLease(ctx)
		select {
		case <-ctx.Done():
			d.releaseQueueLease()
			return
		case <-tick.C:
		}
	}
}

// beatLease is one heartbeat: take or renew the queue lease and record
// what happened.
func (d *Dispatcher) beatLease(ctx context.Context) {
	held, err := d.lease.TryAcquire(ctx, QueueLeaseName, d.cfg.LeaseTTL)
	if ctx.Err() != nil {
		return
	}
	d.recordLease(held, err)
	switch {
	case err != nil:
		d.metrics.LeaseFailures.Inc()
		d.log.Error("renewing queue lease failed", "lease", QueueLeaseName, "error", err)
		// Our own clock says when the lease certainly ran out; the claim's
		// fence catches anything sooner.
		if d.now().Sub(d.leaseRenewedAt) >= d.cfg.LeaseTTL {
			d.leaseHeld.Store(false)
		}
	case held:
		d.leaseRenewedAt = d.now()
		if !d.leaseHeld.Swap(true) {
			d.log.Info("queue lease acquired", "lease", QueueLeaseName)
			select {
			case d.leaseGained <- struct{}{}:
			default:
			}
		}
	default:
		d.metrics.LeaseFailures.Inc()
		if d.leaseHeld.Swap(false) {
			d.log.Warn("queue lease taken over by another dispatcher", "lease", QueueLeaseName)
		}
	}
}

func (d *Dispatcher) releaseQueueLease() {
	if !d.leaseHeld.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.lease.Release(ctx, QueueLeaseName, 0); err != nil {
		d.log.Warn("releasing queue lease failed", "error", err)
	}
	d.metrics.leaseHeld(QueueLeaseName, false)
}

// DispatchBatch claims one batch, starts its workflows and records each
// outcome. The claim commits before any Temporal call, and no transaction is
// open while Temporal is called. A start that failed because Temporal is
// unavailable counts nothing against its item: whether it started is
// resolved with DescribeWorkflow, the breaker opens, and an item whose
// fate stays unknown is kept CLAIMED, holding its slot, until it is known.
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
	res := BatchResult{Claimed: len(claim.Claimed), Failed: claim.Failed, Full: len(claim.Claimed) >= d.batchSize}
	d.adaptBatch(res.Full)
	if len(claim.Claimed) == 0 {
		return res, nil
	}
	d.metrics.BatchSize.Observe(float64(len(claim.Claimed)))
	d.log.Debug("processing queue items", "batch_size", len(claim.Claimed))

	errs := d.startAll(ctx, claim.Claimed, claimSpan)
	var ok []ports.ClaimedItem
	var unknown []unsettledItem
	var failed []ports.QueueTransition
	for i, item := range claim.Claimed {
		switch {
		case errs[i] == nil:
			ok = append(ok, item)
			d.metrics.FailuresPerItem.Observe(float64(item.DispatchFailures))
			continue
		case errors.Is(errs[i], ports.ErrEngineUnavailable):
			d.breaker.trip(d.now(), errs[i])
			unknown = append(unknown, unsettledItem{item: item})
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
	if len(unknown) > 0 {
		d.log.Warn("temporal unavailable; pausing dispatch", "unresolved_items", len(unknown), "error", d.breaker.err())
		started, released, stillUnknown := d.resolve(ctx, unknown)
		ok = append(ok, started...)
		failed = append(failed, released...)
		res.Released += len(released)
		d.unsettled = append(d.unsettled, stillUnknown...)
	}
	if len(ok) > 0 {
		n, err := d.markDispatched(ctx, ok)
		res.Dispatched = n
		if err != nil {
			for _, item := range ok {
				d.unsettled = append(d.unsettled, unsettledItem{item: item, started: true})
			}
			return res, fmt.Errorf("mark dispatched: %w", err)
		}
	}
	if len(failed) > 0 {
		if err := d.applyReleases(ctx, failed); err != nil {
			return res, fmt.Errorf("release failed dispatches: %w", err)
		}
	}
	d.metrics.Duration.Observe(d.now().Sub(started).Seconds())
	return res, nil
}

// resolve asks Temporal whether items whose start failed for want of
// Temporal did start after all: those that did are returned as started,
// those Temporal has never seen are released without counting a failure,
// and those it cannot answer for stay unknown.
func (d *Dispatcher) resolve(ctx context.Context, items []unsettledItem) (started []ports.ClaimedItem, released []ports.QueueTransition, unknown []unsettledItem) {
	for _, u := range items {
		if u.started {
			started = append(started, u.item)
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
		state, err := d.engine.DescribeWorkflow(dctx, u.item.ExecutionID)
		cancel()
		switch {
		case err != nil:
			if errors.Is(err, ports.ErrEngineUnavailable) {
				d.breaker.trip(d.now(), err)
			}
			unknown = append(unknown, u)
		case state == ports.WorkflowNotFound:
			next := u.item.QueueState
			if err := next.ReleaseUnstarted("not started: temporal was unavailable"); err != nil {
				d.log.Error("error releasing unstarted queue item", "queue_item_id", u.item.ID, "error", err)
				continue
			}
			exec := u.item.ExecutionID
			released = append(released, ports.QueueTransition{
				ID: u.item.ID, FromStatus: u.item.Status, FromClaimedAt: u.item.ClaimedAt, To: next, DropExecution: &exec,
			})
		default:
			started = append(started, u.item)
		}
	}
	return started, released, unknown
}

// settle finishes what earlier cycles could not: items whose start is
// unresolved or whose marking failed.
func (d *Dispatcher) settle(ctx context.Context) {
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
				d.unsettled = append(d.unsettled, unsettledItem{item: item, started: true})
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

// markDispatched marks started items DISPATCHED. An item no longer in its
// claim was either settled by stale recovery or cancelled meanwhile; a
// cancelled one's workflow, which should not run, is cancelled.
func (d *Dispatcher) markDispatched(ctx context.Context, items []ports.ClaimedItem) (int, error) {
	req := make([]ports.DispatchedItem, len(items))
	for i, it := range items {
		req[i] = ports.DispatchedItem{ID: it.ID, ExecutionID: it.ExecutionID}
	}
	recs, err := d.store.MarkDispatched(context.WithoutCancel(ctx), req)
	if err != nil {
		return 0, err
	}
	d.metrics.Dispatched.Add(float64(len(recs)))
	for _, r := range recs {
		d.metrics.Latency.Observe(r.DispatchedAt.Sub(r.CreatedAt).Seconds())
		d.log.Info("dispatched execution", "queue_item_id", r.ID)
	}
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
		d.cancelWithdrawn(ctx, missed, true)
	}
	return len(recs), nil
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

// cancelWithdrawn handles claimed items that were cancelled while this
// dispatcher worked on them: a started workflow is asked to cancel (it
// records CANCELLED itself), an unstarted one's execution is recorded
// CANCELLED at once.
func (d *Dispatcher) cancelWithdrawn(ctx context.Context, items []ports.ClaimedItem, started bool) {
	ids := make([]domain.ID, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	statuses, err := d.store.QueueStatuses(ctx, ids)
	if err != nil {
		d.log.Warn("cannot read the status of items that moved on during dispatch", "error", err)
		return
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
		if _, err := finishExecution(ctx, d.executions, d.log, it.ExecutionID, domain.ExecutionCancelled, msg); err != nil {
			d.log.Error("recording a cancelled item's execution failed", "queue_item_id", it.ID, "error", err)
		}
	}
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
			startCtx, span := d.startSpan(ctx, item, claimSpan)
			defer func() { endStartSpan(span, errs[i]) }()
			startCtx, cancel := context.WithTimeout(startCtx, d.cfg.StartTimeout)
			defer cancel()
			errs[i] = d.engine.StartWorkflow(startCtx, ports.WorkflowStart{
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
