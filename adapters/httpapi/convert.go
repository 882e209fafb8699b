package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
)

func workspaceOut(w usecases.WorkspaceView) api.Workspace {
	return api.Workspace{
		ID: uuid.UUID(w.ID), Name: w.Name, Plan: api.Plan(w.Plan), Limit: w.Limit, Active: w.Active, Queued: w.Queued,
		FailedLastHour: w.FailedLastHour, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

// graphIn decodes the request's graph, as the bytes the client sent, with
// the domain's strict decoder: the API and the stored form agree on one
// definition of a graph, so a misspelt, repeated or wrongly cased member is
// refused at its path instead of dropped, and numbers keep every digit.
func graphIn(raw api.Graph) (domain.Graph, error) {
	out, err := domain.DecodeGraph(raw)
	if err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			ps := make([]domain.Problem, len(ve.Problems))
			for i, p := range ve.Problems {
				ps[i] = domain.Problem{Path: "/graph" + p.Path, Message: p.Message}
			}
			return domain.Graph{}, usecases.InvalidGraph(&domain.ValidationError{Problems: ps})
		}
		return domain.Graph{}, err
	}
	return out, nil
}

func definitionOut(d domain.Definition) (api.Definition, error) {
	graph, err := domain.EncodeGraph(d.Graph)
	if err != nil {
		return api.Definition{}, err
	}
	return api.Definition{
		ID: uuid.UUID(d.ID), WorkspaceID: uuid.UUID(d.WorkspaceID), Name: d.Name, CurrentVersion: d.CurrentVersion, Graph: graph,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
	}, nil
}

func versionOut(v domain.DefinitionVersion) (api.DefinitionVersion, error) {
	graph, err := domain.EncodeGraph(v.Graph)
	if err != nil {
		return api.DefinitionVersion{}, err
	}
	return api.DefinitionVersion{DefinitionID: uuid.UUID(v.DefinitionID), Version: v.Version, Graph: graph, CreatedAt: v.CreatedAt}, nil
}

// queueOut renders an item with what it waits on (nil when nothing holds
// it).
func queueOut(q domain.QueueItem, w *domain.Waiting) api.QueueItem {
	out := api.QueueItem{
		ID: uuid.UUID(q.ID), WorkspaceID: uuid.UUID(q.WorkspaceID), WorkflowDefinitionID: uuid.UUID(q.DefinitionID), Status: api.QueueStatus(q.Status),
		Priority: q.Priority, AttemptCount: q.AttemptCount, DispatchFailures: q.DispatchFailures, ExecutionID: (*uuid.UUID)(q.ExecutionID),
		CreatedAt: q.CreatedAt, AvailableAt: q.AvailableAt, ClaimedAt: q.ClaimedAt, DispatchedAt: q.DispatchedAt,
		RetryOf:    (*uuid.UUID)(q.RetryOf),
		ScheduleID: (*uuid.UUID)(q.ScheduleID), ScheduleTick: q.ScheduleTick,
	}
	if q.LastError != "" {
		msg := q.LastError
		out.LastError = &msg
	}
	if q.ConcurrencyKey != "" {
		key := q.ConcurrencyKey
		out.ConcurrencyKey = &key
	}
	if w != nil {
		out.WaitingOn = &api.WaitingOn{Reason: api.WaitingOnReason(w.Reason), Until: w.Until}
		switch w.Reason {
		case domain.WaitWorkspaceLimit, domain.WaitKeyLimit, domain.WaitPoolFull:
			limit, running := w.Limit, w.Running
			out.WaitingOn.Limit, out.WaitingOn.Running = &limit, &running
		case domain.WaitFloorOwners:
			limit, running, reserved := w.Limit, w.Running, w.Reserved
			out.WaitingOn.Limit, out.WaitingOn.Running, out.WaitingOn.Reserved = &limit, &running, &reserved
		}
		if w.Key != "" {
			key := w.Key
			out.WaitingOn.Key = &key
		}
		out.WaitingOn.Rate = startRateOut(w.Rate)
	}
	return out
}

func executionOut(e domain.Execution) api.Execution {
	out := api.Execution{
		ID: uuid.UUID(e.ID), QueueID: (*uuid.UUID)(e.QueueID), WorkspaceID: uuid.UUID(e.WorkspaceID), WorkflowDefinitionID: uuid.UUID(e.DefinitionID), WorkflowVersion: e.Version,
		Status: api.ExecutionStatus(e.Status), StartedAt: e.AdmittedAt, CompletedAt: e.CompletedAt, DurationMs: e.DurationMs,
		Error: e.Error, Input: rawOrNull(e.Input), RetryOf: (*uuid.UUID)(e.RetryOf),
	}
	return out
}

// rawOrNull hands stored JSON to the response as it is, so its numbers keep
// every digit; nothing stored is null.
func rawOrNull(raw json.RawMessage) *json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return &raw
}

func asMaxBytes(err error, target **http.MaxBytesError) bool { return errors.As(err, target) }
