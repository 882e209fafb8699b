package porttest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// QueueStoreFixture is an implementation of ports.QueueStore under test,
// with what the suite needs to seed it.
type QueueStoreFixture struct {
	Store ports.QueueStore
	// NewWaitingItem stores a PENDING item that had to wait, so it carries
	// a LastError, and returns its id.
	NewWaitingItem func(t *testing.T) domain.ID
}

// QueueStore runs the contract of ports.QueueStore's per-item update
// against the fixture newFixture builds, a fresh one per case.
func QueueStore(t *testing.T, newFixture func(t *testing.T) QueueStoreFixture) {
	ctx := context.Background()

	t.Run("UpdateAnswersWithTheItemAsStored", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		id := f.NewWaitingItem(t)
		before, err := f.Store.GetQueueItem(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		answered, err := f.Store.UpdateQueueItem(ctx, id, func(q *domain.QueueItem) error { return q.Cancel() })
		if err != nil {
			t.Fatal(err)
		}
		stored, err := f.Store.GetQueueItem(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if answered.Status != domain.QueueCancelled || stored.Status != domain.QueueCancelled {
			t.Errorf("status answered %s, stored %s; want CANCELLED", answered.Status, stored.Status)
		}
		if before.LastError == "" || answered.LastError != before.LastError || stored.LastError != before.LastError {
			t.Errorf("last error before %q, answered %q, stored %q; want all the same, as Cancel keeps it",
				before.LastError, answered.LastError, stored.LastError)
		}
		if answered.AttemptCount != stored.AttemptCount || answered.DispatchFailures != stored.DispatchFailures {
			t.Errorf("counters answered %d/%d, stored %d/%d", answered.AttemptCount, answered.DispatchFailures, stored.AttemptCount, stored.DispatchFailures)
		}
	})

	t.Run("AnUpdateThatFailsWritesNothing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		id := f.NewWaitingItem(t)
		refused := errors.New("refused")
		_, err := f.Store.UpdateQueueItem(ctx, id, func(q *domain.QueueItem) error {
			if err := q.Cancel(); err != nil {
				return err
			}
			return refused
		})
		if !errors.Is(err, refused) {
			t.Fatalf("update: %v, want the closure's error as it is", err)
		}
		if q, err := f.Store.GetQueueItem(ctx, id); err != nil || q.Status != domain.QueuePending {
			t.Errorf("after a failed update the item is %s (%v), want PENDING", q.Status, err)
		}
	})

	t.Run("AnIllegalTransitionIsRefusedAsTheDomainSaysIt", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		id := f.NewWaitingItem(t)
		if _, err := f.Store.UpdateQueueItem(ctx, id, func(q *domain.QueueItem) error { return q.Cancel() }); err != nil {
			t.Fatal(err)
		}
		_, err := f.Store.UpdateQueueItem(ctx, id, func(q *domain.QueueItem) error { return q.Cancel() })
		if !errors.Is(err, domain.ErrIllegalTransition) {
			t.Errorf("cancelling twice: %v, want ErrIllegalTransition", err)
		}
	})

	t.Run("UpdatingAMissingItemIsNotFound", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		called := false
		_, err := f.Store.UpdateQueueItem(ctx, domain.ID(uuid.New()), func(*domain.QueueItem) error { called = true; return nil })
		if !errors.Is(err, ports.ErrNotFound) || called {
			t.Errorf("update of a missing item: %v, closure called %v; want ErrNotFound and no call", err, called)
		}
	})
}
