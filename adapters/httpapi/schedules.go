package httpapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

func scheduleOut(v usecases.ScheduleView) api.Schedule {
	out := api.Schedule{
		ID: uuid.UUID(v.ID), WorkspaceID: uuid.UUID(v.WorkspaceID), WorkflowDefinitionID: uuid.UUID(v.DefinitionID),
		Name: v.Name, TimeZone: v.TimeZone, Input: v.Input, Priority: v.Priority, OverlapPolicy: api.OverlapPolicy(v.Overlap),
		Paused: v.PausedAt != nil, PausedAt: v.PausedAt, NextFireAt: v.NextFireAt, NextFireTimes: v.NextFireTimes,
		LastTick: v.LastTick, LastQueueID: (*uuid.UUID)(v.LastQueueID), CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt,
	}
	if v.Cron != "" {
		c := v.Cron
		out.CronExpression = &c
	} else {
		secs := int(v.Interval / time.Second)
		out.IntervalSeconds = &secs
	}
	return out
}

func scheduleChanges(name, cron, zone *string, interval *int, input *json.RawMessage, priority *int, overlap *api.OverlapPolicy) usecases.ScheduleChanges {
	c := usecases.ScheduleChanges{Name: name, Cron: cron, TimeZone: zone, IntervalSeconds: interval, Input: input, Priority: priority}
	if overlap != nil {
		p := domain.OverlapPolicy(*overlap)
		c.Overlap = &p
	}
	return c
}

// CreateSchedule creates a schedule.
func (s *Server) CreateSchedule(ctx context.Context, req api.CreateScheduleRequestObject) (api.CreateScheduleResponseObject, error) {
	b := req.Body
	paused := b.Paused != nil && *b.Paused
	v, err := s.app.Schedules.Create(ctx, actorFrom(ctx), domain.ID(b.WorkspaceID), domain.ID(b.WorkflowDefinitionID), paused,
		scheduleChanges(&b.Name, b.CronExpression, b.TimeZone, b.IntervalSeconds, b.Input, b.Priority, b.OverlapPolicy))
	if err != nil {
		return nil, err
	}
	return api.CreateSchedule201JSONResponse(scheduleOut(v)), nil
}

// ListSchedules lists a workspace's schedules.
func (s *Server) ListSchedules(ctx context.Context, req api.ListSchedulesRequestObject) (api.ListSchedulesResponseObject, error) {
	limit := pageLimit(req.Params.Limit)
	var after *ports.ScheduleCursor
	if req.Params.Cursor != nil {
		// A schedule's cursor has the execution cursor's shape: a time and
		// an id.
		c, err := decodeExecutionCursor(*req.Params.Cursor)
		if err != nil {
			return nil, err
		}
		after = &ports.ScheduleCursor{CreatedAt: c.AdmittedAt, ID: c.ID}
	}
	vs, err := s.app.Schedules.List(ctx, actorFrom(ctx), domain.ID(req.Params.WorkspaceID), limit, after)
	if err != nil {
		return nil, err
	}
	out := api.SchedulePage{Items: make([]api.Schedule, len(vs))}
	for i, v := range vs {
		out.Items[i] = scheduleOut(v)
	}
	if len(vs) == limit {
		last := vs[len(vs)-1]
		c := encodeExecutionCursor(ports.ExecutionCursor{AdmittedAt: last.CreatedAt, ID: last.ID})
		out.NextCursor = &c
	}
	return api.ListSchedules200JSONResponse(out), nil
}

// GetSchedule shows a schedule.
func (s *Server) GetSchedule(ctx context.Context, req api.GetScheduleRequestObject) (api.GetScheduleResponseObject, error) {
	v, err := s.app.Schedules.Get(ctx, actorFrom(ctx), domain.ID(req.ScheduleID))
	if err != nil {
		return nil, err
	}
	return api.GetSchedule200JSONResponse(scheduleOut(v)), nil
}

// UpdateSchedule edits a schedule.
func (s *Server) UpdateSchedule(ctx context.Context, req api.UpdateScheduleRequestObject) (api.UpdateScheduleResponseObject, error) {
	b := req.Body
	v, err := s.app.Schedules.Update(ctx, actorFrom(ctx), domain.ID(req.ScheduleID),
		scheduleChanges(b.Name, b.CronExpression, b.TimeZone, b.IntervalSeconds, b.Input, b.Priority, b.OverlapPolicy))
	if err != nil {
		return nil, err
	}
	return api.UpdateSchedule200JSONResponse(scheduleOut(v)), nil
}

// DeleteSchedule deletes a schedule.
func (s *Server) DeleteSchedule(ctx context.Context, req api.DeleteScheduleRequestObject) (api.DeleteScheduleResponseObject, error) {
	if err := s.app.Schedules.Delete(ctx, actorFrom(ctx), domain.ID(req.ScheduleID)); err != nil {
		return nil, err
	}
	return api.DeleteSchedule204Response{}, nil
}

// PauseSchedule pauses a schedule.
func (s *Server) PauseSchedule(ctx context.Context, req api.PauseScheduleRequestObject) (api.PauseScheduleResponseObject, error) {
	v, err := s.app.Schedules.Pause(ctx, actorFrom(ctx), domain.ID(req.ScheduleID))
	if err != nil {
		return nil, err
	}
	return api.PauseSchedule200JSONResponse(scheduleOut(v)), nil
}

// ResumeSchedule resumes a schedule.
func (s *Server) ResumeSchedule(ctx context.Context, req api.ResumeScheduleRequestObject) (api.ResumeScheduleResponseObject, error) {
	v, err := s.app.Schedules.Resume(ctx, actorFrom(ctx), domain.ID(req.ScheduleID))
	if err != nil {
		return nil, err
	}
	return api.ResumeSchedule200JSONResponse(scheduleOut(v)), nil
}
