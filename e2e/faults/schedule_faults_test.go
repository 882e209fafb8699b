package faults

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/maintenance"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestFaultScheduleFiresOncePerTickThroughTwoKillsOfTheLeaseHolder: a
// schedule fires every second for 60 s under 3 dispatchers; twice the
// holder of the fireSchedules lease is killed with kill -9 (and a new
// dispatcher started in its place). Every tick from the first to the last
// has exactly one queue item: none fired twice, none lost, the ticks of
// each failover caught up within the catch-up window.
func TestFaultScheduleFiresOncePerTickThroughTwoKillsOfTheLeaseHolder(t *testing.T) {
	harness.FaultTest(t)
	dbURL := pgtest.URL(t)
	temporalAddr := harness.RequireEnv(t, "TEMPORAL_ADDRESS")
	ctx := context.Background()
	conn := connect(t, dbURL)
	env := harness.FaultEnv(dbURL, temporalAddr, "sched"+uuid.NewString()[:8]+".",
		"SLUICE_SCHEDULE_FIRE_INTERVAL=200ms", "SLUICE_SCHEDULE_LEASE_AT_MOST_FOR=3s")
	dispatchers := map[int]*harness.FaultRole{}
	start := func() {
		r := harness.StartFaultRole(t, "dispatcher", env)
		dispatchers[r.Cmd.Process.Pid] = r
	}
	for range 3 {
		start()
	}
	def := seedItems(t, conn, emptyGraph, 0)
	sched := uuid.New()
	// Overlap "queue": with no worker every run stays RUNNING, and each
	// tick is to enqueue all the same.
	if _, err := conn.Exec(ctx, `
		INSERT INTO schedules (id, workspace_id, workflow_definition_id, name, interval_seconds, overlap_policy, next_fire_at)
		SELECT $1, workspace_id, id, 'every second', 1, 'queue', date_trunc('second', now()) + interval '1 second'
		FROM workflow_definitions WHERE id = $2`, sched, def); err != nil {
		t.Fatal(err)
	}
	items := func() int {
		return count(t, conn, `SELECT count(*) FROM workflow_execution_queue WHERE schedule_id = $1`, sched)
	}
	porttest.Eventually(t, time.Minute, porttest.Holds("the first tick fired", func() bool { return items() > 0 }))
	began := time.Now()

	killHolder := func() {
		var lockedBy string
		if err := conn.QueryRow(ctx, `SELECT locked_by FROM shedlock WHERE name = $1`, maintenance.ScheduleFiringLeaseName).Scan(&lockedBy); err != nil {
			t.Fatalf("reading the lease holder: %v", err)
		}
		parts := strings.Split(lockedBy, ":")
		pid, _ := strconv.Atoi(parts[len(parts)-2])
		h := dispatchers[pid]
		if h == nil {
			t.Fatalf("lease held by %q, none of our dispatchers", lockedBy)
		}
		_ = h.Cmd.Process.Signal(syscall.SIGKILL)
		<-h.Done
		delete(dispatchers, pid)
		t.Logf("killed the fireSchedules lease holder %d at %s", pid, time.Since(began).Round(time.Millisecond))
		start()
	}
	for _, at := range []time.Duration{15 * time.Second, 35 * time.Second} {
		porttest.Eventually(t, time.Minute, porttest.Holds("the time of a kill", func() bool { return time.Since(began) >= at }))
		killHolder()
	}
	porttest.Eventually(t, 2*time.Minute, porttest.Holds("60 s of ticks", func() bool { return time.Since(began) >= 60*time.Second }))

	// Stop the schedule where it is, then judge every tick it fired.
	if _, err := conn.Exec(ctx, `UPDATE schedules SET paused_at = now(), next_fire_at = NULL WHERE id = $1`, sched); err != nil {
		t.Fatal(err)
	}
	var n, distinct int
	var first, last time.Time
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT schedule_tick), min(schedule_tick), max(schedule_tick)
		FROM workflow_execution_queue WHERE schedule_id = $1`, sched).Scan(&n, &distinct, &first, &last); err != nil {
		t.Fatal(err)
	}
	span := int(last.Sub(first)/time.Second) + 1
	t.Logf("%d items for %d ticks from %s to %s", n, span, first.Format(time.TimeOnly), last.Format(time.TimeOnly))
	if distinct != n {
		t.Errorf("%d items for %d distinct ticks: a tick fired twice", n, distinct)
	}
	if n != span {
		t.Errorf("%d items for the %d ticks from the first to the last: a tick was lost", n, span)
	}
	if span < 55 {
		t.Errorf("only %d ticks fired in 60 s", span)
	}
	var offGrid, early int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE schedule_tick <> date_trunc('second', schedule_tick)),
		count(*) FILTER (WHERE created_at < schedule_tick) FROM workflow_execution_queue WHERE schedule_id = $1`, sched).Scan(&offGrid, &early); err != nil {
		t.Fatal(err)
	}
	if offGrid != 0 || early != 0 {
		t.Errorf("%d items off the one-second grid, %d enqueued before their tick", offGrid, early)
	}
}
