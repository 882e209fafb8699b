package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
)

// AcceptEvent notes an event for a waiting node (see ports.EventStore).
func (s *Store) AcceptEvent(ctx context.Context, executionID domain.ID, name, nodeKey string) (bool, error) {
	_, err := s.q.EventAccept(ctx, s.pool, dbsqlc.EventAcceptParams{ExecutionID: executionID, Name: name, NodeKey: nodeKey})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ForgetEvent takes back an accepted event (see ports.EventStore).
func (s *Store) ForgetEvent(ctx context.Context, executionID domain.ID, name string) error {
	return s.q.EventForget(ctx, s.pool, dbsqlc.EventForgetParams{ExecutionID: executionID, Name: name})
}
