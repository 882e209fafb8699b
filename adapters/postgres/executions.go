package postgres

// The worker's side of storage (ports.ExecutionStore): a run's admission,
// its node records and its end. The dispatcher's side, the claim and the
// queue's transitions, is dispatch.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// StartNode records a node run as RUNNING.
func (s *Store) StartNode(ctx context.Context, executionID domain.ID, n domain.NodeRecord) error {
	return s.feedWritten(s.startNode(ctx, s.pool, executionID, n))
}

func (s *Store) startNode(ctx context.Context, db dbsqlc.DBTX, executionID domain.ID, n domain.NodeRecord) error {
	_, err := s.q.NodeStart(ctx, db, dbsqlc.NodeStartParams{
		ID: domain.ID(uuid.New()), ExecutionID: executionID, NodeKey: n.Key, NodeType: string(n.Type), Attempt: int32(max(1, n.Attempt)), Input: n.Input,
		ChildWorkflowID: nilIfBlank(n.ChildWorkflowID), ChildRunID: nilIfBlank(n.ChildRunID),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // already finished: a replayed start after completion
	}
	return interpretError(err)
}

// FinishNode records how a node run ended.
func (s *Store) FinishNode(ctx context.Context, executionID domain.ID, n domain.NodeRecord) error {
	return s.feedWritten(interpretError(s.q.NodeFinish(ctx, s.pool, dbsqlc.NodeFinishParams{
		ID: domain.ID(uuid.New()), ExecutionID: executionID, NodeKey: n.Key, NodeType: string(n.Type), Status: string(n.Status),
		Attempt: int32(max(1, n.Attempt)), Input: nilIfEmpty(n.Input), Output: nilIfEmpty(n.Output), Error: n.Error, StartedAt: n.StartedAt,
	})))
}

// RecordNodes writes several node records of one execution, in the order
// given: each run of ended records in one statement, each RUNNING one as
// StartNode does. The order is the stream's: the feed's trigger tells of
// each row as it is written, so a node the workflow started after its
// upstreams ended (its record queued after theirs) is told after them.
func (s *Store) RecordNodes(ctx context.Context, executionID domain.ID, nodes []domain.NodeRecord) error {
	return s.feedWritten(s.recordNodes(ctx, s.pool, executionID, nodes))
}

func (s *Store) recordNodes(ctx context.Context, db dbsqlc.DBTX, executionID domain.ID, nodes []domain.NodeRecord) error {
	for len(nodes) > 0 {
		if nodes[0].Status == domain.NodeRunning {
			if err := s.startNode(ctx, db, executionID, nodes[0]); err != nil {
				return err
			}
			nodes = nodes[1:]
			continue
		}
		ended := len(nodes)
		for i, n := range nodes {
			if n.Status == domain.NodeRunning {
				ended = i
				break
			}
		}
		if err := s.finishNodes(ctx, db, executionID, nodes[:ended]); err != nil {
			return err
		}
		nodes = nodes[ended:]
	}
	return nil
}

// finishNodes writes ended records in one statement, in their order.
func (s *Store) finishNodes(ctx context.Context, db dbsqlc.DBTX, executionID domain.ID, nodes []domain.NodeRecord) error {
	p := dbsqlc.NodesFinishParams{ExecutionID: executionID}
	for _, n := range nodes {
		errMsg := ""
		if n.Error != nil {
			errMsg = *n.Error
		}
		p.NodeKeys = append(p.NodeKeys, n.Key)
		p.NodeTypes = append(p.NodeTypes, string(n.Type))
		p.Statuses = append(p.Statuses, string(n.Status))
		p.Attempts = append(p.Attempts, int32(max(1, n.Attempt)))
		p.Outputs = append(p.Outputs, string(n.Output))
		p.Errors = append(p.Errors, errMsg)
		p.StartedAts = append(p.StartedAts, rfc3339(n.StartedAt))
		p.CompletedAts = append(p.CompletedAts, rfc3339(n.CompletedAt))
		p.ChildWorkflowIds = append(p.ChildWorkflowIds, n.ChildWorkflowID)
		p.ChildRunIds = append(p.ChildRunIds, n.ChildRunID)
	}
	return interpretError(s.q.NodesFinish(ctx, db, p))
}

// rfc3339 is t as NodesFinish reads it, "" (NULL) for none.
func rfc3339(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// nilIfBlank is s, or NULL when it is "".
func nilIfBlank(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nilIfEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// AdmitRun admits a run as it starts; see ports.ExecutionStore. The item
// is written first, under its row lock, and the execution's row and the
// item's status read after, by a statement of their own, so it sees
// whatever release or cancel the lock waited for.
func (s *Store) AdmitRun(ctx context.Context, id domain.ID) (ports.Admission, error) {
	admission := ports.AdmissionRefused
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := s.q.QueueAdmitRun(ctx, tx, &id); err != nil {
			return err
		}
		read, err := s.q.ExecutionAdmission(ctx, tx, id)
		if err != nil || !read.Exists {
			return err
		}
		admission = ports.AdmissionGranted
		if domain.QueueStatus(read.ItemStatus) == domain.QueueCancelled {
			admission = ports.AdmissionCancelled
		}
		return nil
	})
	return admission, err
}

// FinishExecution ends a RUNNING execution, writes its last node records
// and persists what atEnd decides for its queue item, in one transaction,
// then wakes the dispatchers: a slot is free. atEnd decides for the item even when
// the execution row is missing or already ended (a repeat, or a row dropped
// while its workflow ran), so no item is left DISPATCHED or CLAIMED behind
// a finished workflow. The execution's webhook deliveries are written in
// the same transaction (enqueueWebhooks). The item is read under its row lock, so atEnd
// decides from the state a concurrent cancellation or release left, never
// over it. The node records are written only with the execution's end, so
// a repeat writes none; records the execution leaves RUNNING end with it
// (domain.LeftRunning), so no node outlives its run.
func (s *Store) FinishExecution(ctx context.Context, id domain.ID, status domain.ExecutionStatus, errMsg *string, atEnd ports.ItemAtEndFunc, nodes ...domain.NodeRecord) (bool, error) {
	found := false
	var dropped int64
	err := s.withCachedPlansTx(ctx, func(tx pgx.Tx) error {
		dropped = 0 // a retried transaction counts afresh
		// The item is locked before the execution row, the order every
		// other writer of both (claim, release, cancel) takes, so a
		// completion racing one of them waits instead of deadlocking.
		eid := id
		r, err := s.q.QueueGetByExecutionForUpdate(ctx, tx, &eid)
		itemFound := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := s.q.ExecutionFinish(ctx, tx, dbsqlc.ExecutionFinishParams{ID: id, Status: string(status), Error: errMsg}); err != nil {
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if _, err := s.q.ExecutionGet(ctx, tx, id); errors.Is(err, pgx.ErrNoRows) {
				s.log.Warn("execution row missing at completion; ending its queue item anyway", "execution_id", id, "status", status)
			} else if err != nil {
				return err
			}
		} else {
			found = true
			if err := s.recordNodes(ctx, tx, id, nodes); err != nil {
				return err
			}
			var reason string
			if errMsg != nil {
				reason = *errMsg
			}
			left, leftErr := domain.LeftRunning(status, reason)
			if err := s.q.NodesEndRunning(ctx, tx, dbsqlc.NodesEndRunningParams{ExecutionID: id, Status: string(left), Error: &leftErr}); err != nil {
				return err
			}
			// The end's webhook deliveries commit with the end itself.
			var err error
			if dropped, err = s.enqueueWebhooks(ctx, tx, id, status); err != nil {
				return err
			}
		}
		if itemFound {
			if err := s.applyItemAtEnd(ctx, tx, r, atEnd); err != nil {
				return err
			}
		} else {
			s.log.Warn("completion found no queue item", "execution_id", id, "status", status)
		}
		wakeAfterCommit(tx, QueueChannel)
		return nil
	})
	if err == nil && dropped > 0 && s.drops != nil {
		s.drops.Add(float64(dropped))
	}
	return found, err
}

// applyItemAtEnd persists what atEnd decides for the locked item r.
func (s *Store) applyItemAtEnd(ctx context.Context, tx pgx.Tx, r dbsqlc.WorkflowExecutionQueue, atEnd ports.ItemAtEndFunc) error {
	from, err := queueFromRow(r)
	if err != nil {
		return err
	}
	next := from
	decision, err := atEnd(&next)
	if err != nil {
		return err
	}
	switch decision {
	case ports.KeepItem:
		return nil
	case ports.WriteItem:
		return s.writeState(ctx, tx, from, next.QueueState, auditWorkflow)
	case ports.DeleteItem:
		_, err := s.q.QueueDeleteByExecution(ctx, tx, dbsqlc.QueueDeleteByExecutionParams{ExecutionID: from.ExecutionID, Actor: auditWorkflow})
		return err
	default:
		return fmt.Errorf("queue item %s: unknown fate %d at its run's end", from.ID, decision)
	}
}
