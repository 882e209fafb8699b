package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// queueLeaseBundle is a queue lease on a fake ShedLock table, its signals
// ready to wait on.
type queueLeaseBundle struct {
	lease   *QueueLease
	shed    *apptest.Lease
	metrics *LeaseMetrics
}

func setupQueueLease(t *testing.T) *queueLeaseBundle {
	t.Helper()
	shed := apptest.NewLease()
	m := NewLeaseMetrics(prometheus.NewRegistry())
	// A short term makes the heartbeat beat every 10 ms; the tests wait on
	// its signals, not on its period.
	l := NewQueueLease(shed, 50*time.Millisecond, m, discardLog())
	l.testSignals.gained.Init()
	l.testSignals.kept.Init()
	l.testSignals.denied.Init()
	l.testSignals.failed.Init()
	l.testSignals.released.Init()
	return &queueLeaseBundle{lease: l, shed: shed, metrics: m}
}

// run starts the heartbeat; the returned stop ends it and waits.
func (b *queueLeaseBundle) run(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.lease.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func (b *queueLeaseBundle) heldGauge() float64 {
	return testutil.ToFloat64(b.metrics.Held.WithLabelValues(QueueLeaseName))
}

func TestQueueLease(t *testing.T) {
	t.Parallel()

	t.Run("NotReadyBeforeTheFirstAttempt", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		if err := b.lease.Ready(); !errors.Is(err, ErrLeaseNotTried) {
			t.Errorf("Ready before any attempt = %v, want ErrLeaseNotTried", err)
		}
	})

	t.Run("HeldUntilEndsTheTermCountedFromTheAttemptAndTermNumbersCountTakeovers", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		before := time.Now()
		b.run(t)
		b.lease.testSignals.gained.Wait(t, "the lease gained")
		until, after := b.lease.HeldUntil(b.lease.Fence().Term), time.Now()
		if until.Before(before.Add(b.lease.ttl)) || until.After(after.Add(b.lease.ttl)) {
			t.Errorf("HeldUntil %s, want one term after the attempt, between %s and %s", until, before.Add(b.lease.ttl), after.Add(b.lease.ttl))
		}
		if n := b.lease.TermNumber(); n != 1 {
			t.Errorf("term number %d after the first takeover, want 1", n)
		}
		term := b.lease.Fence().Term
		b.shed.SetOther(QueueLeaseName, true)
		b.lease.testSignals.denied.Wait(t, "the lease taken by another")
		if until := b.lease.HeldUntil(term); !until.IsZero() {
			t.Errorf("HeldUntil %s once another holder took the lease, want zero", until)
		}
		b.shed.SetOther(QueueLeaseName, false)
		b.lease.testSignals.gained.Wait(t, "the lease gained again")
		if n := b.lease.TermNumber(); n != 2 {
			t.Errorf("term number %d after taking the lease back, want 2", n)
		}
	})

	t.Run("ARenewalOfItsOwnExpiredLeaseIsANewTermInWhichTheOldTermsStartsAreNotMade", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		b.lease.beat(context.Background())
		b.lease.testSignals.gained.Wait(t, "the lease gained")
		first := b.lease.Fence().Term
		b.lease.beat(context.Background())
		b.lease.testSignals.kept.Wait(t, "the lease renewed while live")
		if term := b.lease.Fence().Term; !term.Equal(first) || b.lease.TermNumber() != 1 {
			t.Fatalf("a renewal of a live lease gave term %s, number %d; want the same term %s, number 1", term, b.lease.TermNumber(), first)
		}
		// Paused past the term: nobody took the lease, but it expired, so
		// a peer may have settled the term's claims already.
		b.shed.Table().Expire(QueueLeaseName)
		b.lease.beat(context.Background())
		b.lease.testSignals.gained.Wait(t, "the expired lease renewed")
		b.lease.testSignals.kept.RequireNone(t, "the expired lease renewed as the same term")
		second := b.lease.Fence().Term
		if second.IsZero() || second.Equal(first) || b.lease.TermNumber() != 2 {
			t.Fatalf("after renewing its own expired lease: term %s (first %s), term number %d; want a new term, number 2", second, first, b.lease.TermNumber())
		}
		if until := b.lease.HeldUntil(first); !until.IsZero() {
			t.Errorf("HeldUntil of the ended term %s, want zero: none of its starts may be made", until)
		}
		if until := b.lease.HeldUntil(second); until.IsZero() {
			t.Error("HeldUntil of the new term is zero, want its end")
		}
		if !b.lease.Holding() {
			t.Error("not holding the lease it renewed")
		}
	})

	t.Run("ARegistrationLeaseIsNamedAfterItsHolder", func(t *testing.T) {
		t.Parallel()
		shed := apptest.NewLease()
		m := NewLeaseMetrics(prometheus.NewRegistry())
		l := NewRegistrationLease(shed, 50*time.Millisecond, m, discardLog())
		if want := RegistrationLeaseName(shed.Holder()); l.Fence() != (ports.Fence{Lease: want, Holder: shed.Holder()}) || want == RegistrationLeaseName("another") {
			t.Fatalf("registration fence %+v, want lease %q of its own", l.Fence(), want)
		}
		if n := len(RegistrationLeaseName(strings.Repeat("h", 300))); n > 64 {
			t.Errorf("registration lease name of %d characters, want it to fit shedlock.name (64)", n)
		}
		l.testSignals.gained.Init()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		l.testSignals.gained.Wait(t, "the registration taken")
		if got := testutil.ToFloat64(m.Held.WithLabelValues(registrationLeaseLabel)); got != 1 {
			t.Errorf("dispatcher_lease_held{lease=%q} = %v, want 1", registrationLeaseLabel, got)
		}
	})

	t.Run("TakesAFreeLeaseAndWakesTheClaimLoop", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		b.run(t)
		b.lease.testSignals.gained.Wait(t, "the lease gained")
		if !b.lease.Holding() {
			t.Error("not holding after gaining the lease")
		}
		select {
		case <-b.lease.Gained():
		default:
			t.Error("gaining the lease did not wake the claim loop")
		}
		if err := b.lease.Ready(); err != nil {
			t.Errorf("holder not ready: %v", err)
		}
		if got := b.heldGauge(); got != 1 {
			t.Errorf("dispatcher_lease_held = %v for the holder, want 1", got)
		}
		b.lease.testSignals.kept.Wait(t, "the lease renewed")
		b.lease.testSignals.gained.RequireNone(t, "second gain while holding")
	})

	t.Run("StandbyIsReadyButDoesNotHold", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		b.shed.SetOther(QueueLeaseName, true)
		b.run(t)
		b.lease.testSignals.denied.Wait(t, "the lease denied")
		b.lease.testSignals.denied.Wait(t, "the lease denied again")
		if b.lease.Holding() {
			t.Error("holding a lease held elsewhere")
		}
		if err := b.lease.Ready(); err != nil {
			t.Errorf("a standby whose lease is held elsewhere is not ready: %v", err)
		}
		if got := b.heldGauge(); got != 0 {
			t.Errorf("dispatcher_lease_held = %v for a standby, want 0", got)
		}
		if got := testutil.ToFloat64(b.metrics.Failures); got < 2 {
			t.Errorf("shedlock_acquisition_failures = %v after two denials, want at least 2", got)
		}
	})

	t.Run("TakenOverStopsHolding", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		b.run(t)
		b.lease.testSignals.gained.Wait(t, "the lease gained")
		b.shed.SetOther(QueueLeaseName, true)
		b.lease.testSignals.denied.Wait(t, "the lease denied")
		if b.lease.Holding() {
			t.Error("still holding after another dispatcher took the lease")
		}
	})

	t.Run("FailedQueryIsNotReadyAndHoldsOnlyUntilTheTermRunsOut", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		now := time.Now()
		b.lease.now = func() time.Time { return now }
		b.lease.beat(context.Background())
		b.lease.testSignals.gained.Wait(t, "the lease gained")
		b.shed.SetFail(errors.New("connection refused"))
		b.lease.beat(context.Background())
		if err := b.lease.testSignals.failed.Wait(t, "the failed attempt"); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("the failed attempt signalled %v, want the lease query's error", err)
		}
		if err := b.lease.Ready(); err == nil {
			t.Error("ready although the lease query failed")
		}
		if !b.lease.Holding() {
			t.Error("gave up a lease whose term has not run out by our clock")
		}
		now = now.Add(b.lease.ttl)
		b.lease.beat(context.Background())
		if err := b.lease.testSignals.failed.Wait(t, "the second failed attempt"); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("the second failed attempt signalled %v, want the lease query's error", err)
		}
		if b.lease.Holding() {
			t.Error("still holding a lease whose term ran out")
		}
	})

	t.Run("StopReleasesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		stop := b.run(t)
		b.lease.testSignals.gained.Wait(t, "the lease gained")
		stop()
		b.lease.testSignals.released.Wait(t, "the lease released")
		rel := b.shed.Released()
		if len(rel) != 1 || rel[0] != (apptest.Release{Name: QueueLeaseName}) {
			t.Errorf("releases = %+v, want the queue lease released with no lock-at-least-for", rel)
		}
		if got := b.heldGauge(); got != 0 {
			t.Errorf("dispatcher_lease_held = %v after stop, want 0", got)
		}
	})

	t.Run("StandbyStopsWithoutReleasing", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		b.shed.SetOther(QueueLeaseName, true)
		stop := b.run(t)
		b.lease.testSignals.denied.Wait(t, "the lease denied")
		stop()
		if rel := b.shed.Released(); len(rel) != 0 {
			t.Errorf("a standby released %+v, another holder's lease", rel)
		}
	})

	t.Run("LostClaimStopsHolding", func(t *testing.T) {
		t.Parallel()
		b := setupQueueLease(t)
		b.lease.beat(context.Background())
		b.lease.testSignals.gained.Wait(t, "the lease gained")
		before := testutil.ToFloat64(b.metrics.Failures)
		b.lease.Lost()
		if b.lease.Holding() {
			t.Error("still holding after a claim found the lease lost")
		}
		if got := testutil.ToFloat64(b.metrics.Failures); got != before+1 {
			t.Errorf("shedlock_acquisition_failures = %v, want %v", got, before+1)
		}
	})
}

func TestFakeLeaseKeepsTheLeaseContract(t *testing.T) {
	t.Parallel()
	porttest.Lease(t, func(*testing.T) porttest.LeaseFixture {
		table := apptest.NewLease().Table()
		return porttest.LeaseFixture{
			One: table.View("one"), Two: table.View("two"),
			Expire: func(_ *testing.T, name string) { table.Expire(name) },
		}
	})
}
