package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/cmd/sluice/service"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// pausedBurst is the burst the paused dispatcher claims in one batch: its
// start concurrency's worth of starts waits at the fault point, the rest
// for a start slot, when it is paused.
const pausedBurst = 100

// TestFaultDispatcherPausedWithStartsInFlightStartsNothingItsPeerReleased
// reproduces the finding of issue 33: two non-exclusive dispatchers, one
// paused (SIGSTOP) past its 2 s registration lease with a burst's starts
// in flight, the other settling its claims (they never started, so they
// go back to PENDING), then the paused one resumes, renews its own
// lease within milliseconds, and its starts in flight go on. Rather than
// hoping a burst's starts are still in flight when the renewal lands, the
// paused one halts every start of its burst at the fault point before the
// term check (SLUICE_TEST_HALT_AT=starting) and is stopped there; the test
// resumes the process, waits for its renewal, and then lets the starts
// go: the window the measurement hit in 5 of 9 tries, every time. The
// workspace is kept full meanwhile (as a busy one is), so the released
// items wait for a slot instead of being claimed again at once, and a
// stray run has the time to end before they run, as it did in the
// measurement. It checks that the resumed dispatcher starts none of the
// released items, and that every item ends recorded exactly once.
func TestFaultDispatcherPausedWithStartsInFlightStartsNothingItsPeerReleased(t *testing.T) {
	harness.FaultTest(t)
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	temporalAddr := harness.RequireEnv(t, "TEMPORAL_ADDRESS")
	conn := connect(t, dbURL)
	queuePrefix := "leaseterm" + uuid.NewString()[:8] + "."
	env := defaultEnv(dbURL, temporalAddr, queuePrefix, "SLUICE_DISPATCH_EXCLUSIVE=false", "SLUICE_DISPATCH_LEASE_TTL=2s")
	paused := startWatchedRole(t, "dispatcher", append(env, service.TestHaltEnv+"="+string(dispatch.FaultBeforeStart),
		"SLUICE_DISPATCH_BATCH_SIZE="+strconv.Itoa(pausedBurst)))
	registration := dispatch.RegistrationLeaseName(lockedBy(t, conn, paused.FaultRole))
	ws, def := seedBurst(t, conn, pausedBurst)
	paused.waitLine(t, time.Minute, service.TestHaltedLine+" "+string(dispatch.FaultBeforeStart))
	claimed := executionIDs(t, conn, `SELECT execution_id FROM workflow_execution_queue
		WHERE workspace_id = $1 AND status = 'CLAIMED' AND claimed_by LIKE $2`, ws, holderPattern(paused.FaultRole))
	if len(claimed) != pausedBurst {
		t.Fatalf("%d items CLAIMED by the dispatcher at its halt, want the whole burst of %d", len(claimed), pausedBurst)
	}
	// The workspace's other runs take every slot the burst frees, so what
	// the peer releases waits PENDING.
	blockers := occupySlots(t, conn, ws, def, pausedBurst)

	_ = paused.Cmd.Process.Signal(syscall.SIGSTOP)
	stoppedAt := time.Now()
	peer := harness.StartFaultRole(t, "dispatcher", env)
	harness.StartFaultRole(t, "worker", env)
	settled := waitCount(t, conn, time.Minute, "items still CLAIMED by the paused dispatcher", 0,
		`SELECT count(*) FROM workflow_execution_queue WHERE status = 'CLAIMED' AND claimed_by LIKE $1`, holderPattern(paused.FaultRole))
	if n := count(t, conn, `SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1 AND status = 'PENDING'`, ws); n != pausedBurst {
		t.Fatalf("%d items PENDING after the peer settled the paused dispatcher's claims, want all %d released: none started", n, pausedBurst)
	}
	if n := count(t, conn, `SELECT count(*) FROM shedlock WHERE name = $1 AND lock_until > now()`, registration); n != 0 {
		t.Fatal("the paused dispatcher's registration is live though its claims were settled")
	}

	_ = paused.Cmd.Process.Signal(syscall.SIGCONT)
	pausedFor := time.Since(stoppedAt)
	renewedIn := waitCount(t, conn, time.Minute, "the resumed dispatcher's registration renewed", 1,
		`SELECT count(*) FROM shedlock WHERE name = $1 AND locked_by LIKE $2 AND lock_until > now()`, registration, holderPattern(paused.FaultRole))
	_ = paused.Cmd.Process.Signal(service.TestResumeSignal)
	// Every start of the burst has returned once it was refused, or once
	// the marking of those made was: the term the items were claimed under
	// has ended.
	refusedStarts := 0
	porttest.Eventually(t, time.Minute, func() error {
		refusedStarts = paused.loggedCount("not starting claimed items")
		if refusedStarts == pausedBurst || paused.printed("the lease term these items were claimed under has ended") {
			return nil
		}
		return fmt.Errorf("the resumed dispatcher refused %d starts of %d and marked none", refusedStarts, pausedBurst)
	})
	strays := waitStraysClosed(t, harness.TemporalClient(t, temporalAddr), claimed)

	// Slots free: the peer runs the released items.
	if _, err := conn.Exec(ctx, `UPDATE workflow_executions SET status = 'COMPLETED', completed_at = now() WHERE id = ANY($1)`, blockers); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_notify('sluice_queue', '')`); err != nil {
		t.Fatal(err)
	}
	waitCount(t, conn, time.Minute, "items of the burst still queued", 0,
		`SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1`, ws)

	var rows, items, completed, ofClaimed int
	if err := conn.QueryRow(ctx, `
		SELECT count(*), count(DISTINCT queue_id), count(*) FILTER (WHERE status = 'COMPLETED'), count(*) FILTER (WHERE id = ANY($3))
		FROM workflow_executions WHERE workspace_id = $1 AND NOT id = ANY($2)`, ws, blockers, claimed).
		Scan(&rows, &items, &completed, &ofClaimed); err != nil {
		t.Fatal(err)
	}
	ran, refused := 0, 0
	for _, s := range strays {
		if s.refused {
			refused++
		} else {
			ran++
		}
	}
	renewed := paused.printed("holding it in a new term")
	t.Logf("FIGURE dispatcher paused %.1f s past its 2 s lease with a burst of %d claimed and its starts in flight (SIGSTOP at the fault point): its peer settled the claims %.1f s after the pause, all %d released; resumed, it renewed its lease %.2f s later, as a new term: %v; then it made %d starts of released items (%d ran, %d refused admission) and refused %d; the burst ended with %d execution rows for %d of its %d items, %d COMPLETED, %d lost, %d under an execution of the paused dispatcher's claims",
		pausedFor.Seconds(), pausedBurst, settled.Seconds(), pausedBurst, renewedIn.Seconds(), renewed,
		len(strays), ran, refused, refusedStarts, rows, items, pausedBurst, completed, pausedBurst-items, ofClaimed)

	if ran > 0 {
		t.Errorf("%d workflows of released claims ran (the first: %s, %s): the resumed dispatcher started items its peer had released",
			ran, strays[0].id, strays[0].state)
	}
	if rows != pausedBurst || items != pausedBurst || completed != pausedBurst {
		t.Errorf("%d execution rows for %d of the %d items, %d COMPLETED; want every item recorded exactly once, COMPLETED", rows, items, pausedBurst, completed)
	}
	if ofClaimed != 0 {
		t.Errorf("%d items ran under the execution of a released claim, want each under a claim of its own", ofClaimed)
	}
	if len(strays) != 0 {
		t.Errorf("the resumed dispatcher made %d starts of items its peer had released, want none: the term they were claimed under had ended", len(strays))
	}
	if !renewed {
		t.Error("the resumed dispatcher did not report renewing its expired lease as a new term")
	}
	if !peer.Alive() || !paused.Alive() {
		t.Fatal("a dispatcher died")
	}
}

// seedBurst adds an ENTERPRISE workspace whose limit is n, a definition
// of an empty graph and n PENDING items, and returns the workspace and
// the definition.
func seedBurst(t *testing.T, conn *pgx.Conn, n int) (ws, def uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	ws, def = uuid.New(), uuid.New()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO workspaces (id, name, plan) VALUES ($1, 'lease term', 'ENTERPRISE')`, []any{ws}},
		{`INSERT INTO workspace_limits (workspace_id, max_running) VALUES ($1, $2)`, []any{ws, n}},
		{`INSERT INTO workflow_definitions (id, workspace_id, name) VALUES ($1, $2, 'lease term')`, []any{def, ws}},
		{`INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph) VALUES ($1, 1, $2)`, []any{def, emptyGraph}},
		{`INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, input, created_at)
		  SELECT gen_random_uuid(), $1, $2, jsonb_build_object('n', g), now() + make_interval(secs => g / 1000.0)
		  FROM generate_series(1, $3) g`, []any{ws, def, n}},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	return ws, def
}

// occupySlots writes n RUNNING executions of workspace ws without items:
// the workspace's other runs, holding n of its slots until the test ends
// them.
func occupySlots(t *testing.T, conn *pgx.Conn, ws, def uuid.UUID, n int) []domain.ID {
	t.Helper()
	return executionIDs(t, conn, `
		INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status)
		SELECT gen_random_uuid(), $1, $2, 1, 'RUNNING' FROM generate_series(1, $3)
		RETURNING id`, ws, def, n)
}

// executionIDs runs query and collects the ids it returns.
func executionIDs(t *testing.T, conn *pgx.Conn, query string, args ...any) []domain.ID {
	t.Helper()
	rows, err := conn.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[domain.ID])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// strayRun is a workflow started for a claim after it had been released.
type strayRun struct {
	id    domain.ID
	state string
	// refused is set when the run ended refused admission.
	refused bool
}

// waitStraysClosed waits until no workflow of the executions ids is
// running, and returns those that exist: once every start has returned,
// a workflow Temporal does not know was never started.
func waitStraysClosed(t *testing.T, c client.Client, ids []domain.ID) []strayRun {
	t.Helper()
	var strays []strayRun
	porttest.Eventually(t, time.Minute, func() error {
		strays = strays[:0]
		for _, id := range ids {
			resp, err := c.DescribeWorkflowExecution(context.Background(), engine.WorkflowID(id), "")
			var notFound *serviceerror.NotFound
			if errors.As(err, &notFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("describing %s: %w", id, err)
			}
			state := resp.GetWorkflowExecutionInfo().GetStatus()
			if state == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return fmt.Errorf("the workflow of released claim %s is still running", id)
			}
			s := strayRun{id: id, state: state.String()}
			var appErr *temporal.ApplicationError
			if err := c.GetWorkflow(context.Background(), engine.WorkflowID(id), "").Get(context.Background(), nil); errors.As(err, &appErr) {
				s.refused = appErr.Type() == engine.NotAdmittedErrorType
			}
			strays = append(strays, s)
		}
		return nil
	})
	return strays
}

// printed reports whether the role has printed a line containing s.
func (w *watchedRole) printed(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// loggedCount sums the count attribute of the log lines whose message
// contains msg.
func (w *watchedRole) loggedCount(msg string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		var rec struct {
			Msg   string `json:"msg"`
			Count int    `json:"count"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && strings.Contains(rec.Msg, msg) {
			n += rec.Count
		}
	}
	return n
}
