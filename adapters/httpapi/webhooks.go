package httpapi

import (
	"context"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// CreateWebhookEndpoint registers a completion webhook endpoint.
func (s *Server) CreateWebhookEndpoint(ctx context.Context, req api.CreateWebhookEndpointRequestObject) (api.CreateWebhookEndpointResponseObject, error) {
	in := usecases.CreateEndpointRequest{WorkspaceID: domain.ID(req.Body.WorkspaceID), URL: req.Body.URL}
	for _, e := range req.Body.Events {
		in.Events = append(in.Events, domain.WebhookEvent(e))
	}
	if req.Body.WorkflowDefinitionID != nil {
		id := domain.ID(*req.Body.WorkflowDefinitionID)
		in.DefinitionID = &id
	}
	e, err := s.app.Webhooks.CreateEndpoint(ctx, actorFrom(ctx), in)
	if err != nil {
		return nil, err
	}
	out := endpointOut(e)
	return api.CreateWebhookEndpoint201JSONResponse{
		ID: out.ID, WorkspaceID: out.WorkspaceID, URL: out.URL, Events: out.Events,
		WorkflowDefinitionID: out.WorkflowDefinitionID, CreatedAt: out.CreatedAt, Secret: e.Secret,
	}, nil
}

// ListWebhookEndpoints lists a workspace's endpoints.
func (s *Server) ListWebhookEndpoints(ctx context.Context, req api.ListWebhookEndpointsRequestObject) (api.ListWebhookEndpointsResponseObject, error) {
	es, err := s.app.Webhooks.ListEndpoints(ctx, actorFrom(ctx), domain.ID(req.Params.WorkspaceID))
	if err != nil {
		return nil, err
	}
	out := make(api.ListWebhookEndpoints200JSONResponse, len(es))
	for i, e := range es {
		out[i] = endpointOut(e)
	}
	return out, nil
}

// GetWebhookEndpoint shows one endpoint.
func (s *Server) GetWebhookEndpoint(ctx context.Context, req api.GetWebhookEndpointRequestObject) (api.GetWebhookEndpointResponseObject, error) {
	e, err := s.app.Webhooks.GetEndpoint(ctx, actorFrom(ctx), domain.ID(req.EndpointID))
	if err != nil {
		return nil, err
	}
	return api.GetWebhookEndpoint200JSONResponse(endpointOut(e)), nil
}

// DeleteWebhookEndpoint deletes an endpoint and its deliveries.
func (s *Server) DeleteWebhookEndpoint(ctx context.Context, req api.DeleteWebhookEndpointRequestObject) (api.DeleteWebhookEndpointResponseObject, error) {
	if err := s.app.Webhooks.DeleteEndpoint(ctx, actorFrom(ctx), domain.ID(req.EndpointID)); err != nil {
		return nil, err
	}
	return api.DeleteWebhookEndpoint204Response{}, nil
}

// ListWebhookDeliveries pages through an endpoint's deliveries, newest
// first; the cursor has the executions' list's form.
func (s *Server) ListWebhookDeliveries(ctx context.Context, req api.ListWebhookDeliveriesRequestObject) (api.ListWebhookDeliveriesResponseObject, error) {
	limit := pageLimit(req.Params.Limit)
	var before *ports.DeliveryCursor
	if req.Params.Cursor != nil {
		c, err := decodeExecutionCursor(*req.Params.Cursor)
		if err != nil {
			return nil, err
		}
		before = &ports.DeliveryCursor{CreatedAt: c.AdmittedAt, ID: c.ID}
	}
	var status *domain.DeliveryStatus
	if req.Params.Status != nil {
		st := domain.DeliveryStatus(*req.Params.Status)
		status = &st
	}
	ds, err := s.app.Webhooks.ListDeliveries(ctx, actorFrom(ctx), domain.ID(req.EndpointID), status, limit, before)
	if err != nil {
		return nil, err
	}
	out := api.WebhookDeliveryPage{Items: make([]api.WebhookDelivery, len(ds))}
	for i, d := range ds {
		out.Items[i] = deliveryOut(d)
	}
	if len(ds) == limit {
		last := ds[len(ds)-1]
		c := encodeExecutionCursor(ports.ExecutionCursor{AdmittedAt: last.CreatedAt, ID: last.ID})
		out.NextCursor = &c
	}
	return api.ListWebhookDeliveries200JSONResponse(out), nil
}

// ResendWebhookDelivery makes a delivery due now.
func (s *Server) ResendWebhookDelivery(ctx context.Context, req api.ResendWebhookDeliveryRequestObject) (api.ResendWebhookDeliveryResponseObject, error) {
	d, err := s.app.Webhooks.Resend(ctx, actorFrom(ctx), domain.ID(req.DeliveryID))
	if err != nil {
		return nil, err
	}
	return api.ResendWebhookDelivery202JSONResponse(deliveryOut(d)), nil
}

func endpointOut(e domain.WebhookEndpoint) api.WebhookEndpoint {
	out := api.WebhookEndpoint{
		ID: uuid.UUID(e.ID), WorkspaceID: uuid.UUID(e.WorkspaceID), URL: e.URL, CreatedAt: e.CreatedAt,
		Events: make([]api.WebhookEvent, len(e.Events)), DeliveriesDropped: e.DeliveriesDropped, LastDroppedAt: e.LastDroppedAt,
	}
	for i, ev := range e.Events {
		out.Events[i] = api.WebhookEvent(ev)
	}
	if e.DefinitionID != nil {
		id := uuid.UUID(*e.DefinitionID)
		out.WorkflowDefinitionID = &id
	}
	return out
}

func deliveryOut(d domain.WebhookDelivery) api.WebhookDelivery {
	return api.WebhookDelivery{
		ID: uuid.UUID(d.ID), EndpointID: uuid.UUID(d.EndpointID), ExecutionID: uuid.UUID(d.ExecutionID),
		Event: api.WebhookEvent(d.Event), Status: api.DeliveryStatus(d.Status), Attempts: d.Attempts,
		LastStatusCode: d.LastStatusCode, LastError: d.LastError, NextAttemptAt: d.NextAttemptAt,
		CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt, Payload: d.Payload,
	}
}
