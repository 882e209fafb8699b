package apptest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// CheckBuilt checks what queue.NewItem gives every item: a time-ordered id
// (UUIDv7), the defaults filled, and the key resolved over the input with
// its limit and rate.
func CheckBuilt(t testing.TB, way string, e ports.ItemToEnqueue, key string, c *domain.Concurrency, priority int) {
	t.Helper()
	if v := uuid.UUID(e.ID).Version(); v != 7 {
		t.Errorf("%s: the item's id is a UUID v%d, want v7 (minted in order)", way, v)
	}
	if e.ConcurrencyKey == nil || *e.ConcurrencyKey != key || e.ConcurrencyLimit != c.Limit || e.ConcurrencyRate != c.StartRate {
		t.Errorf("%s: key %v limit %d rate %v, want %q, %d, %v", way, e.ConcurrencyKey, e.ConcurrencyLimit, e.ConcurrencyRate, key, c.Limit, c.StartRate)
	}
	if e.Priority != priority || len(e.Input) == 0 {
		t.Errorf("%s: priority %d input %q, want priority %d and an input", way, e.Priority, e.Input, priority)
	}
}
