package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// TestAllowListEntriesPerWorkspaceAreBoundedUnderRacingPuts: twenty
// concurrent puts of distinct entries to a workspace bounded at 5 leave
// exactly 5 on its list; putting an entry already there at the bound
// still answers on; an entry for any type and one for a type of the same
// queue are two entries; another workspace is not counted against it;
// deleting an entry not there is ErrNotFound.
func TestAllowListEntriesPerWorkspaceAreBoundedUnderRacingPuts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := postgres.NewStore(pgtest.Pool(t), slog.New(slog.DiscardHandler))
	ws, other := newOutboundWorkspace(t, store), newOutboundWorkspace(t, store)
	const bound = 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	on := 0
	for i := range 20 {
		wg.Go(func() {
			got, err := store.PutAllowListEntry(ctx, ws, domain.AllowListEntry{TaskQueue: fmt.Sprintf("q%02d", i)}, bound)
			if err != nil {
				t.Error(err)
			}
			if got {
				mu.Lock()
				on++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	entries, err := store.AllowListEntries(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != bound || on != bound {
		t.Fatalf("%d entries stored, %d puts answered on, want %d each", len(entries), on, bound)
	}
	if got, err := store.PutAllowListEntry(ctx, ws, entries[0], bound); err != nil || !got {
		t.Errorf("putting an entry already there at the bound: %v, %v; want on", got, err)
	}
	if got, err := store.PutAllowListEntry(ctx, other, domain.AllowListEntry{TaskQueue: "q00"}, bound); err != nil || !got {
		t.Errorf("another workspace's first entry: %v, %v", got, err)
	}
	if got, err := store.PutAllowListEntry(ctx, other, domain.AllowListEntry{TaskQueue: "q00", WorkflowType: "T"}, bound); err != nil || !got {
		t.Errorf("a typed entry beside an untyped one: %v, %v", got, err)
	}
	mine, err := store.AllowListEntries(ctx, other)
	if want := []domain.AllowListEntry{{TaskQueue: "q00"}, {TaskQueue: "q00", WorkflowType: "T"}}; err != nil || !slices.Equal(mine, want) {
		t.Errorf("the other workspace's list: %v, %v; want %v", mine, err, want)
	}
	if err := store.DeleteAllowListEntry(ctx, other, domain.AllowListEntry{TaskQueue: "q00", WorkflowType: "T"}); err != nil {
		t.Errorf("deleting the typed entry: %v", err)
	}
	if err := store.DeleteAllowListEntry(ctx, other, domain.AllowListEntry{TaskQueue: "q00", WorkflowType: "T"}); !errors.Is(err, ports.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	if _, err := store.PutAllowListEntry(ctx, domain.ID(uuid.New()), domain.AllowListEntry{TaskQueue: "q"}, bound); !errors.Is(err, ports.ErrNotFound) {
		t.Errorf("putting on no workspace: %v, want ErrNotFound", err)
	}
}
