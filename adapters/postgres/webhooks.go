package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/dbsqlc"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

var (
	_ ports.WebhookStore  = (*Store)(nil)
	_ ports.WebhookOutbox = (*Store)(nil)
)

// WebhookChannel is the NOTIFY channel that wakes webhook senders when an
// execution's end wrote deliveries.
const WebhookChannel = "sluice_webhooks"

// enqueueWebhooks writes, in the transaction tx that records an
// execution's end, one delivery per endpoint that takes the event, as
// many as its workspace's delivery bound leaves room for (oldest endpoint
// first), counts each one the bound drops on its endpoint, and wakes the
// senders when it wrote any; it returns the drops, for the metric once
// the transaction commits. The workspace's delivery lock, taken only when
// an endpoint takes the event, orders the count and the insert against
// the workspace's other ends.
func (s *Store) enqueueWebhooks(ctx context.Context, tx pgx.Tx, id domain.ID, status domain.ExecutionStatus) (dropped int64, err error) {
	event, ok := domain.WebhookEventOf(status)
	if !ok {
		return 0, nil
	}
	ws, err := s.q.WebhookDeliveriesLock(ctx, tx, dbsqlc.WebhookDeliveriesLockParams{ExecutionID: id, EventType: string(event)})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil // no endpoint takes it
	}
	if err != nil {
		return 0, err
	}
	held, err := s.q.WebhookDeliveriesCount(ctx, tx, dbsqlc.WebhookDeliveriesCountParams{
		WorkspaceID: ws, MaxStored: int32(s.deliveries.Stored), MaxPending: int32(s.deliveries.Pending),
	})
	if err != nil {
		return 0, err
	}
	room := s.deliveries.Room(int(held.Stored), int(held.Pending))
	written, err := s.q.WebhookDeliveriesEnqueue(ctx, tx, dbsqlc.WebhookDeliveriesEnqueueParams{EventType: string(event), ExecutionID: id, MaxRows: int32(room)})
	if err != nil {
		return 0, err
	}
	if len(written) == room {
		// The room is spent: the endpoints left out, if any, count a drop.
		if dropped, err = s.q.WebhookEndpointsCountDropped(ctx, tx, dbsqlc.WebhookEndpointsCountDroppedParams{ExecutionID: id, EventType: string(event), Written: written}); err != nil {
			return 0, err
		}
	}
	if len(written) == 0 {
		return dropped, nil
	}
	wakeAfterCommit(tx, WebhookChannel)
	return dropped, nil
}

// CreateWebhookEndpoint stores an endpoint under its workspace's row lock,
// so the count the quota (the workspace's in force, read after the lock)
// checks cannot change under it. The secret is stored sealed
// (WebhookSecretKeys); the answer carries it, the one time it is shown.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) (domain.WebhookEndpoint, error) {
	sealed, keyID, sealErr := s.secrets.seal(e.ID, e.Secret)
	if sealErr != nil {
		return domain.WebhookEndpoint{}, sealErr
	}
	var out domain.WebhookEndpoint
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.q.WorkspaceLockForWebhooks(ctx, tx, e.WorkspaceID); err != nil {
			return interpretError(err)
		}
		quotas, err := s.workspaceQuotas(ctx, tx, e.WorkspaceID)
		if err != nil {
			return err
		}
		maxEndpoints := quotas.WebhookEndpoints
		events := make([]string, len(e.Events))
		for i, ev := range e.Events {
			events[i] = string(ev)
		}
		r, err := s.q.WebhookEndpointInsert(ctx, tx, dbsqlc.WebhookEndpointInsertParams{
			ID: e.ID, WorkspaceID: e.WorkspaceID, Url: e.URL, Events: events, WorkflowDefinitionID: e.DefinitionID,
			SecretSealed: sealed, SecretKeyID: &keyID, MaxEndpoints: int32(maxEndpoints),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return &domain.QuotaError{Quota: "webhook endpoints", Limit: maxEndpoints}
		}
		if err != nil {
			return interpretError(err)
		}
		out = endpointFromRow(r)
		out.Secret = e.Secret
		return nil
	})
	return out, err
}

// GetWebhookEndpoint reads one endpoint that is not deleted, without its
// secret, which only the sender's claim opens.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id domain.ID) (domain.WebhookEndpoint, error) {
	r, err := s.q.WebhookEndpointGet(ctx, s.pool, id)
	if err != nil {
		return domain.WebhookEndpoint{}, interpretError(err)
	}
	return endpointFromRow(r), nil
}

// ListWebhookEndpoints lists a workspace's endpoints, oldest first; there
// are at most the quota's number.
func (s *Store) ListWebhookEndpoints(ctx context.Context, workspaceID domain.ID) ([]domain.WebhookEndpoint, error) {
	rows, err := s.q.WebhookEndpointList(ctx, s.pool, workspaceID)
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]domain.WebhookEndpoint, len(rows))
	for i, r := range rows {
		out[i] = endpointFromRow(r)
	}
	return out, nil
}

// DeleteWebhookEndpoint marks an endpoint deleted, one row's update
// whatever its backlog; PurgeDeletedWebhookEndpoints deletes its
// deliveries and its row.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id domain.ID) error {
	n, err := s.q.WebhookEndpointDelete(ctx, s.pool, id)
	if err != nil {
		return interpretError(err)
	}
	if n == 0 {
		return ports.ErrNotFound
	}
	return nil
}

// ListWebhookDeliveries pages through an endpoint's deliveries, newest
// first.
func (s *Store) ListWebhookDeliveries(ctx context.Context, endpointID domain.ID, status *domain.DeliveryStatus, limit int, before *ports.DeliveryCursor) ([]domain.WebhookDelivery, error) {
	p := dbsqlc.WebhookDeliveryListParams{EndpointID: endpointID, MaxRows: int32(limit)}
	if status != nil {
		st := string(*status)
		p.Status = &st
	}
	if before != nil {
		p.BeforeCreatedAt, p.BeforeID = &before.CreatedAt, &before.ID
	}
	rows, err := s.q.WebhookDeliveryList(ctx, s.pool, p)
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]domain.WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = deliveryFromRow(r)
	}
	return out, nil
}

// GetWebhookDelivery reads one delivery.
func (s *Store) GetWebhookDelivery(ctx context.Context, id domain.ID) (domain.WebhookDelivery, error) {
	r, err := s.q.WebhookDeliveryGet(ctx, s.pool, id)
	if err != nil {
		return domain.WebhookDelivery{}, interpretError(err)
	}
	return deliveryFromRow(dbsqlc.WebhookDelivery{
		ID: r.ID, EndpointID: r.EndpointID, WorkspaceID: r.WorkspaceID, ExecutionID: r.ExecutionID, EventType: r.EventType,
		Payload: r.Payload, Status: r.Status, Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt, WindowStart: r.WindowStart,
		LastStatusCode: r.LastStatusCode, LastError: r.LastError, CreatedAt: r.CreatedAt, DeliveredAt: r.DeliveredAt,
	}), nil
}

// ResendWebhookDelivery makes a delivery due now and wakes the senders.
// A delivery that is not PENDING becomes one again only while its
// workspace is under its bound of PENDING deliveries, counted under the
// workspace's delivery lock as an execution's end counts it.
func (s *Store) ResendWebhookDelivery(ctx context.Context, id domain.ID) (domain.WebhookDelivery, error) {
	var out domain.WebhookDelivery
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		d, err := s.q.WebhookDeliveryGet(ctx, tx, id)
		if err != nil {
			return interpretError(err)
		}
		if d.Status != string(domain.DeliveryPending) {
			if err = s.roomToResend(ctx, tx, d.WorkspaceID); err != nil {
				return err
			}
		}
		r, err := s.q.WebhookDeliveryResend(ctx, tx, id)
		if err != nil {
			return interpretError(err)
		}
		out = deliveryFromRow(r)
		wakeAfterCommit(tx, WebhookChannel)
		return nil
	})
	return out, err
}

// roomToResend refuses, under the workspace's delivery lock, to make one
// more of its deliveries PENDING when it already has its bound of them.
func (s *Store) roomToResend(ctx context.Context, tx pgx.Tx, ws domain.ID) error {
	if err := s.q.WebhookDeliveriesLockWorkspace(ctx, tx, ws); err != nil {
		return err
	}
	held, err := s.q.WebhookDeliveriesCount(ctx, tx, dbsqlc.WebhookDeliveriesCountParams{
		WorkspaceID: ws, MaxStored: int32(s.deliveries.Stored), MaxPending: int32(s.deliveries.Pending),
	})
	if err != nil {
		return err
	}
	if int(held.Pending) >= s.deliveries.Pending {
		return &domain.QuotaError{Quota: "pending webhook deliveries", Limit: s.deliveries.Pending, RetryAfter: time.Minute}
	}
	return nil
}

// ClaimWebhookDeliveries claims due deliveries for one attempt each.
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, limit, perWorkspace int, busy map[domain.ID]int, lease time.Duration) ([]ports.ClaimedDelivery, error) {
	p := dbsqlc.WebhookDeliveriesClaimParams{
		LeaseSeconds: lease.Seconds(), PerWorkspace: int32(perWorkspace), MaxRows: int32(limit),
		BusyWorkspaceIds: make([]domain.ID, 0, len(busy)), BusyCounts: make([]int32, 0, len(busy)),
	}
	for ws, n := range busy {
		p.BusyWorkspaceIds = append(p.BusyWorkspaceIds, ws)
		p.BusyCounts = append(p.BusyCounts, int32(n))
	}
	rows, err := s.q.WebhookDeliveriesClaim(ctx, s.pool, p)
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]ports.ClaimedDelivery, 0, len(rows))
	for _, r := range rows {
		secret, err := s.secrets.endpointSecret(r.EndpointID, r.Secret, r.SecretSealed, r.SecretKeyID)
		if err != nil {
			// Not sent unsigned, nor with a wrong signature: the claim's
			// lease runs out and it is due again, for a process with the
			// right key, and until then each claim logs why.
			s.log.Error("a webhook delivery is not sent: its endpoint's secret does not open", "delivery_id", r.ID, "error", err)
			continue
		}
		out = append(out, ports.ClaimedDelivery{
			Delivery: domain.WebhookDelivery{
				ID: r.ID, EndpointID: r.EndpointID, WorkspaceID: r.WorkspaceID, Event: domain.WebhookEvent(r.EventType),
				Payload: r.Payload, Status: domain.DeliveryPending, Attempts: int(r.Attempts),
			},
			WindowStart: r.WindowStart, URL: r.Url, Secret: secret,
		})
	}
	return out, nil
}

// RecordWebhookAttempt records a claimed attempt's end, fenced by its
// attempt number.
func (s *Store) RecordWebhookAttempt(ctx context.Context, a ports.WebhookAttempt) (bool, error) {
	p := dbsqlc.WebhookDeliveryRecordAttemptParams{
		Status: string(a.Status), LastError: a.Error, NextAttemptAt: a.NextAttemptAt, ID: a.ID, Attempts: int32(a.Attempt),
	}
	if a.StatusCode != nil {
		c := int32(*a.StatusCode)
		p.LastStatusCode = &c
	}
	n, err := s.q.WebhookDeliveryRecordAttempt(ctx, s.pool, p)
	return n == 1, interpretError(err)
}

// DeleteFinishedWebhookDeliveries is the deliveries' retention.
func (s *Store) DeleteFinishedWebhookDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := s.q.WebhookDeliveriesDeleteFinished(ctx, s.pool, dbsqlc.WebhookDeliveriesDeleteFinishedParams{Before: before, MaxRows: int32(limit)})
	return int(n), interpretError(err)
}

// PurgeDeletedWebhookEndpoints deletes a batch of at most limit
// deliveries of deleted endpoints and, once a batch comes back short,
// the deleted endpoints left without any; it says how many rows it
// deleted, deliveries first.
func (s *Store) PurgeDeletedWebhookEndpoints(ctx context.Context, limit int) (deliveries, endpoints int, err error) {
	n, err := s.q.WebhookDeliveriesDeleteOfDeleted(ctx, s.pool, int32(limit))
	if err != nil || int(n) == limit {
		return int(n), 0, interpretError(err)
	}
	m, err := s.q.WebhookEndpointsDeleteEmptied(ctx, s.pool, int32(limit))
	return int(n), int(m), interpretError(err)
}

func endpointFromRow(r dbsqlc.WebhookEndpoint) domain.WebhookEndpoint {
	events := make([]domain.WebhookEvent, len(r.Events))
	for i, e := range r.Events {
		events[i] = domain.WebhookEvent(e)
	}
	return domain.WebhookEndpoint{
		ID: r.ID, WorkspaceID: r.WorkspaceID, URL: r.Url, Events: events, DefinitionID: r.WorkflowDefinitionID,
		CreatedAt: r.CreatedAt, DeliveriesDropped: r.DeliveriesDropped, LastDroppedAt: r.LastDroppedAt,
	}
}

func deliveryFromRow(r dbsqlc.WebhookDelivery) domain.WebhookDelivery {
	d := domain.WebhookDelivery{
		ID: r.ID, EndpointID: r.EndpointID, WorkspaceID: r.WorkspaceID, ExecutionID: r.ExecutionID,
		Event: domain.WebhookEvent(r.EventType), Payload: r.Payload, Status: domain.DeliveryStatus(r.Status),
		Attempts: int(r.Attempts), NextAttemptAt: r.NextAttemptAt, LastError: r.LastError, CreatedAt: r.CreatedAt,
		DeliveredAt: r.DeliveredAt,
	}
	if r.LastStatusCode != nil {
		c := int(*r.LastStatusCode)
		d.LastStatusCode = &c
	}
	return d
}
