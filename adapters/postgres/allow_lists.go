package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

var _ ports.AllowLists = (*Store)(nil)

// AllowListEntries lists a workspace's allow-list.
func (s *Store) AllowListEntries(ctx context.Context, workspaceID domain.ID) ([]domain.AllowListEntry, error) {
	rows, err := s.q.AllowListEntries(ctx, s.pool, workspaceID)
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]domain.AllowListEntry, len(rows))
	for i, r := range rows {
		out[i] = domain.AllowListEntry{TaskQueue: r.TaskQueue}
		if r.WorkflowType != nil {
			out[i].WorkflowType = *r.WorkflowType
		}
	}
	return out, nil
}

// PutAllowListEntry adds e unless it is there, within limit entries,
// counted under the workspace's row lock so that racing puts cannot pass
// it together.
func (s *Store) PutAllowListEntry(ctx context.Context, workspaceID domain.ID, e domain.AllowListEntry, limit int) (bool, error) {
	on := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.q.AllowListLockWorkspace(ctx, tx, workspaceID); err != nil {
			return err
		}
		has, err := s.q.AllowListHas(ctx, tx, dbsqlc.AllowListHasParams{WorkspaceID: workspaceID, TaskQueue: e.TaskQueue, WorkflowType: nilIfBlank(e.WorkflowType)})
		if err != nil || has {
			on = has
			return err
		}
		n, err := s.q.AllowListCount(ctx, tx, workspaceID)
		if err != nil || int(n) >= limit {
			return err
		}
		on = true
		return s.q.AllowListInsert(ctx, tx, dbsqlc.AllowListInsertParams{WorkspaceID: workspaceID, TaskQueue: e.TaskQueue, WorkflowType: nilIfBlank(e.WorkflowType)})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ports.ErrNotFound
	}
	return on, interpretError(err)
}

// DeleteAllowListEntry removes e; ports.ErrNotFound when it is not there.
func (s *Store) DeleteAllowListEntry(ctx context.Context, workspaceID domain.ID, e domain.AllowListEntry) error {
	n, err := s.q.AllowListDelete(ctx, s.pool, dbsqlc.AllowListDeleteParams{WorkspaceID: workspaceID, TaskQueue: e.TaskQueue, WorkflowType: nilIfBlank(e.WorkflowType)})
	if err != nil {
		return interpretError(err)
	}
	if n == 0 {
		return ports.ErrNotFound
	}
	return nil
}
