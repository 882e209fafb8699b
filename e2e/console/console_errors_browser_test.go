package console

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/e2e/harness"
)

// consoleLog gathers what the page writes to its console: calls of the
// console API, uncaught exceptions and the browser's own log, such as
// "Failed to load resource" for an harness.Answer of 4xx.
type consoleLog struct {
	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	marks    int
}

// watchConsole gathers b's console messages from now on, until the test
// ends.
func watchConsole(b *browser) *consoleLog {
	l := &consoleLog{}
	messages := chromedp.Console(b.ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			l.mu.Lock()
			l.messages = append(l.messages, m)
			l.mu.Unlock()
		}
	}()
	return l
}

// errors returns the errors and exceptions written so far. It first
// writes a mark to the console and waits until it has come back, so every
// message written before the harness.Call is among those returned: the browser
// sends them in order.
func (l *consoleLog) errors(b *browser) []string {
	b.t.Helper()
	l.mu.Lock()
	l.marks++
	mark := "sluice-test-mark-" + strconv.Itoa(l.marks)
	l.mu.Unlock()
	b.do(chromedp.Evaluate[chromedp.Void](`console.info(` + strconv.Quote(mark) + `)`))
	deadline := time.Now().Add(30 * time.Second)
	for {
		l.mu.Lock()
		var errs []string
		seen := false
		for _, m := range l.messages {
			switch {
			case m.Text == mark:
				seen = true
			case m.Type == chromedp.ConsoleError || m.IsException():
				errs = append(errs, m.String()+" ("+m.URL+")")
			}
		}
		l.mu.Unlock()
		if seen {
			return errs
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the console mark %s never came back", mark)
		}
		// Wait for the gatherer by asking the browser once more, not by
		// sleeping: a round trip lets it harness.Read what has come.
		b.do(chromedp.Evaluate[chromedp.Void](`0`))
	}
}

// TestTheConsoleLogsNoErrorForAWorkspaceKeyOrTheAdmin signs in to the
// console with a workspace key and visits every page of its workspace,
// then with the admin token and visits the plans and the same pages, and
// checks that the browser's console holds no error: the console asks who
// is signed in (GET /me) instead of probing the admin-only plans, whose
// 403 a workspace key's sign-in logged as "Failed to load resource".
func TestTheConsoleLogsNoErrorForAWorkspaceKeyOrTheAdmin(t *testing.T) {
	base := harness.StartSluice(t, nil)
	b := newBrowser(t)
	log := watchConsole(b)
	e := harness.NewE2EWithPlan(t, base, "PRO")
	var key struct{ Secret string }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces/"+e.Ws+"/api-keys", harness.TestAdminToken, map[string]any{"name": "console"}, &key); code != 201 {
		t.Fatalf("create key: %d", code)
	}
	e.StartIn(harness.OneTransform, nil)

	// visit opens a page and waits until its figures have loaded: the
	// element exists, its table has rows (data or "none" rows) or its box
	// has content.
	visit := func(hash, selector string) {
		t.Helper()
		b.do(chromedp.Navigate(base + "/ui/#" + hash))
		sel := strconv.Quote(selector)
		b.waitFor(hash+" to load", `(() => { const el = document.querySelector(`+sel+`);
			return el !== null && (el.tagName === "TABLE" ? el.querySelector("tbody tr") !== null : el.children.length > 0); })()`, 30*time.Second)
		if problem := evalJS[string](b, `document.querySelector("#main .Problem")?.innerText ?? ""`); problem != "" {
			t.Errorf("%s shows a problem: %s", hash, problem)
		}
	}
	pages := func() {
		t.Helper()
		ws := "/workspaces/" + e.Ws
		visit("/workspaces", "#workspaces")
		visit(ws+"/queue", "#queue")
		visit(ws+"/executions", "#executions")
		visit(ws+"/definitions", "#definitions")
		visit(ws+"/schedules", "#schedules")
		visit(ws+"/webhooks", "#webhooks")
		visit(ws+"/limits", "#workspace-limits")
		visit(ws+"/outbound", "#outbound")
	}

	b.do(chromedp.Navigate(base + "/"))
	b.signIn(key.Secret)
	pages()
	if evalJS[bool](b, `document.querySelector("#nav-plans") !== null`) {
		t.Error("a workspace key is shown the admin's Plans link")
	}
	keyErrors := log.errors(b)
	t.Logf("console errors with a workspace key: %d %q", len(keyErrors), keyErrors)
	if len(keyErrors) > 0 {
		t.Errorf("signed in with a workspace key, the console logged %d errors: %q", len(keyErrors), keyErrors)
	}

	b.do(chromedp.Click(chromedp.CSS(".who button")))
	b.signIn(harness.TestAdminToken)
	b.waitFor("the admin's Plans link", `document.querySelector("#nav-plans") !== null`, 15*time.Second)
	visit("/plans", "#plans")
	pages()
	adminErrors := log.errors(b)[len(keyErrors):]
	t.Logf("console errors with the admin token: %d %q", len(adminErrors), adminErrors)
	if len(adminErrors) > 0 {
		t.Errorf("signed in with the admin token, the console logged %d errors: %q", len(adminErrors), adminErrors)
	}
}
