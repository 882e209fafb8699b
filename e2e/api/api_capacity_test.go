package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

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
