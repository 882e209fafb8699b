package usecases

import (
	"context"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// AllowLists are the admin's use cases of the workspaces' allow-lists:
// which task queues, and optionally which workflow types, a workspace's
// TEMPORAL_WORKFLOW nodes may start. Sluice's own task queues are never
// allowed.
type AllowLists struct {
	lists      ports.AllowLists
	workspaces ports.WorkspaceStore
	reserved   domain.ReservedTaskQueues
}

// NewAllowLists builds the allow-list use cases; reserved are Sluice's
// own task queues.
func NewAllowLists(lists ports.AllowLists, workspaces ports.WorkspaceStore, reserved domain.ReservedTaskQueues) *AllowLists {
	return &AllowLists{lists: lists, workspaces: workspaces, reserved: reserved}
}

// List shows a workspace's allow-list; admin only.
func (s *AllowLists) List(ctx context.Context, a domain.Actor, workspaceID domain.ID) ([]domain.AllowListEntry, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	return s.lists.AllowListEntries(ctx, workspaceID)
}

// Put adds an entry to a workspace's allow-list (idempotent); admin only.
// An entry naming one of Sluice's own queues or a name that is not a
// literal Temporal name is refused (domain.CheckAllowListEntry), and so is
// one past domain.MaxAllowListEntries.
func (s *AllowLists) Put(ctx context.Context, a domain.Actor, workspaceID domain.ID, e domain.AllowListEntry) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	if err := domain.CheckAllowListEntry(e, s.reserved); err != nil {
		return err
	}
	if _, err := s.workspaces.GetWorkspace(ctx, workspaceID); err != nil {
		return err
	}
	on, err := s.lists.PutAllowListEntry(ctx, workspaceID, e, domain.MaxAllowListEntries)
	if err != nil {
		return err
	}
	if !on {
		return &domain.QuotaError{Quota: "allow-list entries", Limit: domain.MaxAllowListEntries}
	}
	return nil
}

// Delete removes an entry from a workspace's allow-list; admin only. Runs
// already started keep their children; a TEMPORAL_WORKFLOW that starts
// after it fails, naming the rule.
func (s *AllowLists) Delete(ctx context.Context, a domain.Actor, workspaceID domain.ID, e domain.AllowListEntry) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	return s.lists.DeleteAllowListEntry(ctx, workspaceID, e)
}
