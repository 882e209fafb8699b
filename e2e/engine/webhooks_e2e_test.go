package engine

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/cmd/sluice/service"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

type deliveryView struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	Attempts       int    `json:"attempts"`
	LastStatusCode *int   `json:"lastStatusCode"`
	ExecutionID    string `json:"executionId"`
}

func listDeliveries(t *testing.T, base, endpoint string) []deliveryView {
	t.Helper()
	var page struct {
		Items []deliveryView `json:"items"`
	}
	if code := harness.Call(t, "GET", base+"/api/v1/webhooks/endpoints/"+endpoint+"/deliveries", harness.TestAdminToken, nil, &page); code != 200 {
		t.Fatalf("list deliveries: %d", code)
	}
	return page.Items
}

// TestAWebhookFailedThreeTimesArrivesOnceAcceptedAndVerifies: a receiver
// that answers 500 to the first three deliveries and 200 to the fourth
// gets the completion webhook four times with one webhook-id, the
// accepted one passes the Standard Webhooks library's Verify with the
// endpoint's secret, and nothing is sent after it was accepted.
func TestAWebhookFailedThreeTimesArrivesOnceAcceptedAndVerifies(t *testing.T) {
	rc := harness.NewWebhookReceiver(t, func(n int, _ *http.Request) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_WEBHOOK_CA_FILE":       harness.WebhookCAFile(t, rc.Srv),
		"SLUICE_WEBHOOK_RETRY_BASE":    "100ms",
		"SLUICE_WEBHOOK_POLL_INTERVAL": "50ms",
	})
	e := harness.NewE2E(t, base)
	endpoint, secret := harness.RegisterWebhook(t, base, e.Ws, rc.Srv.URL+"/hook")
	exec := e.StartIn(harness.OneTransform, nil)
	e.WaitFor(exec, "COMPLETED")

	var d deliveryView
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the delivery to be DELIVERED", func() bool {
		ds := listDeliveries(t, base, endpoint)
		if len(ds) == 1 {
			d = ds[0]
		}
		return d.Status == "DELIVERED"
	}))
	if d.Attempts != 4 || d.LastStatusCode == nil || *d.LastStatusCode != 200 || d.ExecutionID != exec {
		t.Fatalf("delivery = %+v, want 4 attempts ending 200 for execution %s", d, exec)
	}
	rc.Mu.Lock()
	defer rc.Mu.Unlock()
	if len(rc.Bodies) != 4 {
		t.Fatalf("receiver got %d requests, want 4 (3 refused, 1 accepted)", len(rc.Bodies))
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range rc.Heads {
		if h.Get("webhook-id") != d.ID {
			t.Errorf("request %d: webhook-id %q, want the delivery's id %s on every attempt", i+1, h.Get("webhook-id"), d.ID)
		}
		if err := wh.Verify(rc.Bodies[i], h); err != nil {
			t.Errorf("request %d: Standard Webhooks Verify: %v", i+1, err)
		}
	}
	if err := wh.Verify(append([]byte(nil), append(rc.Bodies[3], ' ')...), rc.Heads[3]); err == nil {
		t.Fatal("Verify accepted an altered body: the check proves nothing")
	}
	t.Logf("accepted body: %s", rc.Bodies[3])
}

// TestAReceiverThatNeverAnswersDelaysNoOtherWorkspace: workspace A's
// endpoint never answers (more deliveries of it hang than a workspace may
// have in flight); workspace B's completion webhook still arrives within
// a second of its execution's end.
func TestAReceiverThatNeverAnswersDelaysNoOtherWorkspace(t *testing.T) {
	hang := make(chan struct{})
	hung := harness.NewWebhookReceiver(t, func(_ int, r *http.Request) int {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	t.Cleanup(func() { close(hang) }) // runs before the server's Close
	fast := harness.NewWebhookReceiver(t, func(int, *http.Request) int { return http.StatusNoContent })
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_WEBHOOK_CA_FILE": harness.WebhookCAFile(t, hung.Srv),
		"SLUICE_WEBHOOK_TIMEOUT": "30s",
	})
	a, b := harness.NewE2E(t, base), harness.NewE2E(t, base)
	harness.RegisterWebhook(t, base, a.Ws, hung.Srv.URL+"/never")
	harness.RegisterWebhook(t, base, b.Ws, fast.Srv.URL+"/fast")

	// More of A's deliveries than a workspace may have in flight (4).
	for range 6 {
		a.WaitFor(a.StartIn(harness.OneTransform, nil), "COMPLETED")
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("A's receiver to hold 4 requests", func() bool { return hung.Count() >= 4 }))

	exec := b.StartIn(harness.OneTransform, nil)
	var ex struct {
		CompletedAt time.Time `json:"completedAt"`
		Status      string    `json:"status"`
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("B's webhook", func() bool { return fast.Count() == 1 }))
	harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+exec, harness.TestAdminToken, nil, &ex)
	fast.Mu.Lock()
	arrived := fast.Times[0]
	fast.Mu.Unlock()
	delay := arrived.Sub(ex.CompletedAt)
	t.Logf("B's webhook arrived %s after its execution ended, with %d of A's requests hanging", delay, hung.Count())
	if ex.Status != "COMPLETED" || delay > time.Second {
		t.Fatalf("B's webhook arrived %s after its execution ended (status %s), want within 1s", delay, ex.Status)
	}
}

// TestDeletingAnEndpointWith200000DeliveriesIsBoundedAndStopsItsSends:
// an endpoint whose receiver answers 500 has 200,000 deliveries (50,000
// of them PENDING and due, so the sender is sending them when the delete
// comes), and one of its delivered ones is locked by another transaction
// while the delete runs, as the purge's batches and the senders' records
// lock theirs. The API deletes it within a second (before, one statement
// cascaded every delivery, waiting for every row lock, here until the
// API's statement timeout answered 500); after the answer at most the attempts then
// in flight (a workspace's places, 4) arrive, a run that ends in the
// workspace writes nothing to it, and the senders' purge removes its
// deliveries in batches and then its row.
func TestDeletingAnEndpointWith200000DeliveriesIsBoundedAndStopsItsSends(t *testing.T) {
	const deliveries, pending, inFlightMax = 200_000, 50_000, 4
	rc := harness.NewWebhookReceiver(t, func(int, *http.Request) int { return http.StatusInternalServerError })
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_WEBHOOK_CA_FILE":               harness.WebhookCAFile(t, rc.Srv),
		"SLUICE_WEBHOOK_POLL_INTERVAL":         "50ms",
		"SLUICE_WEBHOOK_PURGE_INTERVAL":        "200ms",
		"SLUICE_WEBHOOK_WORKSPACE_CONCURRENCY": strconv.Itoa(inFlightMax),
	})
	ctx := context.Background()
	db, err := pgxpool.New(ctx, harness.AppsByBase[base].DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e := harness.NewE2E(t, base)
	endpoint, _ := harness.RegisterWebhook(t, base, e.Ws, rc.Srv.URL+"/hook")
	if _, err := db.Exec(ctx, `
		INSERT INTO webhook_deliveries (id, endpoint_id, workspace_id, execution_id, event_type, payload, status, attempts, delivered_at)
		SELECT gen_random_uuid(), $1, $2, gen_random_uuid(), 'execution.completed', '{"type":"execution.completed"}',
		       CASE WHEN g <= $4 THEN 'PENDING' ELSE 'DELIVERED' END, 1, CASE WHEN g > $4 THEN now() END
		FROM generate_series(1, $3::int) g`, endpoint, e.Ws, deliveries, pending); err != nil {
		t.Fatal(err)
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the sender to be sending the backlog", func() bool { return rc.Count() > 0 }))
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT id FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'DELIVERED' LIMIT 1 FOR UPDATE`, endpoint); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	code := harness.Call(t, "DELETE", base+"/api/v1/webhooks/endpoints/"+endpoint, harness.TestAdminToken, nil, nil)
	took := time.Since(start)
	atDelete := rc.Count()
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusNoContent {
		t.Fatalf("delete answered %d after %s, want 204", code, took)
	}
	if took > time.Second {
		t.Fatalf("deleting an endpoint with %d deliveries took %s, want under 1 s", deliveries, took)
	}
	if code := harness.Call(t, "GET", base+"/api/v1/webhooks/endpoints/"+endpoint, harness.TestAdminToken, nil, nil); code != http.StatusNotFound {
		t.Fatalf("the deleted endpoint answered %d, want 404", code)
	}

	exec := e.StartIn(harness.OneTransform, nil)
	e.WaitFor(exec, "COMPLETED")
	purgeStart := time.Now()
	porttest.Eventually(t, 3*time.Minute, porttest.Holds("the purge to remove the endpoint and its deliveries", func() bool {
		var rows, left int
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_endpoints WHERE id = $1), (SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1)`,
			endpoint).Scan(&rows, &left); err != nil {
			t.Fatal(err)
		}
		return rows == 0 && left == 0
	}))
	var ofTheRun int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE execution_id = $1`, exec).Scan(&ofTheRun); err != nil {
		t.Fatal(err)
	}
	after := rc.Count() - atDelete
	t.Logf("delete of an endpoint with %d deliveries (%d pending): 204 in %s; %d requests before it, %d after (at most %d in flight); purged %s after the run ended",
		deliveries, pending, took, atDelete, after, inFlightMax, time.Since(purgeStart))
	if after > inFlightMax {
		t.Fatalf("the receiver got %d requests after the delete, more than the %d that could be in flight", after, inFlightMax)
	}
	if ofTheRun != 0 {
		t.Fatalf("the run that ended after the delete wrote %d deliveries", ofTheRun)
	}
}

// TestARoleWithoutTheSecretKeyRefusesToStartOverStoredEndpoints: once an
// endpoint is stored, an api or worker process started without
// SLUICE_WEBHOOK_SECRET_KEY refuses to start naming the variable (it
// could neither create nor send to an endpoint), and one started with the
// key starts.
func TestARoleWithoutTheSecretKeyRefusesToStartOverStoredEndpoints(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	harness.RegisterWebhook(t, base, e.Ws, harness.PublicHookURL)
	for _, role := range []struct {
		name   string
		module fx.Option
	}{{"api", service.APIModule}, {"worker", service.WorkerModule}} {
		for _, key := range []string{"", harness.TestWebhookSecretKey} {
			env := map[string]string{
				"DATABASE_URL": harness.AppsByBase[base].DBURL, "TEMPORAL_ADDRESS": harness.TemporalAddress(t),
				"TEMPORAL_TASK_QUEUE_PREFIX": "t" + uuid.NewString()[:8] + ".", "SLUICE_HTTP_ADDR": "127.0.0.1:0",
				"SLUICE_ADMIN_ADDR": "127.0.0.1:0", "SLUICE_ADMIN_TOKEN": harness.TestAdminToken, "SLUICE_LOG_LEVEL": "error",
				"SLUICE_WEBHOOK_SECRET_KEY": key,
			}
			cfg, err := service.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true)
			if err != nil {
				t.Fatal(err)
			}
			app := fx.New(service.CommonModule, role.module, fx.Supply(cfg), fx.NopLogger)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = app.Start(ctx)
			cancel()
			if err == nil {
				stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_ = app.Stop(stop)
				cancel()
			}
			switch {
			case key == "" && (err == nil || !strings.Contains(err.Error(), "SLUICE_WEBHOOK_SECRET_KEY")):
				t.Errorf("%s without a key over a stored endpoint: start error %v, want a refusal naming SLUICE_WEBHOOK_SECRET_KEY", role.name, err)
			case key != "" && err != nil:
				t.Errorf("%s with the key: %v", role.name, err)
			case key == "":
				t.Logf("%s without a key: %v", role.name, err)
			}
		}
	}
}
