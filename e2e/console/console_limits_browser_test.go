package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestConsoleShowsWhyItemsWaitAndTheAdminEditsLimits: in a real browser,
// the queue page says why a PENDING item waits: one held by its FREE
// workspace's limit (1 of 1 running), one held by its key's limit (key
// acme, 1 of 1) and one delayed by its notBefore (when it can go); a
// reason it has no words for is shown by its name and fields, and the
// pool's reasons (POOL_FULL, FLOOR_OWNERS) in words. The admin then edits a plan's limit and the workspace's
// own limit in the console (a refused value is shown next to its field),
// and the API returns the new values; and the outbound limits page lists
// a host an upstream's Retry-After paused, adds a host (a bad host name
// refused next to its field) and deletes it.
func TestConsoleShowsWhyItemsWaitAndTheAdminEditsLimits(t *testing.T) {
	base := harness.StartSluice(t, nil)
	b := newBrowser(t)
	admin := func(method, path string, body, out any) int {
		t.Helper()
		return harness.Call(t, method, base+"/api/v1"+path, harness.TestAdminToken, body, out)
	}
	waiting := map[string]any{"nodes": []any{harness.Node("approve", "WAIT_FOR_EVENT", map[string]any{"event": "approval"})}}
	keyed := map[string]any{"nodes": waiting["nodes"], "concurrency": map[string]any{"key": "{{ input.customer }}", "limit": 1}}
	// enqueue starts the definition's graph twice in a new workspace: the
	// first runs (waiting for its event), the second is held PENDING.
	enqueue := func(plan string, graph map[string]any, input map[string]any) (ws, held string) {
		t.Helper()
		e := harness.NewE2EWithPlan(t, base, plan)
		first := e.StartIn(graph, input)
		harness.WaitRun(t, base, first, time.Minute, "the first run to wait for its event", harness.NodeIs("approve", "RUNNING"))
		var def struct{ Items []struct{ ID string } }
		admin("GET", "/workflow/definitions?workspaceId="+e.Ws, nil, &def)
		var q struct {
			QueueID string `json:"queueId"`
		}
		if code := admin("POST", "/workflow/executions/start", map[string]any{"workspaceId": e.Ws, "workflowDefinitionId": def.Items[0].ID, "input": input}, &q); code != 202 {
			t.Fatalf("second start: %d", code)
		}
		return e.Ws, q.QueueID
	}
	freeWS, byWorkspace := enqueue("FREE", waiting, map[string]any{})
	keyWS, byKey := enqueue("PRO", keyed, map[string]any{"customer": "acme"})
	// An item of a free key, delayed an hour: only its notBefore holds it.
	var keyedDefs struct{ Items []struct{ ID string } }
	admin("GET", "/workflow/definitions?workspaceId="+keyWS, nil, &keyedDefs)
	var delayed struct {
		QueueID string `json:"queueId"`
	}
	if code := admin("POST", "/workflow/executions/start", map[string]any{"workspaceId": keyWS, "workflowDefinitionId": keyedDefs.Items[0].ID,
		"input": map[string]any{"customer": "zeta"}, "notBefore": time.Now().Add(time.Hour)}, &delayed); code != 202 {
		t.Fatalf("delayed start: %d", code)
	}

	b.do(chromedp.Navigate(base + "/"))
	b.signIn(harness.TestAdminToken)

	// The waiting reasons, in words, with their figures.
	reasonOf := func(ws, item, reason, want string) {
		t.Helper()
		b.do(chromedp.Navigate(base + "/ui/#/workspaces/" + ws + "/queue?status=PENDING"))
		sel := `#queue tr[data-queue="` + item + `"] .waiting[data-reason="` + reason + `"]`
		b.waitFor(reason+" on the queue page", `document.querySelector('`+sel+`') !== null`, 30*time.Second)
		if got := evalJS[string](b, `document.querySelector('`+sel+`').innerText`); !strings.Contains(got, want) {
			t.Errorf("the item held by %s reads %q, want %q in it", reason, got, want)
		}
	}
	reasonOf(freeWS, byWorkspace, "WORKSPACE_LIMIT", "Workspace limit: 1 of 1 running")
	reasonOf(keyWS, byKey, "KEY_LIMIT", "Key acme: 1 of 1 running")
	reasonOf(keyWS, delayed.QueueID, "NOT_BEFORE", "Delayed start (notBefore) · can go at ")
	// An hour ahead reads "in 59m …s" once a second has passed since the
	// enqueue, "in 1h 0m" within it: either is the time left.
	sel := `#queue tr[data-queue="` + delayed.QueueID + `"] .waiting[data-reason="NOT_BEFORE"]`
	if got := evalJS[string](b, `document.querySelector('`+sel+`').innerText`); !strings.Contains(got, " (in 59m ") && !strings.Contains(got, " (in 1h 0m)") {
		t.Errorf("the item held by NOT_BEFORE reads %q, want the hour left in it", got)
	}
	b.screenshot("console-queue-waiting")
	// A reason the console has no words for, and fields it does not know
	// (as a start rate's may be), are shown by their names and values,
	// with a time as when the item can go.
	evalJS[bool](b, `void import("./waiting.js").then((m) => { window.unknownReason = m.waitingView({reason: "SOME_NEW_REASON", rate: {perSecond: 10, burst: 20}, nextAt: new Date(Date.now() + 90000).toISOString()}).innerText; }); true`)
	b.waitFor("the unknown reason drawn", `typeof window.unknownReason === "string"`, 5*time.Second)
	got := evalJS[string](b, `window.unknownReason`)
	for _, want := range []string{"Some new reason · rate per second 10, burst 20 · next at ", " (in 1m 30s)"} {
		if !strings.Contains(got, want) && !strings.Contains(got, strings.Replace(want, "30s", "29s", 1)) {
			t.Errorf("an unknown reason reads %q, want %q in it", got, want)
		}
	}

	// The pool's reasons, in words with their figures.
	evalJS[bool](b, `void import("./waiting.js").then((m) => { window.poolReasons = [m.waitingView({reason: "POOL_FULL", limit: 100, running: 100}).innerText, m.waitingView({reason: "FLOOR_OWNERS", limit: 100, running: 97, reserved: 3}).innerText]; }); true`)
	b.waitFor("the pool's reasons drawn", `Array.isArray(window.poolReasons)`, 5*time.Second)
	for i, want := range []string{"Pool full: 100 of 100 running", "Waiting for floors' owners: 3 free slots of the pool held for workspaces below their floor (97 of 100 running)"} {
		if got := evalJS[[]string](b, `window.poolReasons`); len(got) != 2 || got[i] != want {
			t.Errorf("the pool's reasons read %q, want %q", got, want)
		}
	}

	// The admin edits a plan's limit: first a value the API refuses, shown
	// next to the field, then one it takes.
	b.follow(`#nav a[href="#/plans"]`)
	input := `#plans section[data-plan="PRO"] .limit-field[data-field="/maxRunning"]`
	b.do(chromedp.WaitVisible(chromedp.CSS(input+" input")),
		chromedp.SetValue(chromedp.CSS(input+" input"), "0"),
		chromedp.Click(chromedp.CSS(input+" button.save")))
	b.waitFor("the refusal next to maxRunning", `document.querySelector('`+input+` .field-error').innerText.trim() !== ""`, 15*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS(input+" input"), "7"), chromedp.Click(chromedp.CSS(input+" button.save")))
	b.waitFor("the plan saved", `document.querySelector('#plans section[data-plan="PRO"] .notice') !== null`, 15*time.Second)
	var plans []struct {
		Plan       string
		MaxRunning int
	}
	admin("GET", "/plans", nil, &plans)
	for _, p := range plans {
		if p.Plan == "PRO" && p.MaxRunning != 7 {
			t.Errorf("after the edit the API says PRO runs %d, want 7", p.MaxRunning)
		}
	}
	b.screenshot("console-plans")
	b.narrow("console-plans")

	// ...and the workspace's own limit: set, then cleared.
	b.do(chromedp.Navigate(base + "/ui/#/workspaces/" + keyWS + "/limits"))
	own := `#workspace-limits .limit-field[data-field="/maxRunning"]`
	b.do(chromedp.WaitVisible(chromedp.CSS(own+" input")),
		chromedp.SetValue(chromedp.CSS(own+" input"), "3"),
		chromedp.Click(chromedp.CSS(own+" button.save")))
	b.waitFor("the override set", `document.querySelector('`+own+`')?.dataset.own === "true"`, 15*time.Second)
	var limits struct{ MaxRunning *int }
	admin("GET", "/workspaces/"+keyWS+"/limits", nil, &limits)
	if limits.MaxRunning == nil || *limits.MaxRunning != 3 {
		t.Errorf("after the edit the API says the workspace's own maxRunning is %v, want 3", limits.MaxRunning)
	}
	b.screenshot("console-workspace-limits")
	b.narrow("console-workspace-limits")
	b.do(chromedp.Click(chromedp.CSS(own + " button.clear")))
	b.waitFor("the override cleared", `document.querySelector('`+own+`')?.dataset.own === "false"`, 15*time.Second)
	limits.MaxRunning = nil
	admin("GET", "/workspaces/"+keyWS+"/limits", nil, &limits)
	if limits.MaxRunning != nil {
		t.Errorf("after Clear the API says the workspace's own maxRunning is %d, want null", *limits.MaxRunning)
	}

	// An upstream answers the workspace's call 429 with Retry-After: 60,
	// which pauses its host for the workspace; the outbound limits page
	// lists it as paused, without a limit. It adds a host and deletes it.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	defer upstream.Close()
	(&harness.E2E{T: t, Base: base, Ws: keyWS}).StartIn(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": upstream.URL})}}, nil)
	porttest.Eventually(t, time.Minute, porttest.Holds("the upstream's host paused", func() bool {
		var pauses []struct{ Host string }
		admin("GET", "/workspaces/"+keyWS+"/outbound-pauses", nil, &pauses)
		return len(pauses) == 1
	}))
	b.follow(`nav.tabs a[href="#/workspaces/` + keyWS + `/outbound"]`)
	b.do(chromedp.WaitVisible(chromedp.CSS("#outbound-host")),
		chromedp.SetValue(chromedp.CSS("#outbound-host"), "bad host!"),
		chromedp.SetValue(chromedp.CSS("#outbound-rate"), "5"),
		chromedp.SetValue(chromedp.CSS("#outbound-burst"), "10"),
		chromedp.Click(chromedp.CSS(`#outbound-form button[type="submit"]`)))
	b.waitFor("the bad host refused next to its field", `document.getElementById("outbound-host-error").innerText.trim() !== ""`, 15*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS("#outbound-host"), "API.Example.com"),
		chromedp.Click(chromedp.CSS(`#outbound-form button[type="submit"]`)))
	row := `#outbound tr[data-host="api.example.com"]`
	b.waitFor("the host listed", `document.querySelector('`+row+`') !== null`, 15*time.Second)
	paused := `#outbound tr[data-host="127.0.0.1"][data-paused="true"]`
	if got := evalJS[string](b, `document.querySelector('`+paused+`')?.innerText ?? ""`); !strings.Contains(got, "until") || !strings.Contains(got, "no limit") {
		t.Errorf("the paused host's row reads %q, want it paused until a time, with no limit", got)
	}
	var hosts []struct {
		Host              string
		RequestsPerSecond float64
		Burst             int
	}
	admin("GET", "/workspaces/"+keyWS+"/outbound-limits", nil, &hosts)
	if len(hosts) != 1 || hosts[0].Host != "api.example.com" || hosts[0].RequestsPerSecond != 5 || hosts[0].Burst != 10 {
		t.Errorf("after adding, the API lists %+v, want api.example.com at 5/s, burst 10", hosts)
	}
	b.screenshot("console-outbound")
	b.narrow("console-outbound")
	b.do(chromedp.Click(chromedp.CSS(row + " button.danger")))
	b.waitFor("the host gone", `document.querySelector('`+row+`') === null && document.querySelector('`+paused+`') !== null`, 15*time.Second)
	hosts = nil
	admin("GET", "/workspaces/"+keyWS+"/outbound-limits", nil, &hosts)
	if len(hosts) != 0 {
		t.Errorf("after Delete, the API lists %+v, want none", hosts)
	}
}
