package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestConsoleCapacityPageDrawsThePoolAndTheWaits: with a pool of 10 and a
// PRO floor of 1, after a few PRO runs and with two running, the admin's
// Capacity page draws the pool's use (1 within the floor, 1 borrowed, 8
// free, under its capacity, drawn as a step from 20 set half an hour
// before to 10) and
// PRO's running executions and admission waits as time charts, from GET
// /capacity, and the browser's console logs no error. A workspace key is
// not shown the page's link.
func TestConsoleCapacityPageDrawsThePoolAndTheWaits(t *testing.T) {
	dbURL := pgtest.URL(t)
	base := harness.StartSluice(t, map[string]string{"DATABASE_URL": dbURL})
	admin := func(method, path string, body any) {
		t.Helper()
		if code := harness.Call(t, method, base+"/api/v1"+path, harness.TestAdminToken, body, nil); code != 200 {
			t.Fatalf("%s %s: %d", method, path, code)
		}
	}
	// A capacity of 20 set half an hour ago (its snapshot moved back),
	// then 10: the chart steps from one to the other.
	admin("PATCH", "/pool", map[string]any{"capacity": 20})
	db, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(context.Background(), `UPDATE admission_limits_history SET set_at = now() - interval '30 minutes' WHERE set_at > '-infinity'`); err != nil {
		t.Fatal(err)
	}
	admin("PATCH", "/pool", map[string]any{"capacity": 10})
	admin("PATCH", "/plans/PRO", map[string]any{"floor": 1})
	e := harness.NewE2EWithPlan(t, base, "PRO")
	for range 3 {
		e.WaitFor(e.StartIn(harness.OneTransform, nil), "COMPLETED")
	}
	// Two runs held by a DELAY: one within the workspace's floor of 1,
	// one borrowed; cancelled when the test ends.
	delay := map[string]any{"nodes": []any{harness.Node("d", "DELAY", map[string]any{"duration": "10m"})}}
	for range 2 {
		id := e.StartIn(delay, nil)
		e.WaitFor(id, "RUNNING")
		t.Cleanup(func() {
			harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+id+"/cancel", harness.TestAdminToken, nil, nil)
		})
	}
	var key struct{ Secret string }
	if code := harness.Call(t, "POST", base+"/api/v1/workspaces/"+e.Ws+"/api-keys", harness.TestAdminToken, map[string]any{"name": "console"}, &key); code != 201 {
		t.Fatalf("create key: %d", code)
	}

	b := newBrowser(t)
	log := watchConsole(b)
	b.do(chromedp.Navigate(base + "/"))
	b.signIn(key.Secret)
	b.waitFor("the workspaces page", `document.querySelector("#workspaces") !== null`, 15*time.Second)
	if evalJS[bool](b, `document.querySelector("#nav-capacity") !== null`) {
		t.Error("a workspace key is shown the admin's Capacity link")
	}
	b.do(chromedp.Click(chromedp.CSS(".who button")))
	b.signIn(harness.TestAdminToken)
	b.waitFor("the admin's Capacity link", `document.querySelector("#nav-capacity") !== null`, 15*time.Second)
	b.follow(`#nav a[href="#/capacity"]`)
	pro := `#capacity section[data-plan="PRO"]`
	b.waitFor("the pool and PRO's charts", `document.querySelector("#capacity .pool-capacity svg polygon.borrowed") !== null
		&& document.querySelector('`+pro+` svg .running') !== null
		&& document.querySelector('`+pro+` svg .p50') !== null`, 30*time.Second)
	legend := evalJS[string](b, `document.querySelector("#capacity .pool-capacity .legend").innerText`)
	for _, want := range []string{"within floors: 1", "borrowed: 1", "free: 8", "capacity: 10"} {
		if !strings.Contains(legend, want) {
			t.Errorf("the pool's legend reads %q, want %q in it", legend, want)
		}
	}
	// The capacity is a step line from the point it was first set at,
	// 20 then 10: it holds each figure flat, so two of its points share
	// a y at the x where it steps down.
	steps := evalJS[int](b, `(() => {
		const l = document.querySelector("#capacity .pool-capacity svg polyline.step.capacity");
		if (!l) return -1;
		const pts = l.getAttribute("points").split(" ").map((p) => p.split(",").map(Number));
		return new Set(pts.map((p) => p[1])).size;
	})()`)
	if steps != 2 {
		t.Errorf("the pool's capacity line has %d heights, want 2 (20 then 10, as a step)", steps)
	}
	if got := evalJS[string](b, `document.querySelector('`+pro+` .legend').innerText`); !strings.Contains(got, "running: 2") {
		t.Errorf("PRO's running legend reads %q, want its 2 running now", got)
	}
	if got := evalJS[string](b, `document.querySelector('`+pro+` h3').innerText`); !strings.Contains(got, "limit 5, floor 1") {
		t.Errorf("PRO's heading reads %q, want its limit and floor", got)
	}
	if got := evalJS[int](b, `document.querySelectorAll("#capacity section[data-plan]").length`); got != 3 {
		t.Errorf("%d plans drawn, want every plan's (3)", got)
	}
	b.screenshot("console-capacity")
	if errs := log.errors(b); len(errs) > 0 {
		t.Errorf("the console logged %d errors: %q", len(errs), errs)
	}
}
