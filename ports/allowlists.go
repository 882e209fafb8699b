package ports

import (
	"context"

	"github.com/sluicehq/sluice/domain"
)

// AllowLists keep each workspace's allow-list: the task queues, and
// optionally the workflow types, its TEMPORAL_WORKFLOW nodes may start.
type AllowLists interface {
	// AllowListEntries lists the workspace's entries, by task queue then
	// workflow type ("" first).
	AllowListEntries(ctx context.Context, workspaceID domain.ID) ([]domain.AllowListEntry, error)
	// PutAllowListEntry adds e to the workspace's list, unless it is
	// there already, when the list then holds at most limit entries; it
	// reports whether e is on the list afterwards (false: the list is
	// full).
	PutAllowListEntry(ctx context.Context, workspaceID domain.ID, e domain.AllowListEntry, limit int) (bool, error)
	// DeleteAllowListEntry removes e from the workspace's list;
	// ErrNotFound when it is not there.
	DeleteAllowListEntry(ctx context.Context, workspaceID domain.ID, e domain.AllowListEntry) error
}
