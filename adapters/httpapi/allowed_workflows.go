package httpapi

import (
	"context"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/domain"
)

// ListAllowedWorkflows lists a workspace's allow-list.
func (s *Server) ListAllowedWorkflows(ctx context.Context, req api.ListAllowedWorkflowsRequestObject) (api.ListAllowedWorkflowsResponseObject, error) {
	l, err := served(s.app.AllowLists, "allow-lists")
	if err != nil {
		return nil, err
	}
	entries, err := l.List(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID))
	if err != nil {
		return nil, err
	}
	out := make(api.ListAllowedWorkflows200JSONResponse, len(entries))
	for i, e := range entries {
		out[i] = allowedWorkflowOut(e)
	}
	return out, nil
}

// PutAllowedWorkflow adds an entry to a workspace's allow-list.
func (s *Server) PutAllowedWorkflow(ctx context.Context, req api.PutAllowedWorkflowRequestObject) (api.PutAllowedWorkflowResponseObject, error) {
	l, err := served(s.app.AllowLists, "allow-lists")
	if err != nil {
		return nil, err
	}
	e, err := allowedWorkflowIn(req.Body.TaskQueue, req.Body.WorkflowType, "/workflowType")
	if err != nil {
		return nil, err
	}
	if err := l.Put(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), e); err != nil {
		return nil, err
	}
	return api.PutAllowedWorkflow200JSONResponse(allowedWorkflowOut(e)), nil
}

// DeleteAllowedWorkflow removes an entry from a workspace's allow-list.
func (s *Server) DeleteAllowedWorkflow(ctx context.Context, req api.DeleteAllowedWorkflowRequestObject) (api.DeleteAllowedWorkflowResponseObject, error) {
	l, err := served(s.app.AllowLists, "allow-lists")
	if err != nil {
		return nil, err
	}
	e, err := allowedWorkflowIn(req.Params.TaskQueue, req.Params.WorkflowType, "workflowType")
	if err != nil {
		return nil, err
	}
	if err := l.Delete(ctx, actorFrom(ctx), domain.ID(req.WorkspaceID), e); err != nil {
		return nil, err
	}
	return api.DeleteAllowedWorkflow204Response{}, nil
}

// allowedWorkflowIn reads an entry from the wire: a null or omitted type
// is any type; an empty one is refused at typeField rather than read as
// any, which it would silently widen to.
func allowedWorkflowIn(queue string, workflowType *string, typeField string) (domain.AllowListEntry, error) {
	e := domain.AllowListEntry{TaskQueue: queue}
	if workflowType != nil {
		if *workflowType == "" {
			return e, &domain.ValidationError{Problems: []domain.Problem{{Path: typeField, Message: "must not be empty (null or omitted allows any type)"}}}
		}
		e.WorkflowType = *workflowType
	}
	return e, nil
}

func allowedWorkflowOut(e domain.AllowListEntry) api.AllowedWorkflow {
	out := api.AllowedWorkflow{TaskQueue: e.TaskQueue}
	if e.WorkflowType != "" {
		t := e.WorkflowType
		out.WorkflowType = &t
	}
	return out
}
