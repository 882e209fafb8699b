package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// DispatcherConfig tunes the dispatcher role: its claim loop, its queue
// lease, its breaker and its maintenance jobs' thresholds.
type DispatcherConfig struct {
	// Enabled turns the role off without removing the module.
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
	// and starts are idempotent; see docs/operations.md for the trade-off.
	Exclusive bool
	// LeaseTTL is the queue lease's term. The holder renews it every fifth
	// of a term and others try as often, so a dead holder's lease passes on
	// within about LeaseTTL * 6/5.
	LeaseTTL time.Duration
	// StartConcurrency is the floor of the Temporal starts in flight,
	// those of the batch being started and of the one claimed behind it
	// together, and where their limit starts. The limit adapts between it
	// and MaxStartConcurrency to Temporal's answers (domain.StartLimit): it
	// rises while starts are answered as fast as ever, so a server a round
	// trip away gets as many in flight as it answers, and falls when starts
	// slow down or time out. Slowing down is what a server or its workers
	// falling behind look like: the surplus waits in Temporal's matching as
	// a backlog, which the server writes and reads back, so more in flight
	// is then less done (see docs/benchmarks.md, "Where a run's time goes").
	StartConcurrency int
	// MaxStartConcurrency is the ceiling of the starts in flight; equal to
	// StartConcurrency, it fixes the limit there.
	MaxStartConcurrency int
	// StartTimeout bounds one Temporal start, so an unreachable server
	// costs a failed attempt instead of a hung loop.
	StartTimeout time.Duration
	// BreakerBackoff spaces the probes of an unavailable Temporal: the
	// first after Base, doubling to Max.
	BreakerBackoff domain.DispatchBackoff
	// StaleAfter is how long an item may stay CLAIMED before recovery.
	StaleAfter time.Duration
	// ReconcileAfter is the minimum age of a RUNNING execution before the
	// reconciler asks Temporal about it.
	ReconcileAfter time.Duration
	// StuckStartAfter is how long a started workflow may wait for a
	// worker to pick up its first task before the reconciler fails it
	// (maintenance.Reconciler.FailStuckStartsAfter); 0 never fails one.
	StuckStartAfter time.Duration
	// ReconcilePageSize is how many RUNNING executions the reconciler
	// checks per run; it walks through all of them over successive runs.
	ReconcilePageSize int
	// CloseWatchInterval is how often the reconciler looks for workflows
	// closed outside Sluice lately (maintenance.Reconciler.WatchClosed):
	// the most a run that Temporal terminated waits to be recorded and
	// free its slot.
	CloseWatchInterval time.Duration
	// Backoff spaces out dispatch retries; its Base is at least PollInterval.
	Backoff domain.DispatchBackoff
}

// DefaultDispatcherConfig returns the defaults: batches from 10, a 5 s
// fallback poll (LISTEN/NOTIFY wakes the dispatcher sooner), a 5 min stale
// threshold, and a 10 s queue lease.
func DefaultDispatcherConfig() DispatcherConfig {
	return DispatcherConfig{
		Enabled:             true,
		BatchSize:           10,
		MaxBatchSize:        200,
		PollInterval:        5 * time.Second,
		Exclusive:           true,
		LeaseTTL:            QueueLeaseTTL,
		StartConcurrency:    8,
		MaxStartConcurrency: 128,
		StartTimeout:        10 * time.Second,
		BreakerBackoff:      DefaultBreakerBackoff,
		StaleAfter:          5 * time.Minute,
		ReconcileAfter:      time.Minute,
		StuckStartAfter:     5 * time.Minute,
		ReconcilePageSize:   500,
		CloseWatchInterval:  5 * time.Second,
		Backoff:             domain.DispatchBackoff{Base: 5 * time.Second, Max: 5 * time.Minute},
	}
}

// DispatcherDeps are the ports and shared parts the claim loop works
// through.
type DispatcherDeps struct {
	Store      ports.DispatchStore
	Executions ports.ExecutionStore
	Engine     ports.WorkflowEngine
	Wakeups    ports.Wakeups
	// Lease is the queue lease in exclusive mode, whose heartbeat runs
	// beside the loop; nil when dispatchers claim side by side.
	Lease   *QueueLease
	Breaker *Breaker
	Metrics *Metrics
	// Tracer gives the claim and start spans; nil means the global
	// provider.
	Tracer trace.TracerProvider
	Log    *slog.Logger
	// Halt, for the fault suite only, is called at each FaultPoint of a
	// batch with items and may block there; nil in production.
	Halt func(FaultPoint)
}

// FaultPoint names a point of a dispatch batch where the fault suite halts
// the real binary, to kill or pause it there.
type FaultPoint string

const (
	// FaultAfterClaim is after the claim committed, before any start.
	FaultAfterClaim FaultPoint = "claimed"
	// FaultBeforeStart is in each start of the batch, before its lease
	// term is checked: the starts in flight that a pause holds there (the
	// batch's first, up to the start limit, the rest waiting for a slot)
	// check it only when resumed, after the term ended.
	FaultBeforeStart FaultPoint = "starting"
	// FaultAfterStart is after the batch's starts all returned, before
	// any of them is marked.
	FaultAfterStart FaultPoint = "started"
)

// Dispatcher is the claim loop: it admits queue items against their
// workspace's limit, starts their workflows and records the outcome.
type Dispatcher struct {
	store      ports.DispatchStore
	executions ports.ExecutionStore
	engine     ports.WorkflowEngine
	wakeups    ports.Wakeups
	lease      *QueueLease
	breaker    *Breaker
	metrics    *Metrics
	log        *slog.Logger
	cfg        DispatcherConfig
	admission  *admission
	// plan is the claim's planner, dealing by admission.
	plan   ports.PlanFunc
	tracer trace.Tracer
	now    func() time.Time

	// batchSize is the next batch's size, between BatchSize and
	// MaxBatchSize.
	batchSize int
	// unsettled are claimed items whose start or marking could not be
	// finished (Temporal or Postgres away); every cycle tries to settle
	// them before claiming more. Stale recovery covers them if this
	// process dies.
	unsettled []unsettledItem
	// takeover tracks the settling of ended lease terms' claims.
	takeover takeover
	halt     func(FaultPoint)
	// starts holds a slot per Temporal start in flight, up to the adaptive
	// start limit.
	starts *startGate
	// outcomes writes the outcomes of the loop's starts as they return.
	outcomes *outcomeWriter
	// launching is closed once every start of the last batch claimed
	// holds a slot of the start limit; nil before the first batch.
	launching <-chan struct{}
	// claimedTerm is the lease term number the last batch was claimed in.
	claimedTerm uint64
	// nextDue is how long after the last claim something it passed over
	// for a time (a start rate, a notBefore) may go; 0 for nothing.
	nextDue time.Duration
}

// minDueWait bounds below the loop's sleep until a claim's next due time,
// so a rate of thousands per second costs at most a hundred claims a
// second per dispatcher rather than a busy loop on the database.
const minDueWait = 10 * time.Millisecond

// NewDispatcher builds the claim loop.
func NewDispatcher(deps DispatcherDeps, cfg DispatcherConfig) *Dispatcher {
	if cfg.MaxBatchSize < cfg.BatchSize {
		cfg.MaxBatchSize = cfg.BatchSize
	}
	tp := deps.Tracer
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	d := &Dispatcher{
		store: deps.Store, executions: deps.Executions, engine: deps.Engine, wakeups: deps.Wakeups, lease: deps.Lease,
		breaker: deps.Breaker, metrics: deps.Metrics, log: deps.Log, cfg: cfg, admission: newAdmission(deps.Log),
		tracer: tp.Tracer(tracerName), now: time.Now, batchSize: cfg.BatchSize, halt: deps.Halt,
		starts:   newStartGate(cfg.StartConcurrency, cfg.MaxStartConcurrency, deps.Metrics.StartLimit),
		outcomes: newOutcomeWriter(),
	}
	d.plan = PlanClaim(d.admission.admit)
	return d
}

// Run dispatches until ctx ends: on every wake-up, on every poll tick, when
// the queue lease is gained, when the breaker's next probe is due, when
// the last claim said something it passed over comes due (a start rate's
// next start, a notBefore; no sooner than minDueWait), and
// back to back while batches come back full, and when outcomes written
// beside it left items unsettled or found Temporal unavailable. Errors are logged and retried on the
// next cycle; the loop never dies of them. Batches still starting when ctx
// ends are finished before Run returns.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.finishInFlight()
	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	probe := time.NewTimer(time.Hour)
	defer probe.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	var gained <-chan struct{}
	if d.lease != nil {
		gained = d.lease.Gained()
	}
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
		if d.nextDue > 0 {
			due.Reset(max(minDueWait, d.nextDue))
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-d.wakeups.C():
		case <-gained:
		case <-probe.C:
		case <-due.C:
		case <-d.outcomes.handed:
		}
	}
}

// cycle runs one turn of the loop: probe Temporal if the breaker is open,
// settle what earlier cycles left unsettled, then, holding the lease where
// one is needed, claim and dispatch a batch. It reports whether the batch
// came back full. It waits for no earlier batch's starts to return: their
// outcomes are written as they do (outcomeWriter), so the loop's pace is
// the claim's, and an item claimed now waits for no other batch's starts.
func (d *Dispatcher) cycle(ctx context.Context) (full bool) {
	defer func() {
		d.metrics.Cycles.Inc()
		if r := recover(); r != nil {
			d.log.Error("dispatch cycle panicked", "panic", fmt.Sprint(r))
			full = false
		}
	}()
	d.nextDue = 0
	if !d.probeEngine(ctx) {
		return false
	}
	d.settle(ctx)
	if !d.breaker.Closed() {
		return false
	}
	if d.lease != nil && !d.lease.Holding() {
		return false
	}
	// Batches from an earlier term of the lease are finished first: their
	// claims are now an ended term's, which settling would otherwise ask
	// Temporal about while their own starts are still going. Each batch
	// claimed waited for the one before it, so the last one's term is
	// the newest among them.
	if d.lease != nil && d.claimedTerm != d.lease.TermNumber() {
		d.finishInFlight()
	}
	if !d.settleEndedTerms(ctx) {
		return false
	}
	// The next claim waits until the last batch has all its starts under
	// way, so a claimed item waits for at most the starts in flight and
	// one batch's; the claim commits before any of its own starts, as
	// always. Earlier batches' outcomes are written beside the claim, on
	// connections of their own.
	if d.launching != nil {
		<-d.launching
	}
	b, err := d.claimBatch(ctx, true)
	switch {
	case errors.Is(err, ports.ErrLeaseLost) && d.lease != nil:
		d.lease.Lost()
		return false
	case errors.Is(err, ErrLeaseNotHeld):
		// The heartbeat let the lease go since the check above; it wakes
		// the loop when it takes it again.
		return false
	case err != nil:
		if ctx.Err() == nil {
			d.log.Error("dispatch batch failed; retrying next cycle", "error", err)
		}
		return false
	}
	if len(b.items) > 0 {
		d.launching, d.claimedTerm = b.launched, b.termNumber
	}
	return b.res.Full
}

// finishInFlight waits until the outcome of every start the loop made is
// written, and takes what they left unsettled.
func (d *Dispatcher) finishInFlight() {
	d.outcomes.unwritten.Wait()
	d.unsettled = append(d.unsettled, d.outcomes.take()...)
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
		d.breaker.Trip(d.now(), err)
		d.log.Warn("temporal still unavailable; dispatch stays paused", "error", err)
		return false
	}
	d.breaker.Reset()
	d.log.Info("temporal reachable again; dispatch resumes")
	return true
}
