package console

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/e2e/harness"
)

// TestConsoleSendsAnEventAndDrawsIterations: in a real browser, the admin
// finds a run waiting for an event through the executions filter, sees
// its FOR_EACH drawn with its five iterations' states and listed on the
// node's card, and sends the event from the waiting node's card, after
// which the run completes with the payload as the node's output.
func TestConsoleSendsAnEventAndDrawsIterations(t *testing.T) {
	base := harness.StartSluice(t, nil)
	b := newBrowser(t)
	graph := map[string]any{
		"nodes": []any{
			map[string]any{"key": "each", "type": "FOR_EACH", "config": map[string]any{
				"items": "{{ input.list }}", "node": map[string]any{"type": "TRANSFORM", "config": map[string]any{"output": "{{ item }}"}}}},
			map[string]any{"key": "approve", "type": "WAIT_FOR_EVENT", "config": map[string]any{"event": "approval"}},
		},
		"edges": []any{map[string]any{"from": "each", "to": "approve"}},
	}
	wsID, execID := harness.StartGraph(t, base, "FREE", graph, map[string]any{"list": []int{1, 2, 3, 4, 5}})
	harness.WaitRun(t, base, execID, time.Minute, "approve to wait", harness.NodeIs("approve", "RUNNING"))

	b.do(chromedp.Navigate(base + "/"))
	b.signIn(harness.TestAdminToken)
	b.do(chromedp.Navigate(base + "/ui/#/workspaces/" + wsID + "/executions?waiting=1"))
	b.waitFor("the waiting run listed", `document.querySelectorAll("#executions tbody tr[data-execution]").length === 1`, 15*time.Second)
	if !evalJS[bool](b, `document.getElementById("waiting-filter").checked`) {
		t.Error("the waiting filter is not shown as on")
	}
	b.follow(`#executions a[href="#/executions/` + execID + `"]`)
	b.waitFor("the FOR_EACH's iterations drawn", `document.querySelectorAll('svg.dag g.dag-node[data-node="each"] rect.iteration[data-status="COMPLETED"]').length === 5`, 15*time.Second)
	if got := evalJS[[]string](b, `[...document.querySelectorAll('#node-each .child-records li')].map(li => li.dataset.child)`); strings.Join(got, ",") != "each[0],each[1],each[2],each[3],each[4]" {
		t.Errorf("the FOR_EACH card lists %q, want its five iterations in order", got)
	}
	b.do(chromedp.WaitVisible(chromedp.CSS(`#node-approve form.event-form textarea`)),
		chromedp.SetValue(chromedp.CSS(`#node-approve form.event-form textarea`), `{"by": "console"}`),
		chromedp.Click(chromedp.CSS(`#node-approve form.event-form button[type="submit"]`)))
	run := harness.WaitRun(t, base, execID, time.Minute, "the run to complete", harness.StatusIs("COMPLETED"))
	if _, out := run.Node(t, "approve"); out.(map[string]any)["by"] != "console" {
		t.Errorf("approve output = %v, want the payload typed in the console", out)
	}
	b.waitFor("the run page to show COMPLETED", `document.querySelector("h1 .badge")?.innerText.includes("COMPLETED")`, 15*time.Second)
}
