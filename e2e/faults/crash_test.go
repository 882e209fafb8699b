package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestDispatcherKilledAtRandomLosesNothingAndStartsNothingTwice runs the
// real dispatcher binary, SIGKILLs it at random moments while it works
// through a queue, and restarts it, until every item is dispatched. Then
// every item must be DISPATCHED with exactly one execution, whose workflow
// exists on Temporal.
func TestDispatcherKilledAtRandomLosesNothingAndStartsNothingTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test builds and runs the binary")
	}
	dbURL := pgtest.URL(t)
	temporalAddr := harness.TemporalAddress(t)
	bin := harness.BuildSluice(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const items = 3000
	if _, err := conn.Exec(ctx, `
		WITH w AS (INSERT INTO workspaces (id, name, plan)
		           SELECT gen_random_uuid(), 'w' || g, 'ENTERPRISE' FROM generate_series(1, 5) g RETURNING id),
		     l AS (INSERT INTO workspace_limits (workspace_id, max_running) SELECT id, 1000 FROM w),
		     d AS (INSERT INTO workflow_definitions (id, workspace_id, name) SELECT gen_random_uuid(), id, 'd' FROM w RETURNING id, workspace_id),
		     v AS (INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph)
		           SELECT id, 1, '{"nodes":[],"edges":[]}' FROM d)
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id)
		SELECT gen_random_uuid(), d.workspace_id, d.id FROM d, generate_series(1, $1 / 5)`, items); err != nil {
		t.Fatal(err)
	}
	// No worker runs these workflows, so the limit is raised above the
	// item count: this test is about crashes, not capacity.
	queuePrefix := "crash" + uuid.NewString()[:8] + "."
	env := append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"TEMPORAL_ADDRESS="+temporalAddr,
		"TEMPORAL_TASK_QUEUE_PREFIX="+queuePrefix,
		"SLUICE_LOG_LEVEL=error",
		"SLUICE_ADMIN_ADDR=127.0.0.1:0",
		"SLUICE_DISPATCH_POLL_INTERVAL=50ms",
		"SLUICE_DISPATCH_BATCH_SIZE=7",
		"SLUICE_DISPATCH_EXCLUSIVE=false",
		"SLUICE_DISPATCH_STALE_AFTER=1s",
		"SLUICE_DISPATCH_RECOVERY_INTERVAL=200ms",
		// A killed holder keeps the recovery lease until it expires.
		"SLUICE_RECOVERY_LEASE_AT_MOST_FOR=2s",
		"SLUICE_RECOVERY_LEASE_AT_LEAST_FOR=0s",
		"SLUICE_DISPATCH_BACKOFF_BASE=50ms",
	)
	rng := rand.New(rand.NewPCG(1, 2))
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "dispatcher")
		cmd.Env = env
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	// Crash phase: kill it at random points of its work.
	kills := 0
	for ; kills < 40 && pendingItems(t, conn) > 0; kills++ {
		cmd := start()
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond) // a random point in its work, not synchronisation
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	// Recovery phase: a dispatcher that lives must settle everything the
	// kills left behind, without starting anything twice.
	cmd := start()
	porttest.Eventually(t, 2*time.Minute, func() error {
		if n := pendingItems(t, conn); n > 0 {
			return fmt.Errorf("%d items not dispatched after %d kills", n, kills)
		}
		return nil
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()

	var dispatched, executions, itemsWithOwnExecution int
	if err := conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM workflow_execution_queue WHERE status = 'DISPATCHED'),
		       (SELECT count(*) FROM workflow_executions),
		       (SELECT count(*) FROM workflow_execution_queue q JOIN workflow_executions e ON e.id = q.execution_id)`).
		Scan(&dispatched, &executions, &itemsWithOwnExecution); err != nil {
		t.Fatal(err)
	}
	if dispatched != items || executions != items || itemsWithOwnExecution != items {
		t.Fatalf("after %d kills: %d dispatched, %d executions, %d items with their execution; want %d each",
			kills, dispatched, executions, itemsWithOwnExecution, items)
	}
	c, err := client.Dial(client.Options{HostPort: temporalAddr, Namespace: "default", Logger: harness.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	workflows := engine.NewWorkflowClient(c, engine.NewTaskQueues(queuePrefix), engine.DefaultRunLimits())
	rows, err := conn.Query(ctx, "SELECT id FROM workflow_executions")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[domain.ID])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		state, err := workflows.DescribeWorkflow(ctx, id)
		if err != nil || state == ports.WorkflowNotFound {
			t.Fatalf("execution %s: workflow %s, %v; every dispatched item's workflow must exist", id, state, err)
		}
	}
	var recovered int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE attempt_count > 0").Scan(&recovered); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d items dispatched exactly once across %d kills; %d of them were released on the way, by stale recovery or by a dispatcher settling a dead one's claims", items, kills, recovered)
}

func pendingItems(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM workflow_execution_queue WHERE status <> 'DISPATCHED'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
