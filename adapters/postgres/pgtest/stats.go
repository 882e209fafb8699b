package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/domain"
)

// statsDrift compares workspace_queue_stats with counts taken from the
// base tables: PENDING items and RUNNING executions per workspace, and the
// plan of every workspace that exists (NULL for one that does not). Every
// workspace must have a row; a row with nothing counted on a workspace that
// is gone is drift too, since the claim forgets those.
func statsDrift(t testing.TB, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		WITH truth AS (
		    SELECT workspace_id, sum(p)::int AS pending, sum(r)::int AS running
		    FROM (SELECT workspace_id, 1 AS p, 0 AS r FROM workflow_execution_queue WHERE status = 'PENDING'
		          UNION ALL
		          SELECT workspace_id, 0, 1 FROM workflow_executions WHERE status = 'RUNNING') x
		    GROUP BY 1),
		ids AS (SELECT workspace_id FROM workspace_queue_stats UNION SELECT workspace_id FROM truth UNION SELECT id FROM workspaces)
		SELECT i.workspace_id, s.workspace_id IS NOT NULL, coalesce(s.pending, 0), coalesce(t.pending, 0),
		       coalesce(s.running, 0), coalesce(t.running, 0), coalesce(s.plan, '-'), coalesce(w.plan, '-')
		FROM ids i
		LEFT JOIN workspace_queue_stats s ON s.workspace_id = i.workspace_id
		LEFT JOIN truth t ON t.workspace_id = i.workspace_id
		LEFT JOIN workspaces w ON w.id = i.workspace_id
		WHERE (w.id IS NOT NULL AND s.workspace_id IS NULL)
		   OR coalesce(s.pending, 0) <> coalesce(t.pending, 0)
		   OR coalesce(s.running, 0) <> coalesce(t.running, 0)
		   OR (s.workspace_id IS NOT NULL AND s.plan IS DISTINCT FROM w.plan)
		   OR (s.workspace_id IS NOT NULL AND w.id IS NULL AND s.pending = 0 AND s.running = 0 AND t.workspace_id IS NULL)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var drift []string
	for rows.Next() {
		var id domain.ID
		var hasRow bool
		var pending, wantPending, running, wantRunning int
		var plan, wantPlan string
		if err := rows.Scan(&id, &hasRow, &pending, &wantPending, &running, &wantRunning, &plan, &wantPlan); err != nil {
			t.Fatal(err)
		}
		drift = append(drift, fmt.Sprintf("workspace %s: row %v, pending %d (want %d), running %d (want %d), plan %s (want %s)",
			id, hasRow, pending, wantPending, running, wantRunning, plan, wantPlan))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return drift
}

// RequireExactStats fails the test, naming step, when statsDrift finds
// any drift.
func RequireExactStats(t testing.TB, pool *pgxpool.Pool, step string) {
	t.Helper()
	if drift := statsDrift(t, pool); len(drift) > 0 {
		t.Fatalf("%s: workspace_queue_stats differs from the base tables:\n%s", step, strings.Join(drift, "\n"))
	}
}
