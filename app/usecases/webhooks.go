package usecases

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// Webhooks are the API's use cases of completion webhooks: a workspace's
// endpoints and their deliveries.
type Webhooks struct {
	store  ports.WebhookStore
	poster ports.WebhookPoster
	defs   ports.DefinitionStore
}

// NewWebhooks builds the webhook use cases. How many endpoints a
// workspace may have is its webhookEndpoints quota, read by the store.
func NewWebhooks(store ports.WebhookStore, poster ports.WebhookPoster, defs ports.DefinitionStore) *Webhooks {
	return &Webhooks{store: store, poster: poster, defs: defs}
}

// CreateEndpointRequest is the body of an endpoint's creation.
type CreateEndpointRequest struct {
	WorkspaceID  domain.ID
	URL          string
	Events       []domain.WebhookEvent
	DefinitionID *domain.ID
}

// CreateEndpoint registers an endpoint and makes its signing secret, which
// the answer carries once. The URL must be https and not reach the
// service's own networks (422 naming /url); a definition named must be
// the workspace's (403 or 404).
func (w *Webhooks) CreateEndpoint(ctx context.Context, a domain.Actor, req CreateEndpointRequest) (domain.WebhookEndpoint, error) {
	if err := requireWorkspace(a, req.WorkspaceID, "workspace"); err != nil {
		return domain.WebhookEndpoint{}, err
	}
	if err := domain.ValidateWebhookTarget(req.URL, req.Events); err != nil {
		return domain.WebhookEndpoint{}, err
	}
	if err := w.poster.CheckTarget(ctx, req.URL); err != nil {
		var refused *ports.TargetRefusedError
		if errors.As(err, &refused) {
			return domain.WebhookEndpoint{}, &domain.ValidationError{Problems: []domain.Problem{{Path: "/url", Message: refused.Reason}}}
		}
		return domain.WebhookEndpoint{}, err
	}
	if req.DefinitionID != nil {
		owner, err := w.defs.DefinitionWorkspace(ctx, *req.DefinitionID)
		if err != nil {
			return domain.WebhookEndpoint{}, err
		}
		if owner != req.WorkspaceID {
			return domain.WebhookEndpoint{}, fmt.Errorf("%w: the workflow definition belongs to another workspace", ErrForbidden)
		}
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return domain.WebhookEndpoint{}, err
	}
	return w.store.CreateWebhookEndpoint(ctx, domain.WebhookEndpoint{
		ID: domain.ID(uuid.New()), WorkspaceID: req.WorkspaceID, URL: req.URL, Events: req.Events,
		DefinitionID: req.DefinitionID, Secret: secret,
	})
}

// newWebhookSecret is a Standard Webhooks secret: whsec_ and 32 random
// bytes in base64.
func newWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// ListEndpoints lists a workspace's endpoints, without their secrets.
func (w *Webhooks) ListEndpoints(ctx context.Context, a domain.Actor, workspaceID domain.ID) ([]domain.WebhookEndpoint, error) {
	if err := requireWorkspace(a, workspaceID, "workspace"); err != nil {
		return nil, err
	}
	es, err := w.store.ListWebhookEndpoints(ctx, workspaceID)
	for i := range es {
		es[i].Secret = ""
	}
	return es, err
}

// GetEndpoint shows one endpoint, without its secret.
func (w *Webhooks) GetEndpoint(ctx context.Context, a domain.Actor, id domain.ID) (domain.WebhookEndpoint, error) {
	e, err := w.store.GetWebhookEndpoint(ctx, id)
	if err != nil {
		return domain.WebhookEndpoint{}, err
	}
	if err := requireWorkspace(a, e.WorkspaceID, "webhook endpoint"); err != nil {
		return domain.WebhookEndpoint{}, err
	}
	e.Secret = ""
	return e, nil
}

// DeleteEndpoint deletes an endpoint at once, whatever its backlog: it
// is no longer shown, written to or sent from (a delivery already in
// flight may still arrive once), and the webhook senders' purge removes
// its deliveries in batches.
func (w *Webhooks) DeleteEndpoint(ctx context.Context, a domain.Actor, id domain.ID) error {
	if _, err := w.GetEndpoint(ctx, a, id); err != nil {
		return err
	}
	return w.store.DeleteWebhookEndpoint(ctx, id)
}

// ListDeliveries pages through an endpoint's deliveries, newest first.
func (w *Webhooks) ListDeliveries(ctx context.Context, a domain.Actor, endpointID domain.ID, status *domain.DeliveryStatus, limit int, before *ports.DeliveryCursor) ([]domain.WebhookDelivery, error) {
	if _, err := w.GetEndpoint(ctx, a, endpointID); err != nil {
		return nil, err
	}
	return w.store.ListWebhookDeliveries(ctx, endpointID, status, limit, before)
}

// Resend sends a delivery again now, with a new retry period.
func (w *Webhooks) Resend(ctx context.Context, a domain.Actor, id domain.ID) (domain.WebhookDelivery, error) {
	d, err := w.store.GetWebhookDelivery(ctx, id)
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	if err := requireWorkspace(a, d.WorkspaceID, "webhook delivery"); err != nil {
		return domain.WebhookDelivery{}, err
	}
	return w.store.ResendWebhookDelivery(ctx, id)
}
