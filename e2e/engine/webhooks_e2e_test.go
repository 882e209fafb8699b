package engine

import (
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

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
