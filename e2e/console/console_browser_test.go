package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// screenshotDir is where the browser test writes the pictures the README
// shows: docs/screenshots at the repository's root.
var screenshotDir = filepath.Join("..", "..", "docs", "screenshots")

// browser is one headless Chromium tab driven over the DevTools protocol.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts Debian's chromium with a fresh profile. Without it the
// test is skipped, unless SLUICE_REQUIRE_INTEGRATION is set (as `make
// test` does, after `make browser` installed it), when it fails.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") != "" {
			t.Fatal("chromium is not installed; `make browser` installs it")
		}
		t.Skip("chromium not installed: browser test skipped (run `make test`)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	// The first action starts the browser, which lives as long as the
	// context it ran with: this one, not a step's shorter one.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx}
}

// do runs steps, each run within 30 s.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// waitFor polls a JavaScript predicate in the page until it holds.
func (b *browser) waitFor(what, predicate string, within time.Duration) {
	b.t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](predicate,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(within)))
	if err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("main").innerText`))
		b.t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, text)
	}
}

func evalJS[T any](b *browser, expression string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expression, err)
	}
	return v
}

// screenshot writes the whole page as docs/screenshots/<name>.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// narrow shows the page at a phone's width, checks that nothing sticks out
// sideways, screenshots it and goes back to the desktop width.
func (b *browser) narrow(name string) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(390, 844))
	b.waitFor("the page to lay out at 390 px", `window.innerWidth === 390`, 5*time.Second)
	if w := evalJS[int](b, `document.documentElement.scrollWidth`); w > 390 {
		b.t.Errorf("%s at 390 px is %d px wide: it scrolls sideways", name, w)
	}
	b.screenshot(name + "-390")
	b.do(chromedp.EmulateViewport(1280, 900))
	b.waitFor("the page to lay out at 1280 px", `window.innerWidth === 1280`, 5*time.Second)
}

// follow clicks a link as a user would and waits until the page is at the
// link's address. A live update can move the link under the pointer between
// finding it and clicking it, so it clicks again while the address is
// unchanged.
func (b *browser) follow(selector string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(selector)))
	href := evalJS[string](b, `document.querySelector(`+strconv.Quote(selector)+`).getAttribute("href")`)
	arrived := `location.hash === ` + strconv.Quote(href)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if evalJS[bool](b, `document.querySelector(`+strconv.Quote(selector)+`) !== null`) {
			b.do(chromedp.Click(chromedp.CSS(selector)))
		}
		_, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](arrived,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(2*time.Second)))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("following %s to %s: %v", selector, href, err)
		}
	}
}

// signIn signs in from the sign-in form, submitting with the Enter key.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), token+"\r"))
	b.waitFor("the workspaces page", `document.querySelectorAll("#workspaces tbody tr[data-workspace]").length > 0`, 15*time.Second)
}

// attr quotes an id for a CSS attribute selector inside a JavaScript
// string in double quotes.
func attr(id string) string { return "'" + id + "'" }

// TestConsoleWalkThrough does the README's walk-through in the web console,
// in a real browser: a workspace key signs in and sees only its workspace,
// creates a definition whose graph is drawn, starts it from the page and
// watches the run's DAG complete; then it cancels a queued item from the
// queue page, and the admin token sees every workspace, updated live. It
// writes the README's screenshots on the way.
func TestConsoleWalkThrough(t *testing.T) {
	base := harness.StartSluice(t, nil)
	b := newBrowser(t)
	admin := func(method, path string, body, out any) int {
		t.Helper()
		return harness.Call(t, method, base+"/api/v1"+path, harness.TestAdminToken, body, out)
	}
	type created struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	newWorkspace := func(name, plan string) string {
		var w created
		if code := admin("POST", "/workspaces", map[string]any{"name": name, "plan": plan}, &w); code != 201 {
			t.Fatalf("create workspace %s: %d", name, code)
		}
		return w.ID
	}
	newDefinition := func(workspaceID, name string, nodes []any) string {
		var d created
		if code := admin("POST", "/workflow/definitions", map[string]any{"workspaceId": workspaceID, "name": name,
			"graph": map[string]any{"nodes": nodes}}, &d); code != 201 {
			t.Fatalf("create definition %s: %d", name, code)
		}
		return d.ID
	}
	enqueue := func(token, workspaceID, definitionID string, input map[string]any) string {
		var q struct {
			QueueID string `json:"queueId"`
		}
		body := map[string]any{"workspaceId": workspaceID, "workflowDefinitionId": definitionID}
		if input != nil {
			body["input"] = input
		}
		if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", token, body, &q); code != 202 {
			t.Fatalf("enqueue: %d", code)
		}
		return q.QueueID
	}
	delay := []any{map[string]any{"key": "wait", "type": "DELAY", "config": map[string]any{"duration": "10m"}}}

	// The admin makes the workspace and its key through the API, as the
	// README does; everything else happens in the console.
	acme := newWorkspace("Acme", "FREE")
	var key created
	if code := admin("POST", "/workspaces/"+acme+"/api-keys", map[string]any{"name": "console"}, &key); code != 201 {
		t.Fatalf("create key: %d", code)
	}
	globex := newWorkspace("Globex", "PRO")
	initech := newWorkspace("Initech", "ENTERPRISE")

	// 1. A wrong token is refused on the form; the key signs in and sees
	// its own workspace only, and another workspace's pages answer 403.
	b.do(chromedp.Navigate(base + "/"))
	b.do(chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), "slk_not_a_key\r"))
	b.waitFor("the refusal", `document.querySelector(".signin .problem")?.innerText.includes("Unauthorized")`, 15*time.Second)
	b.do(chromedp.Evaluate[chromedp.Void](`document.getElementById("token").value = ""`))
	b.signIn(key.Secret)
	rows := evalJS[[]string](b, `[...document.querySelectorAll("#workspaces tbody tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`)
	if len(rows) != 1 || !strings.Contains(rows[0], "Acme") || !strings.Contains(rows[0], "FREE") || !strings.Contains(rows[0], "0 / 1") {
		t.Fatalf("a workspace key's overview shows %q, want Acme alone, FREE, 0 / 1 running", rows)
	}

	b.do(chromedp.Navigate(base + "/ui/#/workspaces/" + globex + "/queue"))
	b.waitFor("another workspace's queue to be forbidden", `document.querySelector("#main .problem")?.innerText.includes("Forbidden")`, 15*time.Second)
	if n := evalJS[int](b, `document.querySelectorAll("#queue tbody tr[data-queue]").length`); n != 0 {
		t.Errorf("a workspace key sees %d of another workspace's queue items", n)
	}
	b.do(chromedp.Navigate(base + "/ui/#/workspaces"))
	b.waitFor("the overview", `document.querySelectorAll("#workspaces tbody tr[data-workspace]").length === 1`, 15*time.Second)

	// 2. Its definitions page creates the example definition, and the
	// definition page draws the graph: four nodes, three edges, two of them
	// with their when.
	b.follow(`#workspaces a[href$="/queue"]`)
	b.follow(`.tabs a[href$="/definitions"]`)
	b.do(chromedp.WaitVisible(chromedp.CSS("#def-name")), chromedp.SendKeys(chromedp.CSS("#def-name"), "greet"),
		chromedp.Click(chromedp.CSS(`#new-definition button[type="submit"]`)))
	b.waitFor("the definition's graph", `document.querySelectorAll("svg.dag g.dag-node").length === 4`, 15*time.Second)
	if got := evalJS[string](b, `document.querySelector("h1").innerText`); got != "greet" {
		t.Errorf("definition page title %q, want greet", got)
	}
	if n := evalJS[int](b, `document.querySelectorAll("svg.dag g.edge").length`); n != 3 {
		t.Errorf("the graph draws %d edges, want 3", n)
	}
	if got := evalJS[[]string](b, `[...document.querySelectorAll("svg.dag .edge-label")].map(e => e.textContent).sort()`); strings.Join(got, ",") != "when false,when true" {
		t.Errorf("edge labels %q, want when false and when true", got)
	}
	if got := evalJS[string](b, `document.querySelector(".filters[aria-label=Versions] a[aria-current=page]").textContent`); got != "v1 (current)" {
		t.Errorf("versions list marks %q, want v1 (current)", got)
	}
	b.screenshot("definition")
	b.narrow("definition")

	// A new version from the page: the same graph, a warmer introduction.
	v2 := `{"nodes": [
		{"key": "greet", "type": "TRANSFORM", "config": {"output": {"message": "Hello, {{ input.name }}"}}},
		{"key": "is_ada", "type": "CONDITION", "config": {"left": "{{ input.name }}", "op": "==", "right": "Ada"}},
		{"key": "welcome", "type": "TRANSFORM", "config": {"output": {"text": "{{ steps.greet.output.message }}, welcome back"}}},
		{"key": "introduce", "type": "TRANSFORM", "config": {"output": {"text": "{{ steps.greet.output.message }}, lovely to meet you"}}}],
		"edges": [{"from": "greet", "to": "is_ada"}, {"from": "is_ada", "to": "welcome", "when": true}, {"from": "is_ada", "to": "introduce", "when": false}]}`
	b.do(chromedp.Click(chromedp.CSS(`details:has(#version-form) > summary`)), chromedp.WaitVisible(chromedp.CSS("#version-graph")),
		chromedp.SetValue(chromedp.CSS("#version-graph"), v2), chromedp.Click(chromedp.CSS(`#version-form button[type="submit"]`)))
	b.waitFor("version 2", `location.hash.endsWith("?v=2") && document.querySelector(".filters[aria-label=Versions] a[aria-current=page]")?.textContent === "v2 (current)" && document.querySelectorAll(".filters[aria-label=Versions] a").length === 2`, 15*time.Second)

	// 3. Start it from the page, while a run holds Acme's only slot and
	// another client's run of the same definition waits before it: the
	// console names the queue item it enqueued, and when the slot frees it
	// opens exactly that item's run, not the other one, which ran first. The
	// run page draws the DAG live until the run completes.
	greet := strings.TrimSuffix(strings.TrimPrefix(evalJS[string](b, `location.hash`), "#/definitions/"), "?v=2")
	hold := newDefinition(acme, "hold", delay)
	holding := enqueue(key.Secret, acme, hold, nil)
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the holding run to take the slot", func() bool {
		var q struct{ Status string }
		return admin("GET", "/workflow/queue/"+holding, nil, &q) == 200 && q.Status == "DISPATCHED"
	}))
	other := enqueue(key.Secret, acme, greet, map[string]any{"name": "Grace"})
	b.do(chromedp.SetValue(chromedp.CSS("#run-input"), `{"name": "Ada"}`), chromedp.Click(chromedp.CSS(`#start-form button[type="submit"]`)))
	b.waitFor("the page to name the item it enqueued", `document.querySelector("#start-status [data-queue]") !== null`, 15*time.Second)
	started := evalJS[string](b, `document.querySelector("#start-status [data-queue]").dataset.queue`)
	if started == other || len(started) != 36 {
		t.Fatalf("the page names queue item %q for its start, beside the other client's %s", started, other)
	}
	if code := admin("POST", "/workflow/queue/"+holding+"/cancel", nil, nil); code != 202 {
		t.Fatalf("cancelling the holding run: %d", code)
	}
	b.waitFor("the run page", `location.hash.startsWith("#/executions/")`, 60*time.Second)
	opened := strings.TrimPrefix(evalJS[string](b, `location.hash`), "#/executions/")
	var runs struct {
		Items []struct {
			ID      string `json:"id"`
			QueueID string `json:"queueId"`
		} `json:"items"`
	}
	if code := admin("GET", "/workflow/executions?workspaceId="+acme+"&queueId="+started, nil, &runs); code != 200 || len(runs.Items) != 1 {
		t.Fatalf("the execution of queue item %s: %d %+v", started, code, runs)
	}
	if opened != runs.Items[0].ID {
		t.Fatalf("the console opened run %s; the queue item it started names run %s", opened, runs.Items[0].ID)
	}
	b.waitFor("the run page to name its queue item", `document.querySelector(".queue-item")?.dataset.queue === `+strconv.Quote(started), 15*time.Second)
	b.waitFor("the run to complete", `document.querySelector("h1 .badge")?.dataset.status === "COMPLETED"`, 60*time.Second)
	statuses := evalJS[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("svg.dag g.dag-node")].map(g => [g.dataset.node, g.dataset.status]))`)
	if got := evalJS[string](b, `document.querySelector(".stats").innerText`); !strings.Contains(got, "greet v2") {
		t.Errorf("the run page does not name the version it ran, greet v2: %q", got)
	}
	want := map[string]string{"greet": "COMPLETED", "is_ada": "COMPLETED", "welcome": "COMPLETED", "introduce": "SKIPPED"}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("DAG node statuses %v, want %v", statuses, want)
	}
	fills := evalJS[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("svg.dag g.dag-node")].map(g => [g.dataset.node, getComputedStyle(g.querySelector("rect")).fill]))`)
	if fills["welcome"] != "rgb(220, 252, 231)" || fills["introduce"] != "rgb(243, 244, 246)" {
		t.Errorf("node fills %v: want green for COMPLETED, grey for SKIPPED", fills)
	}
	if got := evalJS[string](b, `document.querySelector("#node-welcome .node-output").textContent`); !strings.Contains(got, "Hello, Ada, welcome back") {
		t.Errorf("welcome's output on the page is %q", got)
	}
	if got := evalJS[string](b, `document.querySelector("#node-welcome dl").innerText`); !strings.Contains(got, "Attempt") || !strings.Contains(got, "Took") {
		t.Errorf("welcome's card lacks its attempt and timing: %q", got)
	}
	if evalJS[bool](b, `document.querySelector("#node-introduce .problem") !== null || document.querySelector("#node-introduce .skip-reason") === null`) {
		t.Error("the skipped node's card shows its reason as an error, or not at all")
	}
	// A node in the drawing is a keyboard control that leads to its card.
	b.do(chromedp.Focus(chromedp.CSS(`svg.dag g.dag-node[data-node="welcome"]`)), chromedp.KeyEvent("\r"))
	b.waitFor("Enter on a node to focus its card", `document.activeElement?.id === "node-welcome"`, 5*time.Second)
	b.do(chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(), window.scrollTo(0, 0)`))
	b.screenshot("run")
	b.narrow("run")

	// 4. The executions list shows the run and filters by status.
	b.follow(`.crumbs a[href$="/executions"]`)
	b.waitFor("the executions list", `document.querySelector("#executions tbody tr[data-status=COMPLETED]") !== null`, 15*time.Second)
	b.narrow("executions")
	b.follow(`.filters a[href*="status=FAILED"]`)
	b.waitFor("the FAILED filter to empty the list", `location.hash.includes("status=FAILED") && document.querySelector("#executions td.empty") !== null`, 15*time.Second)

	// 5. The queue page: a run that holds Acme's only slot, an item waiting
	// behind it, and Cancel on the waiting one.
	enqueue(key.Secret, acme, hold, nil)
	waiting := enqueue(key.Secret, acme, hold, nil)
	b.follow(`.tabs a[href$="/queue"]`)
	b.waitFor("the queue to show the held slot and the waiting item",
		`document.querySelector("#queue tr[data-status=DISPATCHED]") && document.querySelector("#queue tr[data-queue=`+attr(waiting)+`][data-status=PENDING]")`, 30*time.Second)
	// The header is read in the same poll but a moment before the list.
	b.waitFor("the workspace header to show the slot taken", `document.querySelector(".stats .running").innerText.includes("1 / 1")`, 5*time.Second)
	b.screenshot("queue")
	b.narrow("queue")
	b.do(chromedp.Click(chromedp.CSS(`#queue tr[data-queue=` + attr(waiting) + `] button`)))
	b.waitFor("the cancelled item", `document.querySelector("#queue tr[data-queue=`+attr(waiting)+`][data-status=CANCELLED]") !== null`, 15*time.Second)
	var item struct{ Status string }
	admin("GET", "/workflow/queue/"+waiting, nil, &item)
	if item.Status != "CANCELLED" {
		t.Errorf("the item cancelled from the page is %s in the API", item.Status)
	}

	// 5b. The schedules page creates a nightly schedule in Paris time,
	// shows its next fire times, and pauses it.
	b.follow(`.tabs a[href$="/schedules"]`)
	b.waitFor("the schedule form with the workspace's definitions", `document.querySelectorAll("#sched-definition option").length >= 1`, 15*time.Second)
	b.do(chromedp.SendKeys(chromedp.CSS("#sched-name"), "nightly"), chromedp.SendKeys(chromedp.CSS("#sched-cron"), "0 3 * * *"),
		chromedp.SetValue(chromedp.CSS("#sched-zone"), "Europe/Paris"), chromedp.Click(chromedp.CSS(`#new-schedule button[type="submit"]`)))
	b.waitFor("the new schedule with its next fire times", `document.querySelector("#schedules tr[data-schedule][data-paused=false]")?.innerText.includes("Europe/Paris")`, 15*time.Second)
	schedule := evalJS[string](b, `document.querySelector("#schedules tr[data-schedule]").dataset.schedule`)
	b.narrow("schedules")
	// Edit: the form takes the schedule's values; a new expression is saved.
	b.do(chromedp.Click(chromedp.CSS(`#schedules tr[data-schedule] button.link`)))
	b.waitFor("the form to edit the schedule", `document.querySelector("#sched-cron").value === "0 3 * * *" && document.querySelector("#new-schedule h2").innerText.startsWith("Edit")`, 5*time.Second)
	b.do(chromedp.SetValue(chromedp.CSS("#sched-cron"), "30 4 * * 1-5"), chromedp.Click(chromedp.CSS(`#new-schedule button[type="submit"]`)))
	b.waitFor("the edited schedule", `document.querySelector("#schedules tr[data-schedule]")?.innerText.includes("30 4 * * 1-5")`, 15*time.Second)
	b.do(chromedp.Click(chromedp.CSS(`#schedules tr[data-schedule] button:not(.danger):not(.link)`)))
	b.waitFor("the paused schedule", `document.querySelector("#schedules tr[data-schedule][data-paused=true]") !== null`, 15*time.Second)
	var sched struct{ Paused bool }
	if code := admin("GET", "/workflow/schedules/"+schedule, nil, &sched); code != 200 || !sched.Paused {
		t.Errorf("the schedule paused from the page: %d, paused %v in the API", code, sched.Paused)
	}

	// 6. The admin token sees every workspace, live: busy Globex, failing
	// Initech.
	globexHold := newDefinition(globex, "hold", delay)
	for range 3 {
		enqueue(harness.TestAdminToken, globex, globexHold, nil)
	}
	broken := newDefinition(initech, "broken", []any{map[string]any{"key": "pick", "type": "TRANSFORM",
		"config": map[string]any{"output": "{{ input.order.id }}"}}})
	enqueue(harness.TestAdminToken, initech, broken, map[string]any{})
	b.do(chromedp.Click(chromedp.CSS(".who button")))
	b.signIn(harness.TestAdminToken)
	row := func(id string) string {
		return `document.querySelector("#workspaces tr[data-workspace=` + attr(id) + `]")`
	}
	b.waitFor("every workspace with its numbers", `document.querySelectorAll("#workspaces tbody tr[data-workspace]").length === 3 && `+
		row(globex)+`.querySelector(".running").innerText.includes("3 / 5") && `+
		row(initech)+`.querySelector(".failed").innerText.trim() === "1" && `+
		row(acme)+`.querySelector(".running").innerText.includes("1 / 1")`, 60*time.Second)
	b.screenshot("workspaces")
	b.narrow("workspaces")

	// Initech's failure leads from the overview to the failed node, in red,
	// with its error.
	b.follow(`#workspaces tr[data-workspace=` + attr(initech) + `] .failed a`)
	b.waitFor("Initech's failed execution", `location.hash.includes("status=FAILED") && document.querySelector("#executions tbody tr[data-status=FAILED] a") !== null`, 15*time.Second)
	b.follow(`#executions tbody tr[data-status=FAILED] a`)
	b.waitFor("the failed run's DAG", `document.querySelector("svg.dag g.dag-node[data-node=pick]")?.dataset.status === "FAILED"`, 15*time.Second)
	if fill := evalJS[string](b, `getComputedStyle(document.querySelector("svg.dag g.dag-node[data-node=pick] rect")).fill`); fill != "rgb(254, 226, 226)" {
		t.Errorf("a FAILED node is filled %s, want red", fill)
	}
	if got := evalJS[string](b, `document.querySelector("#node-pick .problem").innerText`); !strings.Contains(got, "missing path input.order.id") {
		t.Errorf("the failed node's error on the page is %q", got)
	}
	if got := evalJS[string](b, `document.querySelector("h1").innerText`); !strings.Contains(got, "FAILED") {
		t.Errorf("the failed run's title is %q", got)
	}
	b.follow(`.top a[href="#/workspaces"]`)
	b.waitFor("the overview again", `document.querySelectorAll("#workspaces tbody tr[data-workspace]").length === 3`, 15*time.Second)

	// Live: a fourth Globex run shows without a reload, within 2 s.
	enqueue(harness.TestAdminToken, globex, globexHold, nil)
	enqueued := time.Now()
	b.waitFor("the overview to show the new run", row(globex)+`.innerText.replace(/\s+/g, " ").match(/4 \/ 5|3 \/ 5 1/)`, 10*time.Second)
	if took := time.Since(enqueued); took > 2*time.Second {
		t.Errorf("the overview showed a new run after %s, want under 2 s", took)
	} else {
		t.Logf("the overview showed a new run %s after it was enqueued", took.Round(time.Millisecond))
	}

	// A running execution's page: its DELAY node running in blue, and
	// Cancel, after which the page turns CANCELLED by itself.
	b.follow(`#workspaces tr[data-workspace=` + attr(acme) + `] th a`)
	b.waitFor("Acme's running item", `document.querySelector("#queue tr[data-status=DISPATCHED] a[href^='#/executions/']") !== null`, 15*time.Second)
	b.follow(`#queue tr[data-status=DISPATCHED] a[href^='#/executions/']`)
	b.waitFor("the running DELAY node", `document.querySelector("svg.dag g.dag-node[data-node=wait]")?.dataset.status === "RUNNING"`, 15*time.Second)
	if fill := evalJS[string](b, `getComputedStyle(document.querySelector("svg.dag g.dag-node[data-node=wait] rect")).fill`); fill != "rgb(219, 234, 254)" {
		t.Errorf("a RUNNING node is filled %s, want blue", fill)
	}
	b.do(chromedp.Click(chromedp.CSS(`button.danger`)))
	b.waitFor("the run page to show CANCELLED without a reload", `document.querySelector("h1 .badge")?.dataset.status === "CANCELLED"`, 30*time.Second)
}
