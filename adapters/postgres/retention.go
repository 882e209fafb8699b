package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

var _ ports.RetentionStore = (*Store)(nil)

// DeleteExpired deletes at most limit rows of kind, of plan's workspaces
// (plan "" is rows of no workspace that still exists), past before, in one
// statement, and returns how many it deleted.
func (s *Store) DeleteExpired(ctx context.Context, kind domain.RetainedKind, plan domain.Plan, before time.Time, limit int) (int, error) {
	var n int64
	var err error
	p, rows := string(plan), int32(limit)
	switch kind {
	case domain.RetainedExecutions:
		if plan == "" {
			return 0, nil // executions always have a workspace (foreign key)
		}
		n, err = s.q.RetentionDeleteExecutions(ctx, s.pool, dbsqlc.RetentionDeleteExecutionsParams{Plan: p, Before: before, MaxRows: rows})
	case domain.RetainedQueueItems:
		n, err = s.q.RetentionDeleteQueueItems(ctx, s.pool, dbsqlc.RetentionDeleteQueueItemsParams{Plan: p, Before: before, MaxRows: rows})
	case domain.RetainedActivity:
		if plan == "" {
			n, err = s.q.RetentionDeleteActivityOfNoWorkspace(ctx, s.pool, dbsqlc.RetentionDeleteActivityOfNoWorkspaceParams{Before: before, MaxRows: rows})
		} else {
			n, err = s.q.RetentionDeleteActivity(ctx, s.pool, dbsqlc.RetentionDeleteActivityParams{Plan: p, Before: before, MaxRows: rows})
		}
	case domain.RetainedDefinitionVersions:
		if plan == "" {
			return 0, nil // definitions always have a workspace (foreign key)
		}
		n, err = s.q.RetentionDeleteDefinitionVersions(ctx, s.pool, dbsqlc.RetentionDeleteDefinitionVersionsParams{Plan: p, Before: before, MaxRows: rows})
	case domain.RetainedDeletedDefinitions:
		if plan == "" {
			return 0, nil
		}
		n, err = s.q.RetentionDeleteDefinitions(ctx, s.pool, dbsqlc.RetentionDeleteDefinitionsParams{Plan: p, Before: before, MaxRows: rows})
	default:
		return 0, fmt.Errorf("retention: unknown kind %q", kind)
	}
	if kind == domain.RetainedQueueItems {
		err = s.feedWritten(err) // a queue item's delete is an event
	}
	return int(n), err
}

// OldestKept returns, per kind, the age mark of the oldest row still
// stored (now when there is none).
func (s *Store) OldestKept(ctx context.Context) (map[domain.RetainedKind]time.Time, error) {
	r, err := s.q.RetentionOldestKept(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	return map[domain.RetainedKind]time.Time{
		domain.RetainedExecutions:         r.Executions,
		domain.RetainedQueueItems:         r.QueueItems,
		domain.RetainedActivity:           r.Activity,
		domain.RetainedDefinitionVersions: r.DefinitionVersions,
		domain.RetainedDeletedDefinitions: r.DeletedDefinitions,
	}, nil
}

// DeleteAdmissionLimitsHistory deletes the snapshots of the plans' and
// the pool's limits set before the one in force at before, per plan, and
// the workspaces' figures replaced before it: two statements, each over a
// table that only admin edits write.
func (s *Store) DeleteAdmissionLimitsHistory(ctx context.Context, before time.Time) (int, error) {
	plans, err := s.q.AdmissionLimitsHistoryDelete(ctx, s.pool, before)
	if err != nil {
		return int(plans), err
	}
	workspaces, err := s.q.WorkspaceLimitsHistoryDelete(ctx, s.pool, before)
	return int(plans + workspaces), err
}
