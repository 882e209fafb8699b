package worker

import (
	"context"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// AllowList is the workspace's list as the rule reads it, with Sluice's
// own queues reserved: what a TEMPORAL_WORKFLOW checks before its child
// starts, and what the API checks a definition against when it is saved.
func AllowList(ctx context.Context, lists ports.AllowLists, reserved domain.ReservedTaskQueues, workspaceID domain.ID) (domain.AllowList, error) {
	l := domain.AllowList{Reserved: reserved}
	if lists == nil {
		return l, nil
	}
	entries, err := lists.AllowListEntries(ctx, workspaceID)
	l.Entries = entries
	return l, err
}

// WithAllowLists lets runs' TEMPORAL_WORKFLOW nodes start what their
// workspace's allow-list permits, never one of reserved, Sluice's own
// queues; without it every TEMPORAL_WORKFLOW fails.
func WithAllowLists(lists ports.AllowLists, reserved domain.ReservedTaskQueues) RunsOption {
	return func(r *Runs) { r.allowLists, r.reserved = lists, reserved }
}

// AllowList reads the workspace's allow-list now, Sluice's own queues
// reserved: what a run checks the TEMPORAL_WORKFLOW nodes it starts at
// once against (domain.AllowList.Refusal), with its admission.
func (r *Runs) AllowList(ctx context.Context, workspaceID domain.ID) (domain.AllowList, error) {
	return AllowList(ctx, r.allowLists, r.reserved, workspaceID)
}

// TemporalWorkflowRefusal reads the workspace's allow-list now and
// returns why it does not permit workflowType on queue
// (domain.AllowList.Refusal), "" when it does: the check a
// TEMPORAL_WORKFLOW makes before its child starts, since the list may
// have changed since the definition was saved.
func (r *Runs) TemporalWorkflowRefusal(ctx context.Context, workspaceID domain.ID, queue, workflowType string) (string, error) {
	l, err := r.AllowList(ctx, workspaceID)
	if err != nil {
		return "", err
	}
	return l.Refusal(queue, workflowType), nil
}
