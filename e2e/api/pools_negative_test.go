package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestNegativePoolsFloorsAndWeights: a workspace key can neither read
// nor set the pool, nor edit a plan's floor or weight, nor its own
// workspace's floor (403, nothing changes). The admin's values out of
// range are refused naming the field (400, by the spec's bounds); a floor
// above the ceiling it sits under or above the pool's capacity is refused
// naming the field the edit set (422), and so is a ceiling or a capacity
// lowered under a floor; none of them changes anything. A sum of floors
// above the pool is taken, as docs/admission.md says: floors are per
// workspace, so only their owners busy at once can pass the pool.
func TestNegativePoolsFloorsAndWeights(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	admin := w.Client(t, harness.AdminToken)
	hundred, three := 100, 3
	forbidden := []op{
		{"getPool", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) { return c.GetPool(ctx) }},
		{"updatePool", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePool(ctx, client.UpdatePoolRequest{Capacity: &hundred})
		}},
		{"updatePlan's floor", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePlan(ctx, client.PRO, client.UpdatePlanRequest{Floor: &three})
		}},
		{"updatePlan's weight", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePlan(ctx, client.PRO, client.UpdatePlanRequest{Weight: &hundred})
		}},
		{"setWorkspaceLimits' floor on its own workspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimits(ctx, w.wsA, client.SetWorkspaceLimitsRequest{Floor: &three})
		}},
	}
	for _, o := range forbidden {
		read(o.call(ctx, a)).Expect(t, o.name+" with A's key", http.StatusForbidden, "forbidden")
	}

	snapshot := func() string {
		t.Helper()
		var s string
		if err := w.Pool.QueryRow(ctx, `SELECT (SELECT string_agg(name || ':' || max_running || '/' || floor || '/' || weight, ',' ORDER BY name) FROM plans)
			|| ' pool ' || coalesce((SELECT capacity::text FROM pools), 'none') || ' own ' || (SELECT count(*) FROM workspace_limits)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()
	if want := "ENTERPRISE:20/0/4,FREE:1/0/1,PRO:5/0/2 pool none own 0"; before != want {
		t.Fatalf("seeded %s, want %s", before, want)
	}
	type call struct {
		name, field string
		send        func() (*http.Response, error)
	}
	patchPlan := func(body string) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			return admin.UpdatePlanWithBody(ctx, client.PRO, "application/json", strings.NewReader(body))
		}
	}
	putLimits := func(body string) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			return admin.SetWorkspaceLimitsWithBody(ctx, w.wsA, "application/json", strings.NewReader(body))
		}
	}
	patchPool := func(body string) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			return admin.UpdatePoolWithBody(ctx, "application/json", strings.NewReader(body))
		}
	}
	ok := func(what string, got harness.Answer) {
		t.Helper()
		if got.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, got.Status, got.Body)
		}
	}
	expect := func(calls []call, status int, kind string) {
		t.Helper()
		for _, c := range calls {
			got := read(c.send())
			got.Expect(t, c.name, status, kind)
			if !slices.Contains(got.FieldPaths(), c.field) {
				t.Errorf("%s: field paths %v lack %s; body: %s", c.name, got.FieldPaths(), c.field, got.Body)
			}
		}
	}
	expect([]call{
		{"a floor below 0", "/floor", patchPlan(`{"floor": -1}`)},
		{"a floor above 100,000", "/floor", patchPlan(`{"floor": 100001}`)},
		{"a floor as a string", "/floor", patchPlan(`{"floor": "1"}`)},
		{"a weight of 0", "/weight", patchPlan(`{"weight": 0}`)},
		{"a weight above 1,000", "/weight", patchPlan(`{"weight": 1001}`)},
		{"a workspace's floor below 0", "/floor", putLimits(`{"maxRunning": null, "floor": -1}`)},
		{"a workspace's floor above 100,000", "/floor", putLimits(`{"maxRunning": null, "floor": 100001}`)},
		{"a capacity of 0", "/capacity", patchPool(`{"capacity": 0}`)},
		{"a capacity above 10,000,000", "/capacity", patchPool(`{"capacity": 10000001}`)},
		{"a capacity as a string", "/capacity", patchPool(`{"capacity": "100"}`)},
		{"a pool edit without its capacity", "/capacity", patchPool(`{}`)},
	}, http.StatusBadRequest, "invalid-request")
	expect([]call{
		{"a plan's floor above its ceiling", "/floor", patchPlan(`{"floor": 6}`)},
		{"a plan's floor above the ceiling set with it", "/floor", patchPlan(`{"maxRunning": 3, "floor": 4}`)},
		{"a workspace's floor above its plan's ceiling", "/floor", putLimits(`{"maxRunning": null, "floor": 6}`)},
		{"a workspace's floor above its own ceiling", "/floor", putLimits(`{"maxRunning": 2, "floor": 3}`)},
	}, http.StatusUnprocessableEntity, "invalid-field")
	if after := snapshot(); after != before {
		t.Fatalf("refused calls changed the limits:\n before %s\n after  %s", before, after)
	}

	// With a floor of 3 and a pool of 10: a ceiling or a capacity under
	// it, and a floor above the pool, are refused.
	ok("a floor of 3 under the ceiling of 5", read(patchPlan(`{"floor": 3}`)()))
	ok("a pool of 10", read(patchPool(`{"capacity": 10}`)()))
	before = snapshot()
	expect([]call{
		{"a plan's ceiling lowered under its floor", "/maxRunning", patchPlan(`{"maxRunning": 2}`)},
		{"a workspace's own ceiling under its plan's floor", "/maxRunning", putLimits(`{"maxRunning": 2}`)},
		{"a capacity under a plan's floor", "/capacity", patchPool(`{"capacity": 2}`)},
		{"a floor above the pool", "/floor", func() (*http.Response, error) {
			return admin.UpdatePlanWithBody(ctx, client.ENTERPRISE, "application/json", strings.NewReader(`{"floor": 11}`))
		}},
	}, http.StatusUnprocessableEntity, "invalid-field")
	if after := snapshot(); after != before {
		t.Fatalf("refused calls changed the limits:\n before %s\n after  %s", before, after)
	}
	// Floors whose sum passes the pool: taken, and documented.
	ok("ENTERPRISE's floor of 8 beside PRO's 3 in a pool of 10",
		read(admin.UpdatePlanWithBody(ctx, client.ENTERPRISE, "application/json", strings.NewReader(`{"floor": 8}`))))
	if got := snapshot(); got != "ENTERPRISE:20/8/4,FREE:1/0/1,PRO:5/3/2 pool 10 own 0" {
		t.Errorf("after the edits the limits are %s", got)
	}
	w.checkBUntouched(t)
}

// TestAPlanChangeThatWouldBreakAWorkspacesFloorIsRefused: moving a
// workspace to another plan is a limits edit like the others. A move
// that would leave the workspace's floor in force (its own, else the new
// plan's) above its limit in force there (likewise) or above the pool's
// capacity is refused (422 naming /plan) and writes nothing: an own floor
// set under PRO's ceiling moved to FREE's, a plan whose floor is above
// the workspace's own ceiling, and an own floor the pool was later
// lowered under (which the pool edit takes, as docs/admission.md says).
// A move that keeps the floor under both is taken.
func TestAPlanChangeThatWouldBreakAWorkspacesFloorIsRefused(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	read := harness.Reader(t)
	admin := s.Client(t, harness.AdminToken)
	ok := func(what string, got harness.Answer) {
		t.Helper()
		if got.Status != http.StatusOK && got.Status != http.StatusCreated {
			t.Fatalf("%s: %d %s", what, got.Status, got.Body)
		}
	}
	workspace := func(name, limits string) uuid.UUID {
		t.Helper()
		cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: name, Plan: client.PRO})
		if err != nil || cw.JSON201 == nil {
			t.Fatalf("creating %s: %v %s", name, err, cw.Body)
		}
		ok(name+"'s own limits", read(admin.SetWorkspaceLimitsWithBody(ctx, cw.JSON201.ID, "application/json", strings.NewReader(limits))))
		return cw.JSON201.ID
	}
	ownFloor := workspace("own floor 4", `{"maxRunning": null, "floor": 4}`)
	ownCeiling := workspace("own ceiling 2", `{"maxRunning": 2}`)
	ownFloorOverPool := workspace("own floor 8", `{"maxRunning": 50, "floor": 8}`)
	ok("ENTERPRISE's floor of 3", read(admin.UpdatePlanWithBody(ctx, client.ENTERPRISE, "application/json", strings.NewReader(`{"floor": 3}`))))
	ok("a pool of 10", read(admin.UpdatePoolWithBody(ctx, "application/json", strings.NewReader(`{"capacity": 10}`))))
	ok("the pool lowered to 6, under an own floor of 8", read(admin.UpdatePoolWithBody(ctx, "application/json", strings.NewReader(`{"capacity": 6}`))))

	snapshot := func() string {
		t.Helper()
		var got string
		if err := s.Pool.QueryRow(ctx, `SELECT string_agg(w.name || ':' || w.plan || ' ' || coalesce(l.max_running::text, '-') || '/' || coalesce(l.floor::text, '-')
			|| ' at ' || w.updated_at::text, ', ' ORDER BY w.name) FROM workspaces w LEFT JOIN workspace_limits l ON l.workspace_id = w.id`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := snapshot()
	move := func(id uuid.UUID, plan client.Plan) harness.Answer {
		return read(admin.UpdateWorkspacePlanWithBody(ctx, id, "application/json", strings.NewReader(fmt.Sprintf(`{"plan": %q}`, plan))))
	}
	for _, c := range []struct {
		name    string
		id      uuid.UUID
		plan    client.Plan
		message string
	}{
		{"an own floor of 4 moved under FREE's ceiling of 1", ownFloor, client.FREE, "above the limit of 1"},
		{"an own ceiling of 2 moved under ENTERPRISE's floor of 3", ownCeiling, client.ENTERPRISE, "a floor of 3 is above the limit of 2"},
		{"an own floor of 8 moved while the pool is 6", ownFloorOverPool, client.FREE, "above the pool's capacity of 6"},
	} {
		got := move(c.id, c.plan)
		got.Expect(t, c.name, http.StatusUnprocessableEntity, "invalid-field")
		if !slices.Contains(got.FieldPaths(), "/plan") || !strings.Contains(string(got.Body), c.message) {
			t.Errorf("%s: %s; want /plan named, saying %q", c.name, got.Body, c.message)
		}
	}
	if after := snapshot(); after != before {
		t.Fatalf("refused moves changed the workspaces:\n before %s\n after  %s", before, after)
	}
	ok("an own floor of 4 moved to ENTERPRISE (ceiling 20, pool 6)", move(ownFloor, client.ENTERPRISE))
	var plan string
	if err := s.Pool.QueryRow(ctx, `SELECT plan FROM workspaces WHERE id = $1`, ownFloor).Scan(&plan); err != nil || plan != "ENTERPRISE" {
		t.Errorf("the move taken left the plan %q (%v), want ENTERPRISE", plan, err)
	}
}
