package console

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestConsoleRunPageFollowsItsStreamWithoutPolling: a run page opened
// while its run waits on a 12 s DELAY turns COMPLETED by itself, having
// read the run's event stream and loaded the run again only on its
// events: at most 3 loads of the run in the 4 s or more between the page's
// load and the run's end, where a once-a-second poll makes at least 4.
func TestConsoleRunPageFollowsItsStreamWithoutPolling(t *testing.T) {
	base := harness.StartSluice(t, nil)
	b := newBrowser(t)
	e := harness.NewE2E(t, base)
	b.do(chromedp.Navigate(base + "/"))
	b.signIn(harness.TestAdminToken)
	exec := e.StartIn(map[string]any{
		"nodes": []any{
			harness.Node("a", "TRANSFORM", map[string]any{"output": map[string]any{"x": 1}}),
			harness.Node("wait", "DELAY", map[string]any{"duration": "12s"}),
			harness.Node("b", "TRANSFORM", map[string]any{"output": map[string]any{"y": 2}}),
		},
		"edges": []any{harness.Edge("a", "wait"), harness.Edge("wait", "b")},
	}, nil)
	b.do(chromedp.Navigate(base + "/ui/#/executions/" + exec))
	b.waitFor("the run page while it runs", `document.querySelector("h1 .badge")?.dataset.status === "RUNNING"`, 15*time.Second)
	loaded := evalJS[float64](b, `performance.now()`)
	started := time.Now()
	b.waitFor("the run to complete without a reload", `document.querySelector("h1 .badge")?.dataset.status === "COMPLETED"`, 30*time.Second)
	took := time.Since(started)

	// The requests the page made after it loaded, by URL.
	urls := evalJS[[]string](b, `performance.getEntriesByType("resource").filter(r => r.startTime > `+
		formatFloat(loaded)+`).map(r => r.name)`)
	runURL := "/api/v1/workflow/executions/" + exec
	loads, other := 0, []string{}
	for _, u := range urls {
		switch {
		case strings.HasSuffix(u, runURL):
			loads++
		case strings.Contains(u, runURL+"/events"):
		default:
			other = append(other, u)
		}
	}
	t.Logf("after the page loaded the run took %s to complete; the page loaded the run %d times (requests %v)", took.Round(time.Millisecond), loads, urls)
	if took < 4*time.Second {
		t.Fatalf("the run completed %s after the page loaded: too soon for the test to tell polling from following", took)
	}
	if loads > 3 || len(other) > 0 {
		t.Fatalf("after the page loaded it loaded the run %d times and made %v: want only loads on events (at most 3)", loads, other)
	}
	if !evalJS[bool](b, `document.querySelector("svg.dag g.dag-node[data-node=b]")?.dataset.status === "COMPLETED"`) {
		t.Fatal("the last node is not shown COMPLETED")
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }

// TestConsoleWebhooksPageSendsADeliveryAgain: a workspace's webhooks page
// lists its endpoint's delivery with its attempts and the receiver's last
// answer (500), and its Send again button makes the sender try again at
// once, although its next retry is an hour away.
func TestConsoleWebhooksPageSendsADeliveryAgain(t *testing.T) {
	rc := harness.NewWebhookReceiver(t, func(int, *http.Request) int { return http.StatusInternalServerError })
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_WEBHOOK_CA_FILE":    harness.WebhookCAFile(t, rc.Srv),
		"SLUICE_WEBHOOK_RETRY_BASE": "1h",
	})
	b := newBrowser(t)
	e := harness.NewE2E(t, base)
	harness.RegisterWebhook(t, base, e.Ws, rc.Srv.URL+"/hook")
	e.WaitFor(e.StartIn(harness.OneTransform, nil), "COMPLETED")
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the first attempt", func() bool { return rc.Count() == 1 }))

	b.do(chromedp.Navigate(base + "/"))
	b.signIn(harness.TestAdminToken)
	b.do(chromedp.Navigate(base + "/ui/#/workspaces/" + e.Ws + "/webhooks"))
	b.waitFor("the delivery's row with its 500", `document.querySelector("#webhooks tr[data-delivery]")?.innerText.includes("500")`, 15*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`#webhooks tr[data-delivery] button`)))
	porttest.Eventually(t, 15*time.Second, porttest.Holds("the delivery to be sent again", func() bool { return rc.Count() == 2 }))
	// The page has no stream of deliveries: it is opened again until the
	// second attempt is recorded.
	b.waitFor("the page to show the second attempt", `(() => {
		const ok = document.querySelector("#webhooks tr[data-delivery] td:nth-child(4)")?.innerText === "2";
		if (!ok && !window.__reopened) { window.__reopened = true; setTimeout(() => { window.__reopened = false; window.dispatchEvent(new HashChangeEvent("hashchange")); }, 300); }
		return ok;
	})()`, 15*time.Second)
}
