package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/domain"
)

func workspaceOut(w app.WorkspaceView) api.Workspace {
	return api.Workspace{
		ID: uuid.UUID(w.ID), Name: w.Name, Plan: api.Plan(w.Plan), Limit: w.Limit, Active: w.Active, Queued: w.Queued,
		FailedLastHour: w.FailedLastHour, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

// graphIn re-reads the request's graph with the domain's strict decoder,
// so the API and the stored form agree on one definition of a graph.
func graphIn(g api.Graph) (domain.Graph, error) {
	raw, err := json.Marshal(g)
	if err != nil {
		return domain.Graph{}, err
	}
	out, err := domain.DecodeGraph(raw)
	if err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			ps := make([]domain.Problem, len(ve.Problems))
			for i, p := range ve.Problems {
				ps[i] = domain.Problem{Path: "/graph" + p.Path, Message: p.Message}
			}
			return domain.Graph{}, &domain.ValidationError{Problems: ps}
		}
		return domain.Graph{}, err
	}
	return out, nil
}

func graphOut(g domain.Graph) api.Graph {
	out := api.Graph{Nodes: make([]api.Node, len(g.Nodes))}
	for i, n := range g.Nodes {
		out.Nodes[i] = api.Node{Key: n.Key, Type: string(n.Type)}
		if len(n.Config) > 0 {
			var cfg map[string]any
			if json.Unmarshal(n.Config, &cfg) == nil && cfg != nil {
				out.Nodes[i].Config = &cfg
			}
		}
	}
	edges := make([]api.Edge, len(g.Edges))
	for i, e := range g.Edges {
		edges[i] = api.Edge{From: e.From, To: e.To, When: e.When}
	}
	out.Edges = &edges
	return out
}

func definitionOut(d domain.Definition) api.Definition {
	return api.Definition{
		ID: uuid.UUID(d.ID), WorkspaceID: uuid.UUID(d.WorkspaceID), Name: d.Name, CurrentVersion: d.CurrentVersion, Graph: graphOut(d.Graph),
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
	}
}

func versionOut(v domain.DefinitionVersion) api.DefinitionVersion {
	return api.DefinitionVersion{DefinitionID: uuid.UUID(v.DefinitionID), Version: v.Version, Graph: graphOut(v.Graph), CreatedAt: v.CreatedAt}
}

func queueOut(q domain.QueueItem) api.QueueItem {
	out := api.QueueItem{
		ID: uuid.UUID(q.ID), WorkspaceID: uuid.UUID(q.WorkspaceID), WorkflowDefinitionID: uuid.UUID(q.DefinitionID), Status: api.QueueStatus(q.Status),
		Priority: q.Priority, AttemptCount: q.AttemptCount, DispatchFailures: q.DispatchFailures, ExecutionID: (*uuid.UUID)(q.ExecutionID),
		CreatedAt: q.CreatedAt, AvailableAt: q.AvailableAt, ClaimedAt: q.ClaimedAt, DispatchedAt: q.DispatchedAt,
	}
	if q.LastError != "" {
		msg := q.LastError
		out.LastError = &msg
	}
	return out
}

func executionOut(e domain.Execution) api.Execution {
	out := api.Execution{
		ID: uuid.UUID(e.ID), WorkspaceID: uuid.UUID(e.WorkspaceID), WorkflowDefinitionID: uuid.UUID(e.DefinitionID), WorkflowVersion: e.Version,
		Status: api.ExecutionStatus(e.Status), StartedAt: e.StartedAt, CompletedAt: e.CompletedAt, DurationMs: e.DurationMs,
		Error: e.Error, Input: e.Input,
	}
	if len(out.Input) == 0 {
		out.Input = json.RawMessage("{}")
	}
	return out
}

func rawOrNil(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

func asMaxBytes(err error, target **http.MaxBytesError) bool { return errors.As(err, target) }
