package porttest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/ports"
)

// LeaseFixture is an implementation of ports.Lease under test: two
// holders' clients on one lease table, and a way to let a lease run out.
type LeaseFixture struct {
	One, Two ports.Lease
	// Expire makes the named lease run out now, as the end of its term
	// would, whoever holds it.
	Expire func(t *testing.T, name string)
}

// Lease runs the contract of ports.Lease's terms against the fixture
// newFixture builds, a fresh one per case: a holder's renewal keeps the
// term only while the lease is live, so that a holder paused past its
// term, which renews its own lease on waking, does so in a new term.
func Lease(t *testing.T, newFixture func(t *testing.T) LeaseFixture) {
	ctx := context.Background()
	const ttl = time.Minute
	acquire := func(t *testing.T, l ports.Lease, name string, want bool) time.Time {
		t.Helper()
		term, held, err := l.TryAcquire(ctx, name, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if held != want {
			t.Fatalf("%s: held %v, want %v", l.Holder(), held, want)
		}
		if held == term.IsZero() {
			t.Fatalf("%s: held %v with term %s; want a term exactly when held", l.Holder(), held, term)
		}
		return term
	}

	t.Run("ARenewalOfALiveLeaseKeepsItsTerm", func(t *testing.T) {
		t.Parallel()
		f, name := newFixture(t), uuid.NewString()
		first := acquire(t, f.One, name, true)
		if again := acquire(t, f.One, name, true); !again.Equal(first) {
			t.Errorf("renewed in term %s, want the term it holds, %s", again, first)
		}
	})

	t.Run("ARenewalOfItsOwnExpiredLeaseStartsANewTerm", func(t *testing.T) {
		t.Parallel()
		f, name := newFixture(t), uuid.NewString()
		first := acquire(t, f.One, name, true)
		f.Expire(t, name)
		if again := acquire(t, f.One, name, true); again.Equal(first) {
			t.Errorf("its own expired lease renewed in the same term %s, want a new one: the old term's claims may be settled already", first)
		}
	})

	t.Run("ALiveLeaseIsRefusedToAnotherHolderAndAnExpiredOneTakenInANewTerm", func(t *testing.T) {
		t.Parallel()
		f, name := newFixture(t), uuid.NewString()
		first := acquire(t, f.One, name, true)
		acquire(t, f.Two, name, false)
		f.Expire(t, name)
		if taken := acquire(t, f.Two, name, true); taken.Equal(first) {
			t.Errorf("taken over in the term %s it had, want a new one", first)
		}
		acquire(t, f.One, name, false)
	})

	t.Run("AReleasedLeaseIsTakenBackInANewTerm", func(t *testing.T) {
		t.Parallel()
		f, name := newFixture(t), uuid.NewString()
		first := acquire(t, f.One, name, true)
		if err := f.One.Release(ctx, name, 0); err != nil {
			t.Fatal(err)
		}
		if again := acquire(t, f.One, name, true); again.Equal(first) {
			t.Errorf("taken back after its release in the same term %s, want a new one", first)
		}
	})
}
