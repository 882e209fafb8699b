package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// EnqueueBatch writes a bulk enqueue in one transaction: the batch's keys
// in one statement, the owners of those already taken in one more, then,
// under the workspace's counter lock and after the quotas passed for the
// batch's new items together, every item and its audit row in one
// statement (QueueInsertBatch). Its cost per item is the rows it writes,
// not round trips.
func (s *Store) EnqueueBatch(ctx context.Context, b ports.EnqueueBatch) ([]ports.EnqueueResult, error) {
	out := make([]ports.EnqueueResult, len(b.Items))
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		replayed, err := s.claimBatchKeys(ctx, tx, b)
		if err != nil {
			return err
		}
		fresh := dbsqlc.QueueInsertBatchParams{
			WorkspaceID: b.WorkspaceID, WorkflowDefinitionID: b.DefinitionID, Actor: b.Actor.String(), TraceContext: traceParent(ctx),
		}
		fresh.ConcurrencyRate, fresh.ConcurrencyRatePer, fresh.ConcurrencyBurst = startRateToColumns(b.ConcurrencyRate)
		for i, it := range b.Items {
			if r, ok := replayed[i]; ok {
				out[i] = r
				continue
			}
			notBefore := time.Time{}
			if it.NotBefore != nil {
				notBefore = *it.NotBefore
			}
			fresh.Ids = append(fresh.Ids, it.ID)
			fresh.Inputs = append(fresh.Inputs, it.Input)
			fresh.Priorities = append(fresh.Priorities, int16(it.Priority))
			fresh.NotBefores = append(fresh.NotBefores, notBefore)
			fresh.IdempotencyKeys = append(fresh.IdempotencyKeys, it.IdempotencyKey)
			key, limit := "", int32(0)
			if it.ConcurrencyKey != nil {
				key, limit = *it.ConcurrencyKey, int32(it.ConcurrencyLimit)
			}
			fresh.ConcurrencyKeys = append(fresh.ConcurrencyKeys, key)
			fresh.ConcurrencyLimits = append(fresh.ConcurrencyLimits, limit)
		}
		if len(fresh.Ids) == 0 {
			return nil
		}
		wakeAfterCommit(tx, QueueChannel)
		stats, err := s.enqueueCounts(ctx, tx, b.WorkspaceID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if stats.Plan != nil {
			var quotas domain.PlanQuotas
			if quotas, err = s.workspaceQuotas(ctx, tx, b.WorkspaceID); err != nil {
				return err
			}
			if err = quotas.CheckEnqueue(int(stats.Pending), int(stats.Stored), int(stats.Executions), len(fresh.Ids)); err != nil {
				return err
			}
		}
		rows, err := s.q.QueueInsertBatch(ctx, tx, fresh)
		if err != nil {
			return interpretError(err)
		}
		if len(rows) != len(fresh.Ids) {
			return fmt.Errorf("bulk enqueue wrote %d of %d items", len(rows), len(fresh.Ids))
		}
		status := make(map[domain.ID]string, len(rows))
		for _, r := range rows {
			status[r.ID] = r.Status
		}
		for i, it := range b.Items {
			if _, ok := replayed[i]; ok {
				continue
			}
			st, err := domain.ParseQueueStatus(status[it.ID])
			if err != nil {
				return err
			}
			out[i] = ports.EnqueueResult{QueueID: it.ID, Status: st}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimBatchKeys claims the batch's idempotency keys and returns, by item
// index, the items whose key was already used for the same request. A key
// used for a different request refuses the batch with ErrConflict naming
// the item.
func (s *Store) claimBatchKeys(ctx context.Context, tx pgx.Tx, b ports.EnqueueBatch) (map[int]ports.EnqueueResult, error) {
	var claim dbsqlc.IdempotencyKeyClaimBatchParams
	byKey := map[string]int{}
	for i, it := range b.Items {
		if it.IdempotencyKey == "" {
			continue
		}
		byKey[it.IdempotencyKey] = i
		claim.Keys = append(claim.Keys, it.IdempotencyKey)
		claim.RequestHashes = append(claim.RequestHashes, it.RequestHash)
		claim.QueueIds = append(claim.QueueIds, it.ID)
	}
	if len(claim.Keys) == 0 {
		return nil, nil
	}
	claim.WorkspaceID, claim.RetentionSeconds = b.WorkspaceID, IdempotencyRetention.Seconds()
	claimed, err := s.q.IdempotencyKeyClaimBatch(ctx, tx, claim)
	if err != nil {
		return nil, interpretError(err)
	}
	if len(claimed) == len(claim.Keys) {
		return nil, nil
	}
	taken := make([]string, 0, len(claim.Keys)-len(claimed))
	isClaimed := make(map[string]bool, len(claimed))
	for _, k := range claimed {
		isClaimed[k] = true
	}
	for _, k := range claim.Keys {
		if !isClaimed[k] {
			taken = append(taken, k)
		}
	}
	priors, err := s.q.IdempotencyKeyGetBatch(ctx, tx, dbsqlc.IdempotencyKeyGetBatchParams{WorkspaceID: b.WorkspaceID, Keys: taken})
	if err != nil {
		return nil, err
	}
	out := make(map[int]ports.EnqueueResult, len(priors))
	for _, p := range priors {
		i := byKey[p.Key]
		if !bytes.Equal(p.RequestHash, b.Items[i].RequestHash) {
			return nil, fmt.Errorf("%w: /items/%d/idempotencyKey was used with a different request", ports.ErrConflict, i)
		}
		// An item whose run completed was deleted; its id still answers.
		status := domain.QueueDispatched
		if p.QueueStatus != nil {
			if status, err = domain.ParseQueueStatus(*p.QueueStatus); err != nil {
				return nil, err
			}
		}
		out[i] = ports.EnqueueResult{QueueID: p.QueueID, Status: status, Replayed: true}
	}
	if len(out) != len(taken) {
		// A key taken at the claim and gone at the read was purged in
		// between; the client may send the batch again.
		return nil, fmt.Errorf("%w: an idempotency key of the batch changed while it was enqueued; send it again", ports.ErrConflict)
	}
	return out, nil
}

// enqueueCounts locks the workspace's counter row until commit and then
// reads its counts, in two statements (see QueueLockWorkspaceCounts), so
// that an enqueue that waited on a claim counts both the item the claim
// took and the execution it stored.
func (s *Store) enqueueCounts(ctx context.Context, tx pgx.Tx, workspaceID domain.ID) (dbsqlc.QueuePendingLockCountRow, error) {
	if err := s.q.QueueLockWorkspaceCounts(ctx, tx, workspaceID); err != nil {
		return dbsqlc.QueuePendingLockCountRow{}, err
	}
	return s.q.QueuePendingLockCount(ctx, tx, workspaceID)
}
