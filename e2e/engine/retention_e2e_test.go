package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// retentionFixture is one workspace's rows, each made older or younger
// than its plan's period by the test: the old ones must go, the young ones
// stay.
type retentionFixture struct {
	ws, plan                   string
	period                     time.Duration
	oldExec, youngExec         string
	oldItem, youngItem         string
	versionedDef               string
	oldDeletedDef, youngDelDef string
}

// TestRetentionDeletesWhatIsPastItsPlansPeriodAndNothingElse runs `sluice
// all` with the retention job every 300 ms, builds in a FREE (7 days) and
// a PRO (30 days) workspace a finished execution, a cancelled queue item,
// activity rows, replaced definition versions and deleted definitions,
// dates one of each a day past the plan's period and one a day within it,
// and checks that retention deletes exactly the first (node records with
// their execution; a version still used by an execution or pinned by a
// queue item is kept) while
// another workspace's runs go on completing. The metrics count the rows
// deleted and show the oldest row kept, younger than its period.
func TestRetentionDeletesWhatIsPastItsPlansPeriodAndNothingElse(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_DISPATCH_RECOVERY_INTERVAL":  "300ms",
		"SLUICE_RECOVERY_LEASE_AT_LEAST_FOR": "0s",
	})
	ctx := context.Background()
	db, err := pgxpool.New(ctx, harness.AppsByBase[base].DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}

	// Work flows meanwhile: another workspace starts one run after another.
	flowing := harness.NewE2EWithPlan(t, base, "ENTERPRISE")
	flowDef := createDefinition(t, base, flowing.Ws, harness.OneTransform)
	stop := make(chan struct{})
	var completed atomic.Int32
	var flowIDs sync.Map
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := harness.ExecutionOf(t, base, flowing.Ws, enqueueThroughAPI(t, base, flowing.Ws, flowDef))
			if ex := flowing.WaitFor(id, "COMPLETED", "FAILED"); ex.Status == "COMPLETED" {
				completed.Add(1)
			}
			flowIDs.Store(id, true)
		}
	})

	day := 24 * time.Hour
	fixtures := []*retentionFixture{{plan: "FREE", period: 7 * day}, {plan: "PRO", period: 30 * day}}
	for _, f := range fixtures {
		e := harness.NewE2EWithPlan(t, base, f.plan)
		f.ws = e.Ws
		def := createDefinition(t, base, f.ws, harness.OneTransform)
		f.oldExec = harness.ExecutionOf(t, base, f.ws, enqueueThroughAPI(t, base, f.ws, def))
		e.WaitFor(f.oldExec, "COMPLETED")
		f.youngExec = harness.ExecutionOf(t, base, f.ws, enqueueThroughAPI(t, base, f.ws, def))
		e.WaitFor(f.youngExec, "COMPLETED")
		// Cancelled items and their activity are written directly: through
		// the API the dispatcher may start an item before the cancel.
		for _, item := range []*string{&f.oldItem, &f.youngItem} {
			if err := db.QueryRow(ctx, `INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, status)
				VALUES (gen_random_uuid(), $1, $2, 'CANCELLED') RETURNING id::text`, f.ws, def).Scan(item); err != nil {
				t.Fatal(err)
			}
			exec(`INSERT INTO activity (id, workspace_id, actor, action, subject_id) VALUES (gen_random_uuid(), $1, 'test', 'execution.cancelled', $2)`, f.ws, *item)
		}
		for range 3 { // versions 2 to 4; both executions ran version 1
			if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions/"+def+"/versions", harness.TestAdminToken, map[string]any{"graph": harness.OneTransform}, nil); code != 201 {
				t.Fatalf("add version: %d", code)
			}
		}
		f.versionedDef = def
		// A retry's failed item pins version 3: a requeue would run it.
		exec(`INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, status, retry_of, pinned_version)
			VALUES (gen_random_uuid(), $1, $2, 'FAILED', $3, 3)`, f.ws, def, f.youngExec)
		f.oldDeletedDef, f.youngDelDef = createDefinition(t, base, f.ws, harness.OneTransform), createDefinition(t, base, f.ws, harness.OneTransform)
		for _, d := range []string{f.oldDeletedDef, f.youngDelDef} {
			if code := harness.Call(t, "DELETE", base+"/api/v1/workflow/definitions/"+d, harness.TestAdminToken, nil, nil); code != 204 {
				t.Fatalf("delete definition: %d", code)
			}
		}
	}
	for _, f := range fixtures {
		old, young := f.period+day, f.period-day
		exec(`UPDATE workflow_executions SET started_at = now() - $2::interval - interval '1 second', completed_at = now() - $2::interval WHERE id = $1`, f.oldExec, old.String())
		exec(`UPDATE workflow_executions SET started_at = now() - $2::interval - interval '1 second', completed_at = now() - $2::interval WHERE id = $1`, f.youngExec, young.String())
		exec(`UPDATE workflow_execution_queue SET created_at = now() - $2::interval WHERE id = $1`, f.oldItem, old.String())
		exec(`UPDATE workflow_execution_queue SET created_at = now() - $2::interval WHERE id = $1`, f.youngItem, young.String())
		exec(`UPDATE activity SET created_at = now() - $2::interval WHERE subject_id = $1`, f.youngItem, young.String())
		exec(`UPDATE activity SET created_at = now() - $2::interval WHERE subject_id = $1`, f.oldItem, old.String())
		// Version 1 was replaced long ago but an execution still uses it;
		// version 2 was replaced long ago and is unused; 3 too, but a
		// queue item pins it; 4 is current.
		exec(`UPDATE workflow_definition_versions SET created_at = now() - $2::interval WHERE workflow_definition_id = $1 AND version IN (2, 3, 4)`, f.versionedDef, old.String())
		exec(`UPDATE workflow_definitions SET deleted_at = now() - $2::interval WHERE id = $1`, f.oldDeletedDef, old.String())
		exec(`UPDATE workflow_definitions SET deleted_at = now() - $2::interval WHERE id = $1`, f.youngDelDef, young.String())
	}

	gone := func(f *retentionFixture) error {
		for what, n := range map[string]int{
			"old execution":         count(`SELECT count(*) FROM workflow_executions WHERE id = $1`, f.oldExec),
			"old execution's nodes": count(`SELECT count(*) FROM workflow_execution_nodes WHERE execution_id = $1`, f.oldExec),
			"old cancelled item":    count(`SELECT count(*) FROM workflow_execution_queue WHERE id = $1`, f.oldItem),
			"old activity":          count(`SELECT count(*) FROM activity WHERE subject_id = $1`, f.oldItem),
			"replaced version 2":    count(`SELECT count(*) FROM workflow_definition_versions WHERE workflow_definition_id = $1 AND version = 2`, f.versionedDef),
			"old deleted definition": count(`SELECT count(*) FROM workflow_definitions WHERE id = $1`, f.oldDeletedDef) +
				count(`SELECT count(*) FROM workflow_definition_versions WHERE workflow_definition_id = $1`, f.oldDeletedDef),
		} {
			if n != 0 {
				return fmt.Errorf("%s workspace: %s still stored (%d rows)", f.plan, what, n)
			}
		}
		return nil
	}
	porttest.Eventually(t, 60*time.Second, func() error {
		for _, f := range fixtures {
			if err := gone(f); err != nil {
				return err
			}
		}
		return nil
	})
	// A run that starts after they are gone deletes nothing kept.
	deletedBefore := metricValue(t, base, `retention_deleted_rows_total{kind="executions"}`)
	var goneAt time.Time
	if err := db.QueryRow(ctx, `SELECT now()`).Scan(&goneAt); err != nil {
		t.Fatal(err)
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("a whole retention run after that", func() bool {
		return count(`SELECT count(*) FROM shedlock WHERE name = 'deleteExpiredRows' AND locked_at > $1 AND lock_until <= now()`, goneAt) > 0
	}))
	for _, f := range fixtures {
		for what, n := range map[string]int{
			"young execution":          count(`SELECT count(*) FROM workflow_executions WHERE id = $1`, f.youngExec),
			"young execution's nodes":  min(1, count(`SELECT count(*) FROM workflow_execution_nodes WHERE execution_id = $1`, f.youngExec)),
			"young cancelled item":     count(`SELECT count(*) FROM workflow_execution_queue WHERE id = $1`, f.youngItem),
			"young activity":           min(1, count(`SELECT count(*) FROM activity WHERE workspace_id = $1`, f.ws)),
			"version 1, in use":        count(`SELECT count(*) FROM workflow_definition_versions WHERE workflow_definition_id = $1 AND version = 1`, f.versionedDef),
			"version 3, pinned":        count(`SELECT count(*) FROM workflow_definition_versions WHERE workflow_definition_id = $1 AND version = 3`, f.versionedDef),
			"current version 4":        count(`SELECT count(*) FROM workflow_definition_versions WHERE workflow_definition_id = $1 AND version = 4`, f.versionedDef),
			"young deleted definition": count(`SELECT count(*) FROM workflow_definitions WHERE id = $1`, f.youngDelDef),
		} {
			if n != 1 {
				t.Errorf("%s workspace: %s was deleted within its period", f.plan, what)
			}
		}
	}
	close(stop)
	wg.Wait()
	flowIDs.Range(func(id, _ any) bool {
		if count(`SELECT count(*) FROM workflow_executions WHERE id = $1`, id) != 1 {
			t.Errorf("a run that completed meanwhile, %s, was deleted", id)
		}
		return true
	})
	if completed.Load() == 0 {
		t.Error("no run completed while retention ran")
	}
	if d := metricValue(t, base, `retention_deleted_rows_total{kind="executions"}`); d < 2 || d != deletedBefore {
		t.Errorf("retention_deleted_rows_total for executions is %v (was %v once they were gone), want the 2 old ones", d, deletedBefore)
	}
	oldest := time.Duration(metricValue(t, base, `retention_oldest_kept_age_seconds{kind="executions"}`) * float64(time.Second))
	if oldest < 28*day || oldest > 30*day {
		t.Errorf("oldest execution kept is %s old, want the PRO young one's 29 days", oldest)
	}
	t.Logf("deleted the old rows of 2 workspaces while %d runs completed; oldest execution kept: %s", completed.Load(), oldest.Round(time.Hour))
}

// createDefinition creates a definition of graph in ws and returns its id.
func createDefinition(t *testing.T, base, ws string, graph map[string]any) string {
	t.Helper()
	var def struct{ ID string }
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", harness.TestAdminToken, map[string]any{"workspaceId": ws, "name": "g", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	return def.ID
}

// enqueueThroughAPI starts def in ws and returns the queue id.
func enqueueThroughAPI(t *testing.T, base, ws, def string) string {
	t.Helper()
	var q struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken, map[string]any{"workspaceId": ws, "workflowDefinitionId": def}, &q); code != 202 {
		t.Fatalf("start: %d", code)
	}
	return q.QueueID
}

// metricValue reads one series from the API port's /metrics; 0 when absent.
func metricValue(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
