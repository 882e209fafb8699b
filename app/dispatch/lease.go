package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/app/internal/testsignal"
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
// next holder's to settle. A holder that renews its own lease after it
// expired gets a new term from the database, and a new TermNumber: the
// old term's claims stay the peer's (or its own settling's), and no start
// of theirs is made under the new term (HeldUntil).
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
	// terms counts the terms the heartbeat has held the lease in
	// (TermNumber).
	terms atomic.Uint64

	// mu guards tried and lastErr, what the last attempt found, for
	// readiness, and term and heldUntil.
	mu      sync.Mutex
	tried   bool
	lastErr error
	// term is the lease's term (its locked_at) as the heartbeat last took
	// or kept it; zero once another holder has it.
	term time.Time
	// heldUntil is when the lease certainly runs out unless renewed: the
	// term from the moment the last successful attempt was sent. The
	// database's lock_until is later still, since it counts the term from
	// the database's now(), so no other holder can take over before it.
	heldUntil time.Time

	testSignals queueLeaseSignals
}

// queueLeaseSignals are the heartbeat's events, for tests to wait on.
type queueLeaseSignals struct {
	gained   testsignal.Signal[struct{}] // took the lease
	kept     testsignal.Signal[struct{}] // renewed a lease it held
	denied   testsignal.Signal[struct{}] // found it held elsewhere
	failed   testsignal.Signal[error]    // could not ask
	released testsignal.Signal[struct{}] // let it go on stop
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

// Fence is what a claim must still hold to act: this holder's lease, in
// the term the heartbeat knows, so that a claim is never stamped with a
// term that began behind the loop's back.
func (l *QueueLease) Fence() ports.Fence {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenceLocked()
}

// fenceLocked is Fence with mu held.
func (l *QueueLease) fenceLocked() ports.Fence {
	return ports.Fence{Lease: l.name, Holder: l.lease.Holder(), Term: l.term}
}

// claimFence is the fence a claim is made under and the number of the term
// to, read together; held is false, and nothing may be claimed, unless the
// heartbeat holds the lease in a term it knows. The store's fence would
// refuse most claims made otherwise, but not all: a zero term accepts
// whatever term the table holds (one whose taking the heartbeat never
// heard of), and a heartbeat that let the lease go after a term of failed
// renewals may still find it live in the table.
func (l *QueueLease) claimFence() (fence ports.Fence, termNumber uint64, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.holding.Load() || l.term.IsZero() {
		return ports.Fence{}, 0, false
	}
	return l.fenceLocked(), l.terms.Load(), true
}

// HeldUntil is when the lease's term term certainly runs out unless
// renewed, by this process's clock; the zero time when the lease is not
// held, or is held in another term. A Temporal start of a claim is made
// only before the end of the claim's own term and with it as its
// deadline: once the term ended (even if this holder has since renewed
// the lease as a new one), a peer may have asked Temporal about the claim
// and released it. What a start that left before that lands after it
// does is decided by the run's admission (ports.ExecutionStore.AdmitRun).
func (l *QueueLease) HeldUntil(term time.Time) time.Time {
	if !l.holding.Load() {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if term.IsZero() || !l.term.Equal(term) {
		return time.Time{}
	}
	return l.heldUntil
}

// TermNumber counts the terms the heartbeat has held the lease in: the
// times it took the lease, or found it in a new term. It changes exactly
// when a new term begins, so the claim loop can tell a term from the one
// it last saw without comparing database times.
func (l *QueueLease) TermNumber() uint64 { return l.terms.Load() }

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
	term, held, err := l.lease.TryAcquire(ctx, l.name, l.ttl)
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	l.tried, l.lastErr = true, err
	newTerm := false
	if err == nil {
		l.heldUntil, newTerm = time.Time{}, held && !term.Equal(l.term)
		if !held {
			term = time.Time{}
		} else {
			l.heldUntil = asked.Add(l.ttl)
		}
		l.term = term
	}
	// A new term's number is counted with the term and the holding, under
	// mu, so that claimFence reads a term with its own number.
	wasHolding, began := false, false
	if err == nil && held {
		wasHolding = l.holding.Swap(true)
		if began = !wasHolding || newTerm; began {
			l.terms.Add(1)
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
		l.testSignals.failed.Send(err)
	case held:
		l.renewedAt = l.now()
		if !began {
			l.testSignals.kept.Send(struct{}{})
			return
		}
		if wasHolding {
			// Our own lease ran out before this renewal (the process was
			// paused, or the database unreachable) and the renewal began a
			// new term: the old one's claims are settled as an ended
			// term's, by a peer or by this loop.
			l.log.Warn("queue lease expired before it was renewed; holding it in a new term", "lease", l.name)
		} else {
			l.log.Info("queue lease acquired", "lease", l.name)
		}
		select {
		case l.gained <- struct{}{}:
		default:
		}
		l.testSignals.gained.Send(struct{}{})
	default:
		l.metrics.Failures.Inc()
		if l.holding.Swap(false) {
			l.log.Warn("queue lease taken over by another dispatcher", "lease", l.name)
		}
		l.testSignals.denied.Send(struct{}{})
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
	l.testSignals.released.Send(struct{}{})
}
