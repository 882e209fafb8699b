package engine

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestABulkIntoAWorkspaceOfOneRunsInTheOrderSent runs `sluice all`, sends
// a bulk of 40 items into a FREE workspace (one harness.Execution running at a
// time) and checks that their executions started in the order sent. With random item ids a batch ran as 17,
// 20, 24, 6, 12, …
func TestABulkIntoAWorkspaceOfOneRunsInTheOrderSent(t *testing.T) {
	const n = 40
	base := harness.StartSluice(t, nil)
	ctx := context.Background()
	db, err := pgxpool.New(ctx, harness.AppsByBase[base].DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := harness.NewE2EWithPlan(t, base, "FREE")
	def := createDefinition(t, base, w.Ws, harness.OneTransform)

	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"input": map[string]any{"n": i}}
	}
	var sent struct {
		Items []struct{ QueueID string } `json:"items"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start-batch", harness.TestAdminToken,
		map[string]any{"workspaceId": w.Ws, "workflowDefinitionId": def, "items": items}, &sent); code != 202 || len(sent.Items) != n {
		t.Fatalf("bulk enqueue: %d, %d items", code, len(sent.Items))
	}
	took := porttest.Eventually(t, 5*time.Minute, porttest.Holds("the 40 executions to complete", func() bool {
		var done int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM workflow_executions WHERE workspace_id = $1 AND status = 'COMPLETED'`, w.Ws).Scan(&done); err != nil {
			t.Fatal(err)
		}
		return done == n
	}))
	rows, err := db.Query(ctx, `SELECT (input->>'n')::int FROM workflow_executions
		WHERE workspace_id = $1 ORDER BY started_at, id`, w.Ws)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var order []int
	for rows.Next() {
		var i int
		if err := rows.Scan(&i); err != nil {
			t.Fatal(err)
		}
		order = append(order, i)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	t.Logf("%d executions completed in %s, in the order %v", len(order), took, order)
	for place, i := range order {
		if i != place {
			t.Fatalf("executions started in the order %v, want the order sent", order)
		}
	}
}
