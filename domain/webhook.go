package domain

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// WebhookEvent is what a webhook endpoint can be told of: the end of an
// execution, by its final status.
type WebhookEvent string

// The events of completion webhooks, one per final execution status.
const (
	// WebhookExecutionCompleted tells of an execution that COMPLETED.
	WebhookExecutionCompleted WebhookEvent = "execution.completed"
	// WebhookExecutionFailed tells of an execution that FAILED.
	WebhookExecutionFailed WebhookEvent = "execution.failed"
	// WebhookExecutionCancelled tells of an execution that was CANCELLED.
	WebhookExecutionCancelled WebhookEvent = "execution.cancelled"
)

// WebhookEvents lists every event, in the order the API documents them.
func WebhookEvents() []WebhookEvent {
	return []WebhookEvent{WebhookExecutionCompleted, WebhookExecutionFailed, WebhookExecutionCancelled}
}

// WebhookEventOf is the event an execution's end with status raises; ok
// is false for a status that is not an end.
func WebhookEventOf(status ExecutionStatus) (WebhookEvent, bool) {
	switch status {
	case ExecutionCompleted:
		return WebhookExecutionCompleted, true
	case ExecutionFailed:
		return WebhookExecutionFailed, true
	case ExecutionCancelled:
		return WebhookExecutionCancelled, true
	}
	return "", false
}

// WebhookURLMax bounds an endpoint's URL, in bytes.
const WebhookURLMax = 2000

// WebhookEndpoint is a workspace's HTTPS URL that hears of its runs' ends.
type WebhookEndpoint struct {
	// ID names the endpoint.
	ID ID
	// WorkspaceID is the workspace whose runs it hears of.
	WorkspaceID ID
	// URL is the https URL deliveries are POSTed to.
	URL string
	// Events are the events the endpoint takes, at least one.
	Events []WebhookEvent
	// DefinitionID limits, when set, the endpoint to that definition's
	// executions.
	DefinitionID *ID
	// Secret signs every delivery (a Standard Webhooks whsec_ secret). It
	// is shown once, when the endpoint is created.
	Secret string
	// CreatedAt is when the endpoint was registered.
	CreatedAt time.Time
	// DeliveriesDropped counts the execution ends the endpoint was not
	// sent because its workspace held its WebhookDeliveryBound.
	DeliveriesDropped int64
	// LastDroppedAt is when the last of them was dropped.
	LastDroppedAt *time.Time
}

// ValidateWebhookTarget checks an endpoint's URL and events as written,
// before anything is stored or resolved: an absolute https URL with a
// host and no credentials, within WebhookURLMax, and a non-empty set of
// known events without repeats. Every problem is named by its field.
func ValidateWebhookTarget(rawURL string, events []WebhookEvent) error {
	var ps []Problem
	switch u, err := url.Parse(rawURL); {
	case len(rawURL) > WebhookURLMax:
		ps = append(ps, Problem{Path: "/url", Message: fmt.Sprintf("must be at most %d bytes", WebhookURLMax)})
	case err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "":
		ps = append(ps, Problem{Path: "/url", Message: "must be an absolute https:// URL"})
	case !strings.EqualFold(u.Scheme, "https"):
		ps = append(ps, Problem{Path: "/url", Message: "must use https"})
	case u.User != nil:
		ps = append(ps, Problem{Path: "/url", Message: "must not carry credentials; the signature authenticates the sender"})
	}
	if len(events) == 0 {
		ps = append(ps, Problem{Path: "/events", Message: "name at least one event"})
	}
	seen := map[WebhookEvent]bool{}
	for i, e := range events {
		known := false
		for _, k := range WebhookEvents() {
			known = known || e == k
		}
		switch {
		case !known:
			ps = append(ps, Problem{Path: fmt.Sprintf("/events/%d", i), Message: fmt.Sprintf("unknown event %q", e)})
		case seen[e]:
			ps = append(ps, Problem{Path: fmt.Sprintf("/events/%d", i), Message: fmt.Sprintf("event %q is listed twice", e)})
		}
		seen[e] = true
	}
	if len(ps) > 0 {
		return &ValidationError{Problems: ps}
	}
	return nil
}

// DeliveryStatus is where a webhook delivery stands.
type DeliveryStatus string

const (
	// DeliveryPending is waiting for its next attempt.
	DeliveryPending DeliveryStatus = "PENDING"
	// DeliveryDelivered was answered 2xx.
	DeliveryDelivered DeliveryStatus = "DELIVERED"
	// DeliveryFailed ran out of its retry period, or its target was
	// refused; it can be sent again.
	DeliveryFailed DeliveryStatus = "FAILED"
)

// WebhookDelivery is one message to one endpoint: an execution's end.
type WebhookDelivery struct {
	// ID is the webhook-id every attempt carries.
	ID ID
	// EndpointID is the endpoint it goes to.
	EndpointID ID
	// WorkspaceID is the endpoint's workspace.
	WorkspaceID ID
	// ExecutionID is the execution whose end it tells of.
	ExecutionID ID
	// Event is the end's event.
	Event WebhookEvent
	// Payload is the body sent, the same on every attempt.
	Payload json.RawMessage
	// Status is where the delivery stands.
	Status DeliveryStatus
	// Attempts counts the attempts begun.
	Attempts int
	// NextAttemptAt is when a PENDING delivery is due.
	NextAttemptAt time.Time
	// LastStatusCode is the last answer's HTTP status, nil when none came.
	LastStatusCode *int
	// LastError says why the last attempt failed.
	LastError *string
	// CreatedAt is when the execution's end wrote it.
	CreatedAt time.Time
	// DeliveredAt is when a 2xx answered it.
	DeliveredAt *time.Time
}

// WebhookRetry is the retry rule of deliveries: the wait after a failed
// attempt doubles from Base up to Max, and once Period has passed since
// the first attempt (or the last resend) the delivery fails.
type WebhookRetry struct {
	// Base is the wait after the first failed attempt.
	Base time.Duration
	// Max caps the doubling wait.
	Max time.Duration
	// Period is how long a delivery is retried.
	Period time.Duration
}

// DefaultWebhookRetry waits 5 s, 10 s, 20 s, ... up to an hour between
// attempts, for a day: about 30 attempts.
func DefaultWebhookRetry() WebhookRetry {
	return WebhookRetry{Base: 5 * time.Second, Max: time.Hour, Period: 24 * time.Hour}
}

// After says what follows the failed attempt number attempts of a
// delivery whose retry period began at windowStart: the time of the next
// attempt, or giveUp when it would fall past the period.
func (r WebhookRetry) After(attempts int, windowStart, now time.Time) (next time.Time, giveUp bool) {
	wait := r.Base
	for i := 1; i < attempts && wait < r.Max; i++ {
		wait *= 2
	}
	wait = min(wait, r.Max)
	next = now.Add(wait)
	return next, next.After(windowStart.Add(r.Period))
}

// WebhookDeliveryBound caps what one workspace keeps of webhook
// deliveries, whatever its endpoints and run ends: each end writes one
// delivery per endpoint (up to the webhookEndpoints quota) of up to the
// payload's size, kept while it is retried and for the deliveries'
// retention after. An end past either figure is not written for the
// endpoints past it; each such endpoint counts the drop (deliveriesDropped).
type WebhookDeliveryBound struct {
	// Stored caps the workspace's deliveries of any status.
	Stored int
	// Pending caps its PENDING deliveries, the ones the senders retry.
	Pending int
}

// DefaultWebhookDeliveryBound keeps 10,000 deliveries a workspace, 1,000
// of them waiting to be sent: about 170 MB of payloads at most, and a
// day of retries of a failing endpoint at one end every 90 seconds.
func DefaultWebhookDeliveryBound() WebhookDeliveryBound {
	return WebhookDeliveryBound{Stored: 10_000, Pending: 1_000}
}

// Room is how many more deliveries a workspace storing stored deliveries,
// pending of them PENDING, may be written.
func (b WebhookDeliveryBound) Room(stored, pending int) int {
	return max(0, min(b.Stored-stored, b.Pending-pending))
}
