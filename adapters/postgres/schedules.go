package postgres

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

func scheduleFromRow(r dbsqlc.Schedule) domain.Schedule {
	s := domain.Schedule{
		ID: r.ID, WorkspaceID: r.WorkspaceID, DefinitionID: r.WorkflowDefinitionID, Name: r.Name, TimeZone: r.TimeZone,
		Input: r.Input, Priority: int(r.Priority), Overlap: domain.OverlapPolicy(r.OverlapPolicy),
		PausedAt: r.PausedAt, NextFireAt: r.NextFireAt, LastTick: r.LastTick, LastQueueID: r.LastQueueID,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.CronExpression != nil {
		s.Cron = *r.CronExpression
	}
	if r.IntervalSeconds != nil {
		s.Interval = time.Duration(*r.IntervalSeconds) * time.Second
	}
	return s
}

// scheduleColumns are the stored forms of a schedule's cron expression
// and interval, of which exactly one is set.
func scheduleColumns(s domain.Schedule) (*string, *int32) {
	if s.Cron != "" {
		c := s.Cron
		return &c, nil
	}
	seconds := int32(s.Interval / time.Second)
	return nil, &seconds
}

// CreateSchedule stores the schedule once the workspace's schedules,
// counted under its storage lock, leave room in its quota in force.
func (s *Store) CreateSchedule(ctx context.Context, sc domain.Schedule) (domain.Schedule, error) {
	var out domain.Schedule
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.q.WorkspaceStorageLock(ctx, tx, sc.WorkspaceID); err != nil {
			return interpretError(err)
		}
		quotas, err := s.workspaceQuotas(ctx, tx, sc.WorkspaceID)
		if err != nil {
			return err
		}
		n, err := s.q.ScheduleCount(ctx, tx, sc.WorkspaceID)
		if err != nil {
			return err
		}
		if err = quotas.CheckSchedules(int(n)); err != nil {
			return err
		}
		cron, interval := scheduleColumns(sc)
		r, err := s.q.ScheduleInsert(ctx, tx, dbsqlc.ScheduleInsertParams{
			ID: sc.ID, WorkspaceID: sc.WorkspaceID, WorkflowDefinitionID: sc.DefinitionID, Name: sc.Name,
			CronExpression: cron, TimeZone: sc.TimeZone, IntervalSeconds: interval, Input: sc.Input,
			Priority: int16(sc.Priority), OverlapPolicy: string(sc.Overlap), PausedAt: sc.PausedAt, NextFireAt: sc.NextFireAt,
		})
		if err != nil {
			return interpretError(err)
		}
		out = scheduleFromRow(r)
		return s.audit(ctx, tx, sc.WorkspaceID, sc.ID, "schedule.created", map[string]any{"workflowDefinitionId": sc.DefinitionID})
	})
	return out, err
}

// audit writes an activity row of the API about a schedule.
func (s *Store) audit(ctx context.Context, tx pgx.Tx, workspaceID, subject domain.ID, action string, details map[string]any) error {
	d, err := json.Marshal(details)
	if err != nil {
		return err
	}
	return s.q.ActivityInsert(ctx, tx, dbsqlc.ActivityInsertParams{
		ID: domain.ID(uuid.New()), WorkspaceID: &workspaceID, Actor: "schedules", Action: action, SubjectID: &subject, Details: d,
	})
}

// GetSchedule loads a schedule.
func (s *Store) GetSchedule(ctx context.Context, id domain.ID) (domain.Schedule, error) {
	r, err := s.q.ScheduleGet(ctx, s.pool, id)
	if err != nil {
		return domain.Schedule{}, interpretError(err)
	}
	return scheduleFromRow(r), nil
}

// ListSchedules pages through a workspace's schedules, oldest first.
func (s *Store) ListSchedules(ctx context.Context, workspaceID domain.ID, limit int, after *ports.ScheduleCursor) ([]domain.Schedule, error) {
	p := dbsqlc.ScheduleListParams{WorkspaceID: workspaceID, MaxRows: int32(limit)}
	if after != nil {
		p.AfterCreatedAt, p.AfterID = &after.CreatedAt, &after.ID
	}
	rows, err := s.q.ScheduleList(ctx, s.pool, p)
	if err != nil {
		return nil, err
	}
	out := make([]domain.Schedule, len(rows))
	for i, r := range rows {
		out[i] = scheduleFromRow(r)
	}
	return out, nil
}

// UpdateSchedule applies update under the schedule's row lock, the lock a
// firing takes, so an edit, pause or resume and a tick never interleave.
func (s *Store) UpdateSchedule(ctx context.Context, id domain.ID, update func(*domain.Schedule, time.Time) error) (domain.Schedule, error) {
	var out domain.Schedule
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		r, err := s.q.ScheduleGetForUpdate(ctx, tx, id)
		if err != nil {
			return interpretError(err)
		}
		sc := scheduleFromRow(r.Schedule)
		if err = update(&sc, r.DbNow); err != nil {
			return err
		}
		cron, interval := scheduleColumns(sc)
		w, err := s.q.ScheduleUpdate(ctx, tx, dbsqlc.ScheduleUpdateParams{
			ID: id, Name: sc.Name, CronExpression: cron, TimeZone: sc.TimeZone, IntervalSeconds: interval, Input: sc.Input,
			Priority: int16(sc.Priority), OverlapPolicy: string(sc.Overlap), PausedAt: sc.PausedAt, NextFireAt: sc.NextFireAt,
		})
		if err != nil {
			return interpretError(err)
		}
		out = scheduleFromRow(w)
		return s.audit(ctx, tx, sc.WorkspaceID, id, "schedule.updated", map[string]any{"paused": sc.PausedAt != nil, "nextFireAt": sc.NextFireAt})
	})
	return out, err
}

// DeleteSchedule deletes a schedule; its items stay.
func (s *Store) DeleteSchedule(ctx context.Context, id domain.ID) error {
	return s.withTx(ctx, func(tx pgx.Tx) error {
		r, err := s.q.ScheduleGetForUpdate(ctx, tx, id)
		if err != nil {
			return interpretError(err)
		}
		if _, err := s.q.ScheduleDelete(ctx, tx, id); err != nil {
			return err
		}
		return s.audit(ctx, tx, r.Schedule.WorkspaceID, id, "schedule.deleted", map[string]any{})
	})
}

// FireDueSchedule fires one due schedule's tick in one transaction: the
// row lock, the decision, the item through enqueueTx and the advance of
// next_fire_at commit together or not at all. It reads what the decision
// needs and writes what app decided: app builds the tick's item.
func (s *Store) FireDueSchedule(ctx context.Context, skip []domain.ID, decide func(ports.DueSchedule) (ports.TickPlan, error)) (bool, error) {
	fired := false
	if skip == nil {
		skip = []domain.ID{}
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		r, err := s.q.ScheduleLockDue(ctx, tx, skip)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		fired = true
		sc := scheduleFromRow(r.Schedule)
		due := ports.DueSchedule{Schedule: sc, Now: r.DbNow, DefinitionLive: r.DefinitionLive}
		if sc.LastQueueID != nil {
			if due.PreviousActive, err = s.q.SchedulePreviousRunActive(ctx, tx, *sc.LastQueueID); err != nil {
				return err
			}
		}
		if r.DefinitionLive {
			if due.Concurrency, err = s.definitionConcurrency(ctx, tx, sc.DefinitionID, 0); err != nil {
				return err
			}
		}
		plan, err := decide(due)
		if err != nil {
			return err
		}
		f := plan.Firing
		advance := dbsqlc.ScheduleAdvanceParams{ID: sc.ID, LastTick: &f.Tick}
		if f.Pause {
			advance.PausedAt = &r.DbNow
			return s.scheduleAdvance(ctx, tx, sc, advance, "schedule.paused", map[string]any{"definitionLive": r.DefinitionLive})
		}
		advance.NextFireAt = &f.Next
		if !f.Enqueue {
			return s.scheduleAdvance(ctx, tx, sc, advance, "schedule.skipped", map[string]any{"tick": f.Tick, "reason": "the previous run is queued or running"})
		}
		if bad := plan.Refused; bad != nil {
			return s.scheduleAdvance(ctx, tx, sc, advance, "schedule.refused", map[string]any{"tick": f.Tick, "field": "/input", "reason": bad.Error()})
		}
		item, _, err := s.enqueueTx(ctx, tx, plan.Item, &scheduleTick{scheduleID: sc.ID, tick: f.Tick})
		var quota *domain.QuotaError
		if errors.As(err, &quota) {
			// Nothing was written by the refused enqueue (the quota is
			// checked before the insert), so the tick is passed.
			return s.scheduleAdvance(ctx, tx, sc, advance, "schedule.refused", map[string]any{"tick": f.Tick, "quota": quota.Quota, "limit": quota.Limit})
		}
		if err != nil {
			return fmt.Errorf("schedule %s tick %s: %w", sc.ID, f.Tick, err)
		}
		advance.LastQueueID = &item.ID
		return s.q.ScheduleAdvance(ctx, tx, advance)
	})
	return fired, err
}

// scheduleAdvance advances a schedule that enqueued nothing this tick and
// records why.
func (s *Store) scheduleAdvance(ctx context.Context, tx pgx.Tx, sc domain.Schedule, p dbsqlc.ScheduleAdvanceParams, action string, details map[string]any) error {
	if err := s.q.ScheduleAdvance(ctx, tx, p); err != nil {
		return err
	}
	return s.audit(ctx, tx, sc.WorkspaceID, sc.ID, action, details)
}
