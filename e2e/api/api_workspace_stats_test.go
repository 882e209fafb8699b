package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestWorkspaceCountsExecutionsFailedInTheLastHour shows that a
// workspace's failedLastHour counts its executions that ended FAILED within
// the hour, and neither older failures, other outcomes nor another
// workspace's failures.
func TestWorkspaceCountsExecutionsFailedInTheLastHour(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)

	var wsIDs, defIDs []uuid.UUID
	for _, name := range []string{"Acme", "Other"} {
		cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: name, Plan: client.PRO})
		status(t, "createWorkspace", cw, err, http.StatusCreated)
		cd, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{
			WorkspaceID: cw.JSON201.ID, Name: "greet",
			Graph: client.Graph(`{"nodes":[{"key":"greet","type":"TRANSFORM","config":{"output":"hi"}}]}`),
		})
		status(t, "createDefinition", cd, err, http.StatusCreated)
		wsIDs, defIDs = append(wsIDs, cw.JSON201.ID), append(defIDs, cd.JSON201.ID)
	}
	ended := func(ws, def uuid.UUID, status, ago string) {
		t.Helper()
		if _, err := s.Pool.Exec(ctx, `
			INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, started_at, completed_at)
			VALUES ($1, $2, $3, 1, $4, now() - $5::interval - interval '1 second', now() - $5::interval)`,
			uuid.New(), ws, def, status, ago); err != nil {
			t.Fatal(err)
		}
	}
	ended(wsIDs[0], defIDs[0], "FAILED", "10 minutes")
	ended(wsIDs[0], defIDs[0], "FAILED", "59 minutes")
	ended(wsIDs[0], defIDs[0], "FAILED", "61 minutes")
	ended(wsIDs[0], defIDs[0], "COMPLETED", "1 minute")
	ended(wsIDs[0], defIDs[0], "CANCELLED", "1 minute")
	ended(wsIDs[1], defIDs[1], "FAILED", "1 minute")

	gw, err := admin.GetWorkspaceWithResponse(ctx, wsIDs[0])
	status(t, "getWorkspace", gw, err, http.StatusOK)
	if gw.JSON200.FailedLastHour != 2 {
		t.Errorf("failedLastHour = %d, want 2 (two failures within the hour): %s", gw.JSON200.FailedLastHour, gw.Body)
	}
	lw, err := admin.ListWorkspacesWithResponse(ctx, nil)
	status(t, "listWorkspaces", lw, err, http.StatusOK)
	for _, w := range lw.JSON200.Items {
		want := map[uuid.UUID]int{wsIDs[0]: 2, wsIDs[1]: 1}[w.ID]
		if w.FailedLastHour != want {
			t.Errorf("listed %s with failedLastHour %d, want %d", w.Name, w.FailedLastHour, want)
		}
	}
}
