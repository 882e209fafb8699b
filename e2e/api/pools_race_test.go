package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestTwoAdminsEditingLimitsAtOnceCannotBothBreakAFloor races two admin
// edits that each pass alone but break the floor rule together: a pool
// capacity lowered under a floor raised at the same moment, and a plan's
// ceiling lowered under its floor raised at the same moment. However
// they interleave, one of the two is refused (422) and the limits left
// keep every floor under its ceiling and the pool's capacity: each edit's
// check runs on the limits in force inside its write's transaction.
// Before that, both checks read the limits before either wrote, both
// edits were taken, and the floor was left above the capacity or ceiling.
func TestTwoAdminsEditingLimitsAtOnceCannotBothBreakAFloor(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	patchPlan := func(body string) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			return admin.UpdatePlanWithBody(ctx, client.ENTERPRISE, "application/json", strings.NewReader(body))
		}
	}
	patchPool := func(body string) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			return admin.UpdatePoolWithBody(ctx, "application/json", strings.NewReader(body))
		}
	}
	const rounds = 20
	races := []struct {
		name string
		// reset sets the limits each round starts from, in which both
		// edits pass alone.
		reset  string
		edit1  func() (*http.Response, error)
		edit2  func() (*http.Response, error)
		field1 string
		field2 string
	}{
		{
			name:   "a capacity lowered while a floor is raised",
			reset:  `UPDATE pools SET capacity = 10; UPDATE plans SET max_running = 20, floor = 0 WHERE name = 'ENTERPRISE'`,
			edit1:  patchPool(`{"capacity": 5}`),
			edit2:  patchPlan(`{"floor": 8}`),
			field1: "/capacity", field2: "/floor",
		},
		{
			name:   "a ceiling lowered while the floor under it is raised",
			reset:  `UPDATE pools SET capacity = NULL; UPDATE plans SET max_running = 20, floor = 0 WHERE name = 'ENTERPRISE'`,
			edit1:  patchPlan(`{"maxRunning": 3}`),
			edit2:  patchPlan(`{"floor": 5}`),
			field1: "/maxRunning", field2: "/floor",
		},
	}
	for _, race := range races {
		won := map[string]int{}
		for round := range rounds {
			if _, err := s.Pool.Exec(ctx, race.reset); err != nil {
				t.Fatal(err)
			}
			type answer struct {
				resp *http.Response
				err  error
			}
			var answers [2]answer
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, edit := range []func() (*http.Response, error){race.edit1, race.edit2} {
				wg.Go(func() {
					<-start
					answers[i].resp, answers[i].err = edit()
				})
			}
			close(start)
			wg.Wait()
			a1, a2 := harness.Read(t, answers[0].resp, answers[0].err), harness.Read(t, answers[1].resp, answers[1].err)
			var capacity *int
			var ceiling, floor int
			if err := s.Pool.QueryRow(ctx, `SELECT (SELECT capacity FROM pools WHERE name = 'default'), max_running, floor
				FROM plans WHERE name = 'ENTERPRISE'`).Scan(&capacity, &ceiling, &floor); err != nil {
				t.Fatal(err)
			}
			left := fmt.Sprintf("capacity %v, ENTERPRISE %d/%d", deref(capacity), ceiling, floor)
			switch {
			case a1.Status == http.StatusOK && a2.Status == http.StatusOK:
				t.Fatalf("%s, round %d: both edits taken, leaving %s", race.name, round, left)
			case floor > ceiling || (capacity != nil && floor > *capacity):
				t.Fatalf("%s, round %d: the floor was left above its ceiling or the pool: %s", race.name, round, left)
			case a1.Status == http.StatusOK:
				a2.Expect(t, race.name+": the second edit", http.StatusUnprocessableEntity, "invalid-field")
				won[race.field1]++
			case a2.Status == http.StatusOK:
				a1.Expect(t, race.name+": the first edit", http.StatusUnprocessableEntity, "invalid-field")
				won[race.field2]++
			default:
				t.Fatalf("%s, round %d: neither edit taken (%d, %d): %s %s", race.name, round, a1.Status, a2.Status, a1.Body, a2.Body)
			}
		}
		t.Logf("%s: in %d rounds the %s edit was taken %d times and the %s edit %d times, the other refused each time",
			race.name, rounds, race.field1, won[race.field1], race.field2, won[race.field2])
	}
}

func deref(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}

// TestAPlanChangeAndAFloorEditAtOnceCannotBothBreakAFloor races, 20
// rounds, a workspace's move from PRO (ceiling 5) to FREE (ceiling 1)
// against its own floor raised to 3 at the same moment: each passes
// alone, together they leave a floor of 3 under a ceiling of 1. However
// they interleave, one is refused (422 naming /plan or /floor) and the
// workspace's floor stays under its ceiling: the move is checked, as
// every limits edit is, inside its write's transaction under the limits'
// write lock. Before, a move was not checked at all, and both were taken
// whenever the floor was written first.
func TestAPlanChangeAndAFloorEditAtOnceCannotBothBreakAFloor(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "moved", Plan: client.PRO})
	if err != nil || cw.JSON201 == nil {
		t.Fatalf("creating the workspace: %v %s", err, cw.Body)
	}
	ws := cw.JSON201.ID
	const rounds = 20
	won := map[string]int{}
	for round := range rounds {
		if _, err := s.Pool.Exec(ctx, `UPDATE workspaces SET plan = 'PRO' WHERE id = $1`, ws); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool.Exec(ctx, `DELETE FROM workspace_limits WHERE workspace_id = $1`, ws); err != nil {
			t.Fatal(err)
		}
		var resps [2]*http.Response
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			resps[0], errs[0] = admin.UpdateWorkspacePlanWithBody(ctx, ws, "application/json", strings.NewReader(`{"plan": "FREE"}`))
		})
		wg.Go(func() {
			<-start
			resps[1], errs[1] = admin.SetWorkspaceLimitsWithBody(ctx, ws, "application/json", strings.NewReader(`{"maxRunning": null, "floor": 3}`))
		})
		close(start)
		wg.Wait()
		move, floorEdit := harness.Read(t, resps[0], errs[0]), harness.Read(t, resps[1], errs[1])
		var plan string
		var ceiling int
		var floor *int
		if err := s.Pool.QueryRow(ctx, `SELECT w.plan, p.max_running, l.floor FROM workspaces w JOIN plans p ON p.name = w.plan
			LEFT JOIN workspace_limits l ON l.workspace_id = w.id WHERE w.id = $1`, ws).Scan(&plan, &ceiling, &floor); err != nil {
			t.Fatal(err)
		}
		left := fmt.Sprintf("%s (ceiling %d) with an own floor of %v", plan, ceiling, deref(floor))
		switch {
		case move.Status == http.StatusOK && floorEdit.Status == http.StatusOK:
			t.Fatalf("round %d: both the move and the floor edit taken, leaving %s", round, left)
		case floor != nil && *floor > ceiling:
			t.Fatalf("round %d: the floor was left above its ceiling: %s", round, left)
		case move.Status == http.StatusOK:
			floorEdit.Expect(t, "the floor edit after the move", http.StatusUnprocessableEntity, "invalid-field")
			won["/plan"]++
		case floorEdit.Status == http.StatusOK:
			move.Expect(t, "the move after the floor edit", http.StatusUnprocessableEntity, "invalid-field")
			if !slices.Contains(move.FieldPaths(), "/plan") {
				t.Errorf("round %d: the refused move names %v, want /plan", round, move.FieldPaths())
			}
			won["/floor"]++
		default:
			t.Fatalf("round %d: neither taken (%d, %d): %s %s", round, move.Status, floorEdit.Status, move.Body, floorEdit.Body)
		}
	}
	t.Logf("in %d rounds the move was taken %d times and the floor edit %d times, the other refused each time", rounds, won["/plan"], won["/floor"])
}
