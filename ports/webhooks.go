package ports

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// DeliveryCursor is the position after which a page of an endpoint's
// deliveries continues, newest first.
type DeliveryCursor struct {
	CreatedAt time.Time
	ID        domain.ID
}

// WebhookStore keeps webhook endpoints and their deliveries for the API.
// Deliveries themselves are written with an execution's end, by
// ExecutionStore.FinishExecution.
type WebhookStore interface {
	// CreateWebhookEndpoint stores e unless its workspace already has
	// maxEndpoints endpoints (a *domain.QuotaError).
	CreateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) (domain.WebhookEndpoint, error)
	GetWebhookEndpoint(ctx context.Context, id domain.ID) (domain.WebhookEndpoint, error)
	ListWebhookEndpoints(ctx context.Context, workspaceID domain.ID) ([]domain.WebhookEndpoint, error)
	// DeleteWebhookEndpoint marks an endpoint deleted at once, whatever
	// its backlog: it is no longer read, written to or sent from, and
	// WebhookOutbox.PurgeDeletedWebhookEndpoints removes its deliveries
	// and then it.
	DeleteWebhookEndpoint(ctx context.Context, id domain.ID) error
	ListWebhookDeliveries(ctx context.Context, endpointID domain.ID, status *domain.DeliveryStatus, limit int, before *DeliveryCursor) ([]domain.WebhookDelivery, error)
	GetWebhookDelivery(ctx context.Context, id domain.ID) (domain.WebhookDelivery, error)
	// ResendWebhookDelivery makes a delivery due now with a new retry
	// period, whatever its status.
	ResendWebhookDelivery(ctx context.Context, id domain.ID) (domain.WebhookDelivery, error)
}

// ClaimedDelivery is a delivery claimed for one attempt, with what sending
// it needs.
type ClaimedDelivery struct {
	Delivery domain.WebhookDelivery
	// WindowStart opened the delivery's retry period.
	WindowStart time.Time
	URL         string
	Secret      string
}

// WebhookAttempt is how one claimed attempt ended.
type WebhookAttempt struct {
	ID domain.ID
	// Attempt is the attempt number the claim counted: the fence.
	Attempt    int
	Status     domain.DeliveryStatus
	StatusCode *int
	Error      *string
	// NextAttemptAt is when a PENDING delivery is due again.
	NextAttemptAt time.Time
}

// WebhookOutbox is the sender's side of the deliveries.
type WebhookOutbox interface {
	// ClaimWebhookDeliveries claims up to limit due deliveries, at most
	// perWorkspace a workspace less busy[workspace], each for lease.
	ClaimWebhookDeliveries(ctx context.Context, limit, perWorkspace int, busy map[domain.ID]int, lease time.Duration) ([]ClaimedDelivery, error)
	// RecordWebhookAttempt records a claimed attempt's end; false when the
	// claim was no longer this attempt's.
	RecordWebhookAttempt(ctx context.Context, a WebhookAttempt) (bool, error)
	// DeleteFinishedWebhookDeliveries deletes up to limit delivered or
	// failed deliveries created before before.
	DeleteFinishedWebhookDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
	// PurgeDeletedWebhookEndpoints deletes up to limit deliveries of
	// deleted endpoints and, when fewer were left, the deleted endpoints
	// that have none.
	PurgeDeletedWebhookEndpoints(ctx context.Context, limit int) (deliveries, endpoints int, err error)
}

// WebhookMessage is one signed POST of a delivery.
type WebhookMessage struct {
	URL    string
	Secret string
	// ID is the webhook-id.
	ID        domain.ID
	Timestamp time.Time
	Body      []byte
}

// WebhookPoster sends webhook messages through the outbound network
// guard. It answers the status code the receiver gave; err is a
// *TargetRefusedError when the guard refused the target (no retry can
// help), another error when no answer came.
type WebhookPoster interface {
	Post(ctx context.Context, m WebhookMessage) (status int, err error)
	// CheckTarget refuses a URL whose host is, or resolves to, an address
	// the guard refuses (a *TargetRefusedError); a name that does not
	// resolve now is not refused here but when it is sent to.
	CheckTarget(ctx context.Context, rawURL string) error
}

// TargetRefusedError is a webhook target the outbound guard refuses.
type TargetRefusedError struct {
	Reason string
}

// Error is the guard's reason.
func (e *TargetRefusedError) Error() string { return e.Reason }
