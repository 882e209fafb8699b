package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/ports"
)

// fencingStore is a fakeStore whose claims are fenced as the Postgres
// store's are (the LeaseFence query): the fence's lease must be live and
// its holder's in the lease table, in the fence's term when it names one.
type fencingStore struct {
	*fakeStore
	leases *apptest.LeaseTable
}

func (s *fencingStore) Claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	if fence.Fenced() {
		holder, term, live := s.leases.Row(fence.Lease)
		if !live || holder != fence.Holder || (!fence.Term.IsZero() && !term.Equal(fence.Term)) {
			return ports.ClaimResult{}, ports.ErrLeaseLost
		}
		fence.Term = term
	}
	return s.fakeStore.Claim(ctx, fence, budget, plan, reject)
}

// A dispatch batch claims only while the lease's heartbeat holds the lease
// in a term it knows, and fenced by that term: what the lease table says
// is not enough, since a claim the heartbeat does not know to be in a term
// of its own is one whose starts it will refuse (HeldUntil), leaving its
// items CLAIMED for a peer to settle.
func TestDispatchBatchClaimsNothingWithoutTheLeaseHeld(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// lose leaves the lease the table's and this holder's, but not the
		// heartbeat's.
		lose func(t *testing.T, b *queueLeaseBundle)
	}{
		{"TheHeartbeatNeverLearnedItTookTheLease", func(t *testing.T, b *queueLeaseBundle) {
			// A TryAcquire that committed but whose answer was lost.
			if _, held, _ := b.shed.Table().Acquire(QueueLeaseName, b.shed.Holder()); !held {
				t.Fatal("the fake table refused a free lease")
			}
		}},
		{"TheHeartbeatsRenewalsFailedForATerm", func(t *testing.T, b *queueLeaseBundle) {
			b.lease.beat(context.Background())
			b.lease.testSignals.gained.Wait(t, "the lease gained")
			b.shed.SetFail(errors.New("connection refused"))
			b.lease.now = func() time.Time { return time.Now().Add(b.lease.ttl) }
			b.lease.beat(context.Background())
			_ = b.lease.testSignals.failed.Wait(t, "a failed renewal")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setupQueueLease(t)
			c.lose(t, b)
			if b.lease.Holding() {
				t.Fatal("the heartbeat holds the lease; the case is wrong")
			}
			store := &fencingStore{fakeStore: &fakeStore{queued: 1}, leases: b.shed.Table()}
			d := newTestDispatcher(store, okEngine{}, b.lease, nil, DefaultDispatcherConfig())
			res, err := d.DispatchBatch(context.Background())
			if claims, _ := store.counts(); claims != 0 || res.Claimed != 0 {
				t.Fatalf("%d claims made, %d items claimed while the heartbeat did not hold the lease; want none", claims, res.Claimed)
			}
			if !errors.Is(err, ErrLeaseNotHeld) {
				t.Errorf("DispatchBatch without the lease = %v, want ErrLeaseNotHeld", err)
			}
		})
	}
}
