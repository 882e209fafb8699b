package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestCapacitySeriesCountTheRunsOfTheWindow: GET /capacity counts, per
// plan and step, the runs RUNNING at the step's end (one started two
// hours ago and still running among them), the runs started in the step
// and their admission waits; the pool's series split the running between
// floors and borrowed. Out-of-bounds windows and steps are refused naming
// the parameter.
func TestCapacitySeriesCountTheRunsOfTheWindow(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "Acme", Plan: client.ENTERPRISE})
	status(t, "createWorkspace", cw, err, http.StatusCreated)
	cd, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{
		WorkspaceID: cw.JSON201.ID, Name: "greet",
		Graph: client.Graph(`{"nodes":[{"key":"greet","type":"TRANSFORM","config":{"output":"hi"}}]}`),
	})
	status(t, "createDefinition", cd, err, http.StatusCreated)
	run := func(status, started, completed string, waitMs any) {
		t.Helper()
		if _, err := s.Pool.Exec(ctx, `
			WITH e AS (
				INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, started_at, completed_at)
				VALUES ($1, $2, $3, 1, $4, now() - $5::interval, CASE WHEN $6 = '' THEN NULL ELSE now() - $6::interval END)
				RETURNING id, workspace_id, started_at)
			INSERT INTO admission_waits (execution_id, workspace_id, started_at, wait_ms)
			SELECT id, workspace_id, started_at, $7 FROM e WHERE $7::bigint IS NOT NULL
			ON CONFLICT (execution_id) DO UPDATE SET wait_ms = EXCLUDED.wait_ms`,
			uuid.New(), cw.JSON201.ID, cd.JSON201.ID, status, started, completed, waitMs); err != nil {
			t.Fatal(err)
		}
	}
	run("COMPLETED", "330 seconds", "210 seconds", 100)
	run("RUNNING", "150 seconds", "", 300)
	run("RUNNING", "2 hours", "", nil)

	window, step := 600, 60
	got, err := admin.GetCapacityWithResponse(ctx, &client.GetCapacityParams{WindowSeconds: &window, StepSeconds: &step})
	status(t, "getCapacity", got, err, http.StatusOK)
	c := got.JSON200
	if c.StepSeconds != 60 || len(c.Pool.WithinFloor) != 10 || len(c.Pool.Borrowed) != 10 || len(c.Plans) != 3 {
		t.Fatalf("getCapacity: %s; want 10 steps of 60 s and every plan", got.Body)
	}
	i := slices.IndexFunc(c.Plans, func(p client.PlanUse) bool { return p.Plan == client.ENTERPRISE })
	ent := c.Plans[i]
	sum := func(xs []int) int {
		n := 0
		for _, x := range xs {
			n += x
		}
		return n
	}
	// The completed run spans two steps' ends, the newer running one three
	// or four (the last step ends within the next minute), the old one all
	// ten.
	if last := ent.Running[len(ent.Running)-1]; last != 2 {
		t.Errorf("ENTERPRISE running at the last step = %d, want the 2 running now: %v", last, ent.Running)
	}
	if n := sum(ent.Running); n < 2+3+10 || n > 2+4+10 {
		t.Errorf("ENTERPRISE running summed over the steps = %d, want 15 or 16: %v", n, ent.Running)
	}
	if n := sum(ent.Starts); n != 2 {
		t.Errorf("ENTERPRISE starts = %v, want the 2 started in the window", ent.Starts)
	}
	var waits []float32
	for k, n := range ent.Starts {
		if n > 0 {
			waits = append(waits, ent.WaitP99Seconds[k])
		}
	}
	slices.Sort(waits)
	if len(waits) != 2 || waits[0] < 0.099 || waits[0] > 0.101 || waits[1] < 0.299 || waits[1] > 0.301 {
		t.Errorf("ENTERPRISE waits where runs started = %v, want 0.1 s and 0.3 s", waits)
	}
	// ENTERPRISE's floor is 0: everything running is borrowed.
	if sum(c.Pool.WithinFloor) != 0 || sum(c.Pool.Borrowed) != sum(ent.Running) {
		t.Errorf("pool within floors %v, borrowed %v; want all %d borrowed", c.Pool.WithinFloor, c.Pool.Borrowed, sum(ent.Running))
	}

	read := harness.Reader(t)
	for _, bad := range []struct{ query, field string }{
		{"windowSeconds=7200", "windowSeconds"},
		{"stepSeconds=5", "stepSeconds"},
		{"windowSeconds=60&stepSeconds=120", "stepSeconds"},
	} {
		req, _ := http.NewRequest("GET", s.URL+"/api/v1/capacity?"+bad.query, nil)
		req.Header.Set("Authorization", "Bearer "+harness.AdminToken)
		a := read(s.HTTPClient(t).Do(req))
		if a.Status != http.StatusBadRequest && a.Status != http.StatusUnprocessableEntity || !strings.Contains(string(a.Body), bad.field) {
			t.Errorf("GET /capacity?%s: %d %s; want a 4xx problem naming %s", bad.query, a.Status, a.Body, bad.field)
		}
	}
}

// TestCapacitySeriesSplitEachStepByTheLimitsThatStoodThen: after the
// pool's capacity and ENTERPRISE's ceiling and floor are edited inside
// the window (the edits' snapshots moved 330 s back), the steps that
// ended before the edits split the three runs by the limits that stood
// then (floor 0: all borrowed, no capacity, limit 20) and the later ones
// by the new (floor 2: 2 within it, 1 borrowed, capacity 50, limit 30);
// capacityChanges and limitChanges give both, from the step the edits
// fall in.
func TestCapacitySeriesSplitEachStepByTheLimitsThatStoodThen(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "Acme", Plan: client.ENTERPRISE})
	status(t, "createWorkspace", cw, err, http.StatusCreated)
	cd, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{
		WorkspaceID: cw.JSON201.ID, Name: "greet",
		Graph: client.Graph(`{"nodes":[{"key":"greet","type":"TRANSFORM","config":{"output":"hi"}}]}`),
	})
	status(t, "createDefinition", cd, err, http.StatusCreated)
	// Three runs RUNNING since before the window: in every step.
	for range 3 {
		if _, err := s.Pool.Exec(ctx, `INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, started_at)
			VALUES ($1, $2, $3, 1, 'RUNNING', now() - interval '2 hours')`, uuid.New(), cw.JSON201.ID, cd.JSON201.ID); err != nil {
			t.Fatal(err)
		}
	}
	upo, err := admin.UpdatePoolWithResponse(ctx, client.UpdatePoolRequest{Capacity: harness.Ptr(50)})
	status(t, "updatePool", upo, err, http.StatusOK)
	upl, err := admin.UpdatePlanWithResponse(ctx, client.ENTERPRISE, client.UpdatePlanRequest{MaxRunning: harness.Ptr(30), Floor: harness.Ptr(2)})
	status(t, "updatePlan", upl, err, http.StatusOK)
	var edited time.Time
	if err := s.Pool.QueryRow(ctx, `UPDATE admission_limits_history SET set_at = now() - interval '330 seconds'
		WHERE set_at > '-infinity' RETURNING set_at`).Scan(&edited); err != nil {
		t.Fatal(err)
	}

	window, step := 600, 60
	got, err := admin.GetCapacityWithResponse(ctx, &client.GetCapacityParams{WindowSeconds: &window, StepSeconds: &step})
	status(t, "getCapacity", got, err, http.StatusOK)
	c := got.JSON200
	// The first step whose end is at or after the edits.
	k := 0
	for c.From.Add(time.Duration(k+1) * time.Minute).Before(edited) {
		k++
	}
	if k == 0 || k >= 10 {
		t.Fatalf("the edits at %s fall in step %d of the window from %s; want one inside it", edited, k, c.From)
	}
	t.Logf("edits in step %d of 10: within floors %v, borrowed %v", k, c.Pool.WithinFloor, c.Pool.Borrowed)
	for i := range 10 {
		wantWithin, wantBorrowed := 0, 3
		if i >= k {
			wantWithin, wantBorrowed = 2, 1
		}
		if c.Pool.WithinFloor[i] != wantWithin || c.Pool.Borrowed[i] != wantBorrowed {
			t.Errorf("step %d (edits in step %d): %d within floors and %d borrowed, want %d and %d", i, k, c.Pool.WithinFloor[i], c.Pool.Borrowed[i], wantWithin, wantBorrowed)
		}
	}
	if want := []client.PoolCapacityChange{{Step: 0, Capacity: nil}, {Step: k, Capacity: harness.Ptr(50)}}; !slices.EqualFunc(c.Pool.CapacityChanges, want, func(a, b client.PoolCapacityChange) bool {
		return a.Step == b.Step && (a.Capacity == nil) == (b.Capacity == nil) && (a.Capacity == nil || *a.Capacity == *b.Capacity)
	}) || c.Pool.Capacity == nil || *c.Pool.Capacity != 50 {
		t.Errorf("pool capacity %v now, changes %s; want 50 now, none until step %d and 50 from it", c.Pool.Capacity, got.Body, k)
	}
	ent := c.Plans[slices.IndexFunc(c.Plans, func(p client.PlanUse) bool { return p.Plan == client.ENTERPRISE })]
	if want := []client.PlanLimitsChange{{Step: 0, MaxRunning: 20, Floor: 0}, {Step: k, MaxRunning: 30, Floor: 2}}; !slices.Equal(ent.LimitChanges, want) || ent.MaxRunning != 30 || ent.Floor != 2 {
		t.Errorf("ENTERPRISE limit %d floor %d now, changes %v; want 30 and 2 now, changes %v", ent.MaxRunning, ent.Floor, ent.LimitChanges, want)
	}
	free := c.Plans[slices.IndexFunc(c.Plans, func(p client.PlanUse) bool { return p.Plan == client.FREE })]
	if len(free.LimitChanges) != 1 || free.LimitChanges[0].Step != 0 {
		t.Errorf("FREE's limit changes %v, want only the first step's: its limits were not edited", free.LimitChanges)
	}
}

// TestCapacitySeriesSplitEachStepByTheWorkspacesFiguresThatStoodThen:
// a FREE workspace whose own floor was raised to 2 and another moved from
// FREE to ENTERPRISE (the edits' rows moved 330 s back) have their runs
// split, at the steps that ended before the edits, by the figures that
// stood then (both FREE, floor 0: all five runs FREE and borrowed) and
// after them by the new (three FREE runs, two within the raised floor;
// two ENTERPRISE runs, borrowed), and a start counts in the plan its
// workspace was on then. A workspace at rest writes no row.
func TestCapacitySeriesSplitEachStepByTheWorkspacesFiguresThatStoodThen(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	workspace := func(name string, runs int) uuid.UUID {
		t.Helper()
		cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: name, Plan: client.FREE})
		status(t, "createWorkspace", cw, err, http.StatusCreated)
		cd, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{
			WorkspaceID: cw.JSON201.ID, Name: "greet",
			Graph: client.Graph(`{"nodes":[{"key":"greet","type":"TRANSFORM","config":{"output":"hi"}}]}`),
		})
		status(t, "createDefinition", cd, err, http.StatusCreated)
		// RUNNING since before the window: in every step.
		for range runs {
			if _, err := s.Pool.Exec(ctx, `INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, started_at)
				VALUES ($1, $2, $3, 1, 'RUNNING', now() - interval '2 hours')`, uuid.New(), cw.JSON201.ID, cd.JSON201.ID); err != nil {
				t.Fatal(err)
			}
		}
		return cw.JSON201.ID
	}
	raised, moved := workspace("Raised", 3), workspace("Moved", 2)
	workspace("AtRest", 0)
	// The moved workspace's two runs' admission waits, as if one had
	// started before the move (480 s ago) and one after it (120 s ago):
	// each counts in the plan the workspace was on then.
	if _, err := s.Pool.Exec(ctx, `WITH e AS (
			SELECT e.id, CASE WHEN row_number() OVER (ORDER BY e.id) = 1 THEN 480 ELSE 120 END AS age
			FROM workflow_executions e WHERE e.workspace_id = $1)
		UPDATE admission_waits a SET started_at = now() - e.age * interval '1 second', wait_ms = 100
		FROM e WHERE a.execution_id = e.id`, moved); err != nil {
		t.Fatal(err)
	}
	sl, err := admin.SetWorkspaceLimitsWithResponse(ctx, raised, client.SetWorkspaceLimitsRequest{MaxRunning: harness.Ptr(10), Floor: harness.Ptr(2)})
	status(t, "setWorkspaceLimits", sl, err, http.StatusOK)
	up, err := admin.UpdateWorkspacePlanWithResponse(ctx, moved, client.UpdateWorkspaceRequest{Plan: client.ENTERPRISE})
	status(t, "updateWorkspacePlan", up, err, http.StatusOK)
	var rows int
	var edited time.Time
	if err := s.Pool.QueryRow(ctx, `WITH moved AS (
			UPDATE workspace_limits_history SET replaced_at = now() - interval '330 seconds' RETURNING replaced_at)
		SELECT count(*), max(replaced_at) FROM moved`).Scan(&rows, &edited); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d rows of workspace figures after two workspaces' edits, want 2 (one per workspace edited, none for the one at rest)", rows)
	}

	window, step := 600, 60
	got, err := admin.GetCapacityWithResponse(ctx, &client.GetCapacityParams{WindowSeconds: &window, StepSeconds: &step})
	status(t, "getCapacity", got, err, http.StatusOK)
	c := got.JSON200
	k := 0
	for c.From.Add(time.Duration(k+1) * time.Minute).Before(edited) {
		k++
	}
	if k == 0 || k >= 10 {
		t.Fatalf("the edits at %s fall in step %d of the window from %s; want one inside it", edited, k, c.From)
	}
	free := c.Plans[slices.IndexFunc(c.Plans, func(p client.PlanUse) bool { return p.Plan == client.FREE })]
	ent := c.Plans[slices.IndexFunc(c.Plans, func(p client.PlanUse) bool { return p.Plan == client.ENTERPRISE })]
	t.Logf("edits in step %d of 10: FREE %v, ENTERPRISE %v, within floors %v, borrowed %v", k, free.Running, ent.Running, c.Pool.WithinFloor, c.Pool.Borrowed)
	for i := range 10 {
		wantFree, wantEnt, wantWithin, wantBorrowed := 5, 0, 0, 5
		if i >= k {
			wantFree, wantEnt, wantWithin, wantBorrowed = 3, 2, 2, 3
		}
		if free.Running[i] != wantFree || ent.Running[i] != wantEnt || c.Pool.WithinFloor[i] != wantWithin || c.Pool.Borrowed[i] != wantBorrowed {
			t.Errorf("step %d (edits in step %d): FREE %d, ENTERPRISE %d running, %d within floors and %d borrowed; want %d, %d, %d and %d",
				i, k, free.Running[i], ent.Running[i], c.Pool.WithinFloor[i], c.Pool.Borrowed[i], wantFree, wantEnt, wantWithin, wantBorrowed)
		}
	}
	started := func(p client.PlanUse) (steps []int) {
		for i, n := range p.Starts {
			for range n {
				steps = append(steps, i)
			}
		}
		return steps
	}
	if f, e := started(free), started(ent); len(f) != 1 || f[0] >= k || len(e) != 1 || e[0] < k {
		t.Errorf("starts in steps FREE %v, ENTERPRISE %v (edits in step %d); want the one before the move in FREE and the one after in ENTERPRISE", f, e, k)
	}
}
