package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// webhookFixture registers a webhook endpoint in ws with c and adds a
// FAILED delivery of exec to it (as the sender leaves one that ran out of
// retries), returning both ids.
func webhookFixture(t *testing.T, s *harness.Stack, c *client.ClientWithResponses, ws, exec uuid.UUID) (endpoint, delivery uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	ce, err := c.CreateWebhookEndpointWithResponse(ctx, client.CreateWebhookEndpointRequest{
		WorkspaceID: ws, URL: harness.PublicHookURL, Events: []client.WebhookEvent{client.ExecutionCompleted, client.ExecutionFailed},
	})
	status(t, "createWebhookEndpoint", ce, err, http.StatusCreated)
	if !strings.HasPrefix(ce.JSON201.Secret, "whsec_") {
		t.Fatalf("the endpoint's secret %q is not a whsec_ secret", ce.JSON201.Secret)
	}
	delivery = uuid.New()
	if _, err := s.Pool.Exec(ctx, `INSERT INTO webhook_deliveries (id, endpoint_id, workspace_id, execution_id, event_type, payload, status, attempts, last_status_code, last_error)
		VALUES ($1, $2, $3, $4, 'execution.failed', '{"type":"execution.failed"}', 'FAILED', 3, 500, 'answered HTTP 500')`,
		delivery, ce.JSON201.ID, ws, exec); err != nil {
		t.Fatal(err)
	}
	return ce.JSON201.ID, delivery
}

// exerciseWebhooks calls every webhook operation successfully with key in
// ws: create (the secret is shown once), list and get (without it), the
// deliveries' list, a resend, and delete (after which the endpoint and
// its deliveries answer 404).
func exerciseWebhooks(t *testing.T, s *harness.Stack, key *client.ClientWithResponses, ws, exec uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	endpoint, delivery := webhookFixture(t, s, key, ws, exec)
	le, err := key.ListWebhookEndpointsWithResponse(ctx, &client.ListWebhookEndpointsParams{WorkspaceID: ws})
	status(t, "listWebhookEndpoints", le, err, http.StatusOK)
	if len(*le.JSON200) != 1 || strings.Contains(string(le.Body), "whsec_") {
		t.Errorf("listWebhookEndpoints: %s, want the one endpoint without its secret", le.Body)
	}
	ge, err := key.GetWebhookEndpointWithResponse(ctx, endpoint)
	status(t, "getWebhookEndpoint", ge, err, http.StatusOK)
	if ge.JSON200.URL != harness.PublicHookURL || strings.Contains(string(ge.Body), "whsec_") {
		t.Errorf("getWebhookEndpoint: %s", ge.Body)
	}
	ld, err := key.ListWebhookDeliveriesWithResponse(ctx, endpoint, &client.ListWebhookDeliveriesParams{Status: harness.Ptr(client.DeliveryFailed)})
	status(t, "listWebhookDeliveries", ld, err, http.StatusOK)
	if len(ld.JSON200.Items) != 1 || ld.JSON200.Items[0].Attempts != 3 || *ld.JSON200.Items[0].LastStatusCode != 500 {
		t.Errorf("listWebhookDeliveries: %s", ld.Body)
	}
	rs, err := key.ResendWebhookDeliveryWithResponse(ctx, delivery)
	status(t, "resendWebhookDelivery", rs, err, http.StatusAccepted)
	if rs.JSON202.Status != client.DeliveryPending || rs.JSON202.ID != delivery {
		t.Errorf("resendWebhookDelivery: %s", rs.Body)
	}
	de, err := key.DeleteWebhookEndpointWithResponse(ctx, endpoint)
	status(t, "deleteWebhookEndpoint", de, err, http.StatusNoContent)
	// Deleted at once: no longer shown, its deliveries with it (the
	// webhook senders' purge, which the API tests do not run, removes
	// the rows).
	ge, err = key.GetWebhookEndpointWithResponse(ctx, endpoint)
	status(t, "getWebhookEndpoint after delete", ge, err, http.StatusNotFound)
	ld, err = key.ListWebhookDeliveriesWithResponse(ctx, endpoint, nil)
	status(t, "listWebhookDeliveries after delete", ld, err, http.StatusNotFound)
	rs, err = key.ResendWebhookDeliveryWithResponse(ctx, delivery)
	status(t, "resendWebhookDelivery after delete", rs, err, http.StatusNotFound)
}

// TestNegativeWebhookTargets: a webhook URL that is not https, reaches a
// private, loopback or link-local address (written or resolved), or
// names an unknown event is a 422 naming the field; a definition of
// another workspace is a 403; nothing is stored.
func TestNegativeWebhookTargets(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	for _, tc := range []struct {
		url, path string
	}{
		{"https://10.0.0.1/hook", "/url"},
		{"https://192.168.1.5:8443/hook", "/url"},
		{"https://127.0.0.1/hook", "/url"},
		{"https://[::1]/hook", "/url"},
		{"https://169.254.169.254/latest/meta-data", "/url"},
		{"https://[::ffff:10.1.2.3]/hook", "/url"},
		{"https://localhost/hook", "/url"},
		{"https://93.184.215.14:22/hook", "/url"},
		{"http://93.184.215.14/hook", "/url"},
		{"https://user:pw@93.184.215.14/hook", "/url"},
	} {
		ans := read(a.CreateWebhookEndpoint(ctx, client.CreateWebhookEndpointRequest{
			WorkspaceID: w.wsA, URL: tc.url, Events: []client.WebhookEvent{client.ExecutionCompleted},
		}))
		ans.Expect(t, "webhook to "+tc.url, http.StatusUnprocessableEntity, "invalid-field")
		if paths := ans.FieldPaths(); len(paths) != 1 || paths[0] != tc.path {
			t.Errorf("webhook to %s: fields %v, want [%s]", tc.url, paths, tc.path)
		}
	}
	read(a.CreateWebhookEndpoint(ctx, client.CreateWebhookEndpointRequest{
		WorkspaceID: w.wsA, URL: harness.PublicHookURL, Events: []client.WebhookEvent{client.ExecutionFailed, client.ExecutionFailed},
	})).Expect(t, "an event listed twice", http.StatusUnprocessableEntity, "invalid-field")
	read(a.CreateWebhookEndpoint(ctx, client.CreateWebhookEndpointRequest{
		WorkspaceID: w.wsA, URL: harness.PublicHookURL, Events: []client.WebhookEvent{"execution.started"},
	})).Expect(t, "an unknown event", http.StatusBadRequest, "invalid-request")
	read(a.CreateWebhookEndpoint(ctx, client.CreateWebhookEndpointRequest{
		WorkspaceID: w.wsA, URL: harness.PublicHookURL, Events: []client.WebhookEvent{client.ExecutionCompleted}, WorkflowDefinitionID: &w.defB,
	})).Expect(t, "an endpoint for B's definition in A", http.StatusForbidden, "forbidden")
	var stored int
	if err := w.Pool.QueryRow(ctx, "SELECT count(*) FROM webhook_endpoints WHERE workspace_id = $1", w.wsA).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("refused endpoints stored %d rows (%v)", stored, err)
	}
	w.checkBUntouched(t)
}
