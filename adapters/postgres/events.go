package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
)

// AcceptEvent notes an event for a waiting node (see ports.EventStore).
func (s *Store) AcceptEvent(ctx context.Context, executionID domain.ID, name, nodeKey string, bytes int, check func(taken int) error) (bool, error) {
	accepted := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.q.EventRunLock(ctx, tx, executionID); errors.Is(err, pgx.ErrNoRows) {
			return nil
		} else if err != nil {
			return err
		}
		taken, err := s.q.EventBytesTaken(ctx, tx, executionID)
		if err != nil {
			return err
		}
		if err = check(int(taken)); err != nil {
			return err
		}
		_, err = s.q.EventAccept(ctx, tx, dbsqlc.EventAcceptParams{ExecutionID: executionID, Name: name, NodeKey: nodeKey, Bytes: int32(bytes)})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		accepted = err == nil
		return err
	})
	return accepted, err
}

// ForgetEvent takes back an accepted event (see ports.EventStore).
func (s *Store) ForgetEvent(ctx context.Context, executionID domain.ID, name string) error {
	return s.q.EventForget(ctx, s.pool, dbsqlc.EventForgetParams{ExecutionID: executionID, Name: name})
}
