package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
)

// TakeSubWorkflowNodes counts a starting child run's nodes against its
// execution's cap in one atomic update. It returns the nodes counted
// before this child and whether it fit; an execution that is gone is
// ports.ErrNotFound.
func (s *Store) TakeSubWorkflowNodes(ctx context.Context, executionID domain.ID, nodes, limit int) (int, bool, error) {
	after, err := s.q.ExecutionSubWorkflowNodesTake(ctx, s.pool, dbsqlc.ExecutionSubWorkflowNodesTakeParams{
		ID: executionID, Nodes: int32(nodes), Cap: int32(limit),
	})
	if err == nil {
		return int(after) - nodes, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, err
	}
	held, err := s.q.ExecutionSubWorkflowNodesGet(ctx, s.pool, executionID)
	if err != nil {
		return 0, false, interpretError(err)
	}
	return int(held), false, nil
}
