package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ports"
)

// QueueLeaseName and QueueLeaseTTL name the exclusive dispatcher's lease
// and its default term. The term is short and renewed by a heartbeat, so a
// dispatcher that dies hands dispatch over within one term.
const (
	QueueLeaseName = "processExecutionQueue"
	QueueLeaseTTL  = 10 * time.Second
)

// ErrLeaseNotTried means the queue lease has not been tried yet.
var ErrLeaseNotTried = errors.New("queue lease not tried yet")

// QueueLease holds the lease a dispatcher claims under: the
// processExecutionQueue lease for an exclusive dispatcher, or its own
// registration lease (RegistrationLease) for one that dispatches beside
// others. Run takes it when free, renews it every fifth of its term while
// held, and releases it at once when its context ends, so a graceful stop
// hands dispatch over without waiting out the term. Holding tells the
// claim loop when to claim; what makes the claim safe is its fence, which
// the claim transaction checks and share-locks, so a holder paused past
// its term cannot claim, and which the claim's marking checks again, so
// such a holder cannot mark either: the claims of an ended term are the
// next holder's to settle.
type QueueLease struct {
	name string
	// label is the name in metrics, the same for every registration lease
	// so that the label stays bounded.
	label   string
	lease   ports.Lease
	ttl     time.Duration
	metrics *LeaseMetrics
	log     *slog.Logger
	now     func() time.Time

	// holding is what the heartbeat last concluded: the lease is ours.
	holding atomic.Bool
	// gained wakes the claim loop when the heartbeat takes the lease.
	gained chan struct{}
	// renewedAt is when the heartbeat last took or renewed the lease; only
	// the heartbeat touches it.
	renewedAt time.Time
	// tenures counts the times the heartbeat took the lease over, so the
	// claim loop can tell a new tenure from the one it last saw.
	tenures atomic.Uint64

	// mu guards tried and lastErr, what the last attempt found, for
	// readiness, and heldUntil.
	mu      sync.Mutex
	tried   bool
	lastErr error
	// heldUntil is when the lease certainly runs out unless renewed: the
	// term from the moment the last successful attempt was sent. The
	// database's lock_until is later still, since it counts the term from
	// the database's now(), so no other holder can take over before it.
	heldUntil time.Time

	testSignals queueLeaseSignals
}

// queueLeaseSignals are the heartbeat's events, for tests to wait on.
type queueLeaseSignals struct {
	gained   testSignal[struct{}] // took the lease
	kept     testSignal[struct{}] // renewed a lease it held
	denied   testSignal[struct{}] // found it held elsewhere
	failed   testSignal[error]    // could not ask
	released testSignal[struct{}] // let it go on stop
}

// NewQueueLease builds the queue lease's holder on lease; ttl is its term
// (QueueLeaseTTL when not positive).
func NewQueueLease(lease ports.Lease, ttl time.Duration, metrics *LeaseMetrics, log *slog.Logger) *QueueLease {
	return newDispatchLease(QueueLeaseName, QueueLeaseName, lease, ttl, metrics, log)
}

// NewRegistrationLease builds the registration lease of a dispatcher that
// dispatches beside others: a lease of its own (RegistrationLeaseName),
// held as the queue lease is, which it claims under. Nobody else takes it,
// so it lapses only when this dispatcher stops renewing it (dead, or
// paused past its term), and then the other dispatchers settle its claims.
func NewRegistrationLease(lease ports.Lease, ttl time.Duration, metrics *LeaseMetrics, log *slog.Logger) *QueueLease {
	return newDispatchLease(RegistrationLeaseName(lease.Holder()), registrationLeaseLabel, lease, ttl, metrics, log)
}

// RegistrationLeaseName names a non-exclusive dispatcher's registration
// lease after its holder, hashed to fit shedlock.name, behind
// RegistrationLeasePrefix.
func RegistrationLeaseName(holder string) string {
	sum := sha256.Sum256([]byte(holder))
	return RegistrationLeasePrefix + hex.EncodeToString(sum[:8])
}

// RegistrationLeasePrefix starts every registration lease's name. Stale
// recovery deletes the expired ones, so the lease table holds about one
// row per live dispatcher, not one per process ever started.
const RegistrationLeasePrefix = "dispatcher-"

// registrationLeaseLabel is every registration lease's name in metrics.
const registrationLeaseLabel = "dispatcherRegistration"

func newDispatchLease(name, label string, lease ports.Lease, ttl time.Duration, metrics *LeaseMetrics, log *slog.Logger) *QueueLease {
	if ttl <= 0 {
		ttl = QueueLeaseTTL
	}
	return &QueueLease{name: name, label: label, lease: lease, ttl: ttl, metrics: metrics, log: log, now: time.Now, gained: make(chan struct{}, 1)}
}

// Run is the heartbeat: it tries the lease at once and then every fifth of
// its term until ctx ends, and then releases it if held.
func (l *QueueLease) Run(ctx context.Context) {
	tick := time.NewTicker(max(l.ttl/5, 10*time.Millisecond))
	defer tick.Stop()
	for {
		l.beat(ctx)
		select {
		case <-ctx.Done():
			l.release()
			return
		case <-tick.C:
		}
	}
}

// Holding reports whether the heartbeat holds the lease.
func (l *QueueLease) Holding() bool { return l.holding.Load() }

// Gained delivers a signal when the heartbeat takes the lease over, so
// the claim loop need not wait for its poll.
func (l *QueueLease) Gained() <-chan struct{} { return l.gained }

// Fence is what a claim must still hold to act: this holder's lease.
func (l *QueueLease) Fence() ports.Fence {
	return ports.Fence{Lease: l.name, Holder: l.lease.Holder()}
}

// HeldUntil is when the lease certainly runs out unless renewed, by this
// process's clock; the zero time when it is not held. Work done under the
// lease whose effect no transaction can fence (a Temporal start) is done
// only before it, and with it as its deadline, so none lands after another
// holder took over and settled the claims of this term.
func (l *QueueLease) HeldUntil() time.Time {
	if !l.holding.Load() {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heldUntil
}

// Tenure counts the times the heartbeat took the lease over; it changes
// exactly when a new tenure begins.
func (l *QueueLease) Tenure() uint64 { return l.tenures.Load() }

// Lost records that a claim found the lease gone (ports.ErrLeaseLost):
// another dispatcher took it while the heartbeat still believed it ours.
// The loop stops claiming until the heartbeat takes it again.
func (l *QueueLease) Lost() {
	l.holding.Store(false)
	l.metrics.Failures.Inc()
	l.log.Warn("queue lease lost before the claim; not dispatching", "lease", l.name)
}

// Ready reports whether this dispatcher can take part in the lease: nil
// when the last attempt held it or saw it held elsewhere (a standby is
// ready to take over), that attempt's error when it failed, and
// ErrLeaseNotTried before the first.
func (l *QueueLease) Ready() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.tried {
		return ErrLeaseNotTried
	}
	return l.lastErr
}

// beat is one heartbeat: take or renew the lease and record what happened.
func (l *QueueLease) beat(ctx context.Context) {
	asked := l.now()
	held, err := l.lease.TryAcquire(ctx, l.name, l.ttl)
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	l.tried, l.lastErr = true, err
	if err == nil {
		l.heldUntil = time.Time{}
		if held {
			l.heldUntil = asked.Add(l.ttl)
		}
	}
	l.mu.Unlock()
	l.metrics.setHeld(l.label, held && err == nil)
	switch {
	case err != nil:
		l.metrics.Failures.Inc()
		l.log.Error("renewing queue lease failed", "lease", l.name, "error", err)
		// Our own clock says when the lease certainly ran out; the claim's
		// fence catches anything sooner.
		if l.now().Sub(l.renewedAt) >= l.ttl {
			l.holding.Store(false)
		}
		l.testSignals.failed.signal(err)
	case held:
		l.renewedAt = l.now()
		if l.holding.Swap(true) {
			l.testSignals.kept.signal(struct{}{})
			return
		}
		l.tenures.Add(1)
		l.log.Info("queue lease acquired", "lease", l.name)
		select {
		case l.gained <- struct{}{}:
		default:
		}
		l.testSignals.gained.signal(struct{}{})
	default:
		l.metrics.Failures.Inc()
		if l.holding.Swap(false) {
			l.log.Warn("queue lease taken over by another dispatcher", "lease", l.name)
		}
		l.testSignals.denied.signal(struct{}{})
	}
}

// release lets the lease go, if held, with a context of its own: the run's
// has ended.
func (l *QueueLease) release() {
	if !l.holding.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.lease.Release(ctx, l.name, 0); err != nil {
		l.log.Warn("releasing queue lease failed", "error", err)
	}
	l.metrics.setHeld(l.label, false)
	l.testSignals.released.signal(struct{}{})
}
