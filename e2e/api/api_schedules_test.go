package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/crontab"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/maintenance"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestSchedulesThroughTheAPI: a schedule is created, shown with its next
// fire times in its zone, listed, edited, paused, resumed and deleted; a
// plan's shortest interval and schedule quota hold.
func TestSchedulesThroughTheAPI(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	s.SetPlanQuotas(t, domain.PlanFree, domain.QuotaOverrides{Schedules: harness.Ptr(1)})
	ctx := context.Background()
	read := harness.Reader(t)
	ws, c := quotaWorkspace(t, s, client.FREE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "nightly", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)
	defID := def.JSON201.ID

	cr, err := c.CreateScheduleWithResponse(ctx, client.CreateScheduleRequest{WorkspaceID: ws, WorkflowDefinitionID: defID, Name: "nightly",
		CronExpression: harness.Ptr("0 3 * * *"), TimeZone: harness.Ptr("Europe/Paris"), Input: harness.RawInput(map[string]any{"k": 1})})
	status(t, "createSchedule", cr, err, http.StatusCreated)
	sc := cr.JSON201
	if sc.OverlapPolicy != client.Skip || sc.Paused || sc.NextFireAt == nil || len(sc.NextFireTimes) != usecases.ScheduleShownFireTimes {
		t.Fatalf("created schedule: %s", cr.Body)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	for i, ft := range sc.NextFireTimes {
		if local := ft.In(paris); local.Hour() != 3 || local.Minute() != 0 {
			t.Errorf("fire time %d is %s in Paris, want 03:00", i, local)
		}
		if i > 0 && !ft.After(sc.NextFireTimes[i-1]) {
			t.Errorf("fire times out of order: %v", sc.NextFireTimes)
		}
	}

	// The FREE plan allows one schedule, firing at most once a minute.
	read(c.CreateSchedule(ctx, client.CreateScheduleRequest{WorkspaceID: ws, WorkflowDefinitionID: defID, Name: "second", CronExpression: harness.Ptr("0 4 * * *")})).
		Expect(t, "a schedule past the quota", http.StatusTooManyRequests, "quota-exceeded")
	fast := read(c.UpdateSchedule(ctx, sc.ID, client.UpdateScheduleRequest{IntervalSeconds: harness.Ptr(10)}))
	fast.Expect(t, "an interval below the plan's shortest", http.StatusBadRequest, "invalid-request")
	if !slices.Contains(fast.FieldPaths(), "/intervalSeconds") {
		t.Errorf("the refusal names %v, want /intervalSeconds", fast.FieldPaths())
	}

	up, err := c.UpdateScheduleWithResponse(ctx, sc.ID, client.UpdateScheduleRequest{IntervalSeconds: harness.Ptr(3600), Name: harness.Ptr("hourly"), OverlapPolicy: harness.Ptr(client.Queue)})
	status(t, "updateSchedule", up, err, http.StatusOK)
	if u := up.JSON200; u.CronExpression != nil || u.IntervalSeconds == nil || *u.IntervalSeconds != 3600 || u.Name != "hourly" ||
		u.OverlapPolicy != client.Queue || u.NextFireAt == nil || u.NextFireAt.Minute() != 0 || u.NextFireAt.Second() != 0 {
		t.Errorf("edited schedule: %s", up.Body)
	}
	ls, err := c.ListSchedulesWithResponse(ctx, &client.ListSchedulesParams{WorkspaceID: ws})
	status(t, "listSchedules", ls, err, http.StatusOK)
	if len(ls.JSON200.Items) != 1 || ls.JSON200.Items[0].ID != sc.ID {
		t.Errorf("listSchedules: %s", ls.Body)
	}

	pa, err := c.PauseScheduleWithResponse(ctx, sc.ID)
	status(t, "pauseSchedule", pa, err, http.StatusOK)
	if !pa.JSON200.Paused || pa.JSON200.NextFireAt != nil || len(pa.JSON200.NextFireTimes) != 0 {
		t.Errorf("paused schedule: %s", pa.Body)
	}
	read(c.PauseSchedule(ctx, sc.ID)).Expect(t, "pausing a paused schedule", http.StatusConflict, "schedule-state")
	re, err := c.ResumeScheduleWithResponse(ctx, sc.ID)
	status(t, "resumeSchedule", re, err, http.StatusOK)
	if re.JSON200.Paused || re.JSON200.NextFireAt == nil {
		t.Errorf("resumed schedule: %s", re.Body)
	}
	read(c.ResumeSchedule(ctx, sc.ID)).Expect(t, "resuming a running schedule", http.StatusConflict, "schedule-state")
	gs, err := c.GetScheduleWithResponse(ctx, sc.ID)
	status(t, "getSchedule", gs, err, http.StatusOK)
	dl, err := c.DeleteScheduleWithResponse(ctx, sc.ID)
	status(t, "deleteSchedule", dl, err, http.StatusNoContent)
	read(c.GetSchedule(ctx, sc.ID)).Expect(t, "a deleted schedule", http.StatusNotFound, "not-found")
}

// TestNegativeScheduleInputs: bad cron expressions and time zones, both or
// neither of a cron expression and an interval, and hostile zone names are
// refused with a 400 naming the field, and nothing is stored.
func TestNegativeScheduleInputs(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	read := harness.Reader(t)
	ws, c := quotaWorkspace(t, s, client.ENTERPRISE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "d", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)
	base := func(edit func(*client.CreateScheduleRequest)) client.CreateScheduleRequest {
		r := client.CreateScheduleRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID, Name: "bad", CronExpression: harness.Ptr("0 3 * * *")}
		edit(&r)
		return r
	}
	for _, tc := range []struct {
		name  string
		req   client.CreateScheduleRequest
		field string
	}{
		{"a minute of 61", base(func(r *client.CreateScheduleRequest) { r.CronExpression = harness.Ptr("61 * * * *") }), "/cronExpression"},
		{"three fields", base(func(r *client.CreateScheduleRequest) { r.CronExpression = harness.Ptr("* * *") }), "/cronExpression"},
		{"words", base(func(r *client.CreateScheduleRequest) { r.CronExpression = harness.Ptr("every day at noon") }), "/cronExpression"},
		{"@every", base(func(r *client.CreateScheduleRequest) { r.CronExpression = harness.Ptr("@every 1s") }), "/cronExpression"},
		{"a zone in the expression", base(func(r *client.CreateScheduleRequest) { r.CronExpression = harness.Ptr("CRON_TZ=Asia/Tokyo 0 3 * * *") }), "/cronExpression"},
		{"February 30th", base(func(r *client.CreateScheduleRequest) { r.CronExpression = harness.Ptr("0 0 30 2 *") }), "/cronExpression"},
		{"an unknown zone", base(func(r *client.CreateScheduleRequest) { r.TimeZone = harness.Ptr("Mars/Olympus_Mons") }), "/timeZone"},
		{"a path as zone", base(func(r *client.CreateScheduleRequest) { r.TimeZone = harness.Ptr("../../../etc/passwd") }), "/timeZone"},
		{"the server's zone", base(func(r *client.CreateScheduleRequest) { r.TimeZone = harness.Ptr("Local") }), "/timeZone"},
		{"both cron and interval", base(func(r *client.CreateScheduleRequest) { r.IntervalSeconds = harness.Ptr(60) }), "/intervalSeconds"},
		{"neither cron nor interval", base(func(r *client.CreateScheduleRequest) { r.CronExpression = nil }), "/cronExpression"},
		{"an interval of 0", base(func(r *client.CreateScheduleRequest) { r.CronExpression, r.IntervalSeconds = nil, harness.Ptr(0) }), "/intervalSeconds"},
		{"a cron expression of 300 characters", base(func(r *client.CreateScheduleRequest) { r.CronExpression = harness.Ptr(strings.Repeat("1,", 150)) }), "/cronExpression"},
	} {
		a := read(c.CreateSchedule(ctx, tc.req))
		a.Expect(t, tc.name, http.StatusBadRequest, "invalid-request")
		if !slices.Contains(a.FieldPaths(), tc.field) {
			t.Errorf("%s: the problem names %v, want %s", tc.name, a.FieldPaths(), tc.field)
		}
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM schedules`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d schedules stored after the refusals", n)
	}
}

// TestAPausedScheduleFiresOnceForTheTicksItMissed: a schedule firing every
// second is paused for 10 s and resumed; the ten or so ticks it missed
// fire once, as one item for the latest of them, and it then goes on a
// tick a second. Each item names its tick.
func TestAPausedScheduleFiresOnceForTheTicksItMissed(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.ENTERPRISE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "tick", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)

	store := postgres.NewStore(s.Pool, harness.TestLog())
	cfg := maintenance.DefaultScheduleFiringConfig()
	cfg.Schedule.Interval = 100 * time.Millisecond
	firing := maintenance.NewScheduleFiring(store, crontab.NewParser(), postgres.NewLease(s.Pool, "test:"+uuid.NewString()),
		cfg, dispatch.NewLeaseMetrics(prometheus.NewRegistry()), harness.TestLog())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); firing.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	cr, err := c.CreateScheduleWithResponse(ctx, client.CreateScheduleRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID,
		Name: "every second", IntervalSeconds: harness.Ptr(1), OverlapPolicy: harness.Ptr(client.Queue)})
	status(t, "createSchedule", cr, err, http.StatusCreated)
	id := cr.JSON201.ID
	items := func(from time.Time) int {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue WHERE schedule_id = $1 AND schedule_tick > $2`, id, from).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("two ticks fired", func() bool { return items(time.Time{}) >= 2 }))

	pa, err := c.PauseScheduleWithResponse(ctx, id)
	status(t, "pauseSchedule", pa, err, http.StatusOK)
	pausedAt := *pa.JSON200.PausedAt
	before := items(time.Time{})
	// The pause is the scenario: ten seconds of ticks go by unfired.
	<-time.After(10 * time.Second)
	if n := items(time.Time{}); n != before {
		t.Fatalf("%d items fired while paused", n-before)
	}
	re, err := c.ResumeScheduleWithResponse(ctx, id)
	status(t, "resumeSchedule", re, err, http.StatusOK)
	resumedAt := time.Now()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the catch-up tick fired", func() bool { return items(pausedAt) >= 1 }))

	var catchUps int
	var catchUpTick time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), max(schedule_tick) FROM workflow_execution_queue
		WHERE schedule_id = $1 AND schedule_tick > $2 AND schedule_tick <= $3`, id, pausedAt, resumedAt).Scan(&catchUps, &catchUpTick); err != nil {
		t.Fatal(err)
	}
	if catchUps != 1 {
		t.Errorf("%d items for the ticks missed while paused, want 1", catchUps)
	}
	if resumedAt.Sub(catchUpTick) > 2*time.Second {
		t.Errorf("the catch-up item is for tick %s, not the latest before the resume at %s", catchUpTick, resumedAt)
	}
	// Then a tick a second again, each with one item.
	porttest.Eventually(t, 30*time.Second, porttest.Holds("three ticks after the resume", func() bool { return items(resumedAt) >= 3 }))
	var n, distinct int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT schedule_tick) FROM workflow_execution_queue WHERE schedule_id = $1`, id).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != distinct {
		t.Errorf("%d items for %d ticks", n, distinct)
	}
	// The item says which tick it is for, through the API as well.
	gq, err := c.GetScheduleWithResponse(ctx, id)
	status(t, "getSchedule", gq, err, http.StatusOK)
	if gq.JSON200.LastQueueID == nil || gq.JSON200.LastTick == nil {
		t.Fatalf("the schedule names no last item: %s", gq.Body)
	}
	qi, err := c.GetQueueItemWithResponse(ctx, *gq.JSON200.LastQueueID)
	if err == nil && qi.StatusCode() == http.StatusOK && (qi.JSON200.ScheduleID == nil || *qi.JSON200.ScheduleID != id || qi.JSON200.ScheduleTick == nil) {
		t.Errorf("the fired item does not name its schedule and tick: %s", qi.Body)
	}
}
