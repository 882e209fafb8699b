package dispatch

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// startDispatchersPolling runs n non-exclusive dispatchers with a poll of
// poll, each woken by its own listener, until ctx ends, and returns
// their metrics. A long poll shows that what makes a rated or delayed item
// start on time is the claim's next due time, not the poll.
func (b *dispatchBundle) startDispatchersPolling(ctx context.Context, wg *sync.WaitGroup, n int, poll time.Duration) []*dispatch.Metrics {
	cfg := testConfig()
	cfg.PollInterval = poll
	var metrics []*dispatch.Metrics
	for range n {
		l := postgres.NewListener(b.pool, b.log)
		d := b.dispatcher(b.engine, cfg, l)
		metrics = append(metrics, d.metrics)
		wg.Add(2)
		go func() { defer wg.Done(); l.Run(ctx) }()
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	return metrics
}

// enqueueBulk enqueues n items of def in batches, as a bulk enqueue does.
func (b *dispatchBundle) enqueueBulk(t *testing.T, ws, def domain.ID, n int) {
	t.Helper()
	for n > 0 {
		batch := ports.EnqueueBatch{WorkspaceID: ws, DefinitionID: def, Actor: domain.Actor{Admin: true}}
		for range min(n, 500) {
			batch.Items = append(batch.Items, ports.EnqueueBatchItem{ID: domain.ID(uuid.New()), Input: json.RawMessage(`{}`), Priority: 2})
		}
		if _, err := b.store.EnqueueBatch(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		n -= len(batch.Items)
	}
}

// startTimes reads the start times of ws's executions (the claim's
// database time, the clock the buckets are kept by), in order, with their
// keys.
func (b *dispatchBundle) startTimes(t *testing.T, ws domain.ID) ([]time.Time, []string) {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		"SELECT started_at, coalesce(concurrency_key, '') FROM workflow_executions WHERE workspace_id = $1 ORDER BY started_at", ws)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var at []time.Time
	var keys []string
	for rows.Next() {
		var s time.Time
		var k string
		if err := rows.Scan(&s, &k); err != nil {
			t.Fatal(err)
		}
		at, keys = append(at, s), append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return at, keys
}

// busiestWindow is the most of starts (sorted) in any window of length
// per, sliding, [t, t+per).
func busiestWindow(starts []time.Time, per time.Duration) int {
	most, lo := 0, 0
	for hi := range starts {
		for starts[hi].Sub(starts[lo]) >= per {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}

// TestAStartRateOf10PerSecondHoldsAcrossThreeDispatchers: an ENTERPRISE
// workspace whose own limits are 5,000 RUNNING (so the rate is what binds)
// and 10 starts a second with a burst of 15, 2,000 items queued, three
// dispatchers racing in non-exclusive mode with a 5 s poll (so only the
// claims' next due times keep the pace).
//
// What it asserts, on the executions' start times (the claim's database
// time, by which the bucket is kept):
//   - no window of 1 s, sliding, holds more than the burst, 15;
//   - over the 60 s from the first start, [t0, t0+60 s), the starts are
//     600 ± 5 % once the initial burst is discounted. A bucket at rest
//     lets burst - rate + 1 = 6 go at t0 and then one every 100 ms, so 60 s
//     hold 600 + (burst - rate) = 605 starts at most; the 5 the burst adds
//     once are subtracted before comparing with 600.
//
// It runs 60 s, the one such test; it is skipped with -short.
func TestAStartRateOf10PerSecondHoldsAcrossThreeDispatchers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 60 s")
	}
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const items, rate, burst = 2000, 10, 15
	const measured = 60 * time.Second
	ws, def := b.workspace(t, domain.PlanEnterprise)
	maxRunning := 5000
	if _, err := b.store.SetWorkspaceLimits(ctx, domain.WorkspaceLimits{WorkspaceID: ws, MaxRunning: &maxRunning,
		StartRate: &domain.StartRate{Rate: rate, Per: domain.PerSecond, Burst: burst}}, nil); err != nil {
		t.Fatal(err)
	}
	b.enqueueBulk(t, ws, def, items)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	b.startDispatchersPolling(ctx, &wg, 3, 5*time.Second)
	var t0 time.Time
	porttest.Eventually(t, 10*time.Second, porttest.Holds("the first start", func() bool {
		starts, _ := b.startTimes(t, ws)
		if len(starts) > 0 {
			t0 = starts[0]
		}
		return len(starts) > 0
	}))
	// Wait until the database's clock has passed t0 + 60 s.
	porttest.Eventually(t, measured+30*time.Second, porttest.Holds("60 s of starts", func() bool {
		var past bool
		_ = b.pool.QueryRow(ctx, "SELECT now() >= $1::timestamptz", t0.Add(measured)).Scan(&past)
		return past
	}))
	cancel()
	wg.Wait()
	starts, _ := b.startTimes(t, ws)
	inWindow := 0
	for _, s := range starts {
		if s.Before(t0.Add(measured)) {
			inWindow++
		}
	}
	if most := busiestWindow(starts, time.Second); most > burst {
		t.Errorf("%d starts in one 1 s window, more than the burst %d", most, burst)
	}
	want := rate * int(measured/time.Second)
	paced := inWindow - (burst - rate)
	if lo, hi := want*95/100, want*105/100; paced < lo || paced > hi {
		t.Errorf("%d starts in the 60 s from the first (%d once the initial burst of %d is discounted), want %d ± 5 %%", inWindow, paced, burst-rate, want)
	}
	t.Logf("%d starts in the 60 s from the first (%d with the initial burst discounted; want 600 ± 5 %%), busiest 1 s window %d (burst %d), %d starts in all, 3 dispatchers",
		inWindow, paced, busiestWindow(starts, time.Second), burst, len(starts))
	pgtest.RequireExactStats(t, b.pool, "after a rated workspace ran under three dispatchers")
}

// TestAKeyRateHoldsWhileAnotherKeyDispatchesFreely: a definition whose
// concurrency key has a start rate of 2 a second (burst 2); key "slow"
// has 20 items enqueued first, then a definition without a rate queues 20
// items of key "free" behind them in the same workspace. Three dispatchers
// with a 5 s poll: every item of "free" starts within a second and a half
// while "slow" never has more than 2 starts in any 1 s window, and keeps
// going at its rate: the key over its rate holds back no other key.
func TestAKeyRateHoldsWhileAnotherKeyDispatchesFreely(t *testing.T) {
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const slowItems, freeItems, rate = 20, 20, 2
	ws, _ := b.keyedWorkspace(t, 1000, 1000)
	newDef := func(name string, r *domain.StartRate) domain.ID {
		g := domain.Graph{Nodes: []domain.Node{}, Edges: []domain.Edge{}, Concurrency: &domain.Concurrency{Key: "{{ input.k }}", Limit: 1000, StartRate: r}}
		d, err := b.store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: ws, Name: name, Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	rated := newDef("rated", &domain.StartRate{Rate: rate, Per: domain.PerSecond, Burst: rate})
	unrated := newDef("unrated", nil)
	b.enqueueKeyed(t, ws, rated, "slow", slowItems)
	b.enqueueKeyed(t, ws, unrated, "free", freeItems)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	began := time.Now()
	b.startDispatchersPolling(ctx, &wg, 3, 5*time.Second)
	took := porttest.Eventually(t, 1500*time.Millisecond, porttest.Holds("every item of the free key to start", func() bool {
		byKey, _, err := b.runningByKey(ctx, ws)
		return err == nil && byKey["free"] == freeItems
	}))
	porttest.Eventually(t, 10*time.Second, porttest.Holds("the slow key to go on at its rate", func() bool {
		byKey, _, err := b.runningByKey(ctx, ws)
		return err == nil && byKey["slow"] >= 6
	}))
	cancel()
	wg.Wait()
	starts, keys := b.startTimes(t, ws)
	var slow []time.Time
	for i, k := range keys {
		if k == "slow" {
			slow = append(slow, starts[i])
		}
	}
	if most := busiestWindow(slow, time.Second); most > rate {
		t.Fatalf("the rated key had %d starts in one 1 s window, more than its burst %d", most, rate)
	}
	if span := slow[len(slow)-1].Sub(slow[0]); len(slow) > 2 && span < time.Duration(len(slow)-rate)*time.Second/rate {
		t.Fatalf("the rated key started %d items in %v, faster than %d a second", len(slow), span, rate)
	}
	t.Logf("the free key's %d items all started within %v of the dispatchers (%v since they began, the slow key included), while the rated key started %d, at most %d in any 1 s window",
		freeItems, took, time.Since(began), len(slow), busiestWindow(slow, time.Second))
	pgtest.RequireExactStats(t, b.pool, "after a rated key and a free key ran")
}

// TestAStartRateChangedThroughTheAPIIsUsedByRunningDispatchers: a
// workspace whose own rate (set through PUT /limits) is 1 a minute starts
// one item and then holds the others PENDING, waiting on START_RATE; the
// admin raises it to 100 a second (burst 200) and two running dispatchers
// (5 s poll) start every other item within a second, with no restart,
// although the bucket's TAT the old rate left is a minute ahead. The plan's
// rate is edited the same way: PATCH sets it, a PATCH without it keeps it,
// null removes it.
func TestAStartRateChangedThroughTheAPIIsUsedByRunningDispatchers(t *testing.T) {
	s := harness.NewStack(t)
	c := harness.TemporalClient(t, harness.TemporalAddress(t))
	log := harness.TestLog()
	b := &dispatchBundle{pool: s.Pool, store: postgres.NewStore(s.Pool, log), client: c, log: log,
		engine: engine.NewWorkflowClient(c, engine.NewTaskQueues("rates"+uuid.NewString()[:8]+"."), engine.DefaultRunLimits())}
	admin := s.Client(t, harness.AdminToken)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const items = 20
	ws, def := b.workspace(t, domain.PlanPro)
	setRate := func(rate int, per client.StartRatePer, burst *int) {
		t.Helper()
		maxRunning := 1000
		r, err := admin.SetWorkspaceLimitsWithResponse(ctx, uuid.UUID(ws), client.SetWorkspaceLimitsJSONRequestBody{
			MaxRunning: &maxRunning, StartRate: &client.StartRate{Rate: rate, Per: per, Burst: burst}})
		wantBurst := rate // an absent burst is the rate
		if burst != nil {
			wantBurst = *burst
		}
		if err != nil || r.StatusCode() != http.StatusOK || r.JSON200.StartRate == nil || r.JSON200.StartRate.Rate != rate ||
			r.JSON200.StartRate.Burst == nil || *r.JSON200.StartRate.Burst != wantBurst {
			t.Fatalf("PUT limits with a rate of %d per %s: %v %d %s", rate, per, err, r.StatusCode(), r.Body)
		}
	}
	setRate(1, client.Minute, nil)
	b.enqueue(t, ws, def, items)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	metrics := b.startDispatchersPolling(ctx, &wg, 2, 5*time.Second)
	running := func() int { return b.running(t)[ws] }
	porttest.Eventually(t, 5*time.Second, porttest.Holds("the one start a minute allows", func() bool { return running() == 1 }))
	pending := domain.QueuePending
	page, err := b.store.ListQueue(ctx, ws, &pending, 5, nil)
	if err != nil || len(page) != 5 {
		t.Fatalf("listing the waiting items: %d, %v", len(page), err)
	}
	waits, err := usecases.NewExecutions(b.store, b.store, b.store, b.store, nil, domain.DefaultProcessQuotas()).WaitingOn(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range page {
		w := waits[q.ID]
		if w == nil || w.Reason != domain.WaitStartRate || w.Rate == nil || w.Rate.Rate != 1 || w.Rate.Per != domain.PerMinute ||
			w.Until == nil || time.Until(*w.Until) < 30*time.Second {
			t.Fatalf("a waiting item waits on %+v, want START_RATE at 1/minute, until about a minute on", w)
		}
	}
	if n := running(); n != 1 {
		t.Fatalf("%d RUNNING under a rate of 1 a minute, want 1", n)
	}
	// The dispatchers counted the workspace as passed over for its rate,
	// by that reason alone.
	var byRate, byLimit float64
	for _, m := range metrics {
		byRate += testutil.ToFloat64(m.PassedOver.WithLabelValues("start_rate"))
		byLimit += testutil.ToFloat64(m.PassedOver.WithLabelValues("workspace_limit"))
	}
	if byRate < 1 || byLimit != 0 {
		t.Fatalf("queue_admission_passed_over_total: start_rate %v, workspace_limit %v; want start_rate counted, workspace_limit 0", byRate, byLimit)
	}
	burst := 200
	setRate(100, client.Second, &burst)
	took := porttest.Eventually(t, time.Second, porttest.Holds("the raised rate to start every item", func() bool { return running() == items }))
	t.Logf("a raised start rate was used %v after the API answered", took)

	// The plan's rate: PATCH sets it, PATCH without it keeps it, null
	// removes it.
	patch := func(body string) *client.UpdatePlanResponse {
		t.Helper()
		r, err := admin.UpdatePlanWithBodyWithResponse(ctx, client.ENTERPRISE, "application/json", strings.NewReader(body))
		if err != nil || r.StatusCode() != http.StatusOK {
			t.Fatalf("PATCH /plans/ENTERPRISE %s: %v %d %s", body, err, r.StatusCode(), r.Body)
		}
		return r
	}
	if r := patch(`{"maxRunning": 20, "startRate": {"rate": 50, "per": "minute", "burst": 60}}`); r.JSON200.StartRate == nil ||
		r.JSON200.StartRate.Rate != 50 || *r.JSON200.StartRate.Burst != 60 || r.JSON200.StartRate.Per != client.Minute {
		t.Fatalf("the plan's rate reads %+v after setting 50/minute burst 60", r.JSON200.StartRate)
	}
	if r := patch(`{"maxRunning": 20}`); r.JSON200.StartRate == nil || r.JSON200.StartRate.Rate != 50 {
		t.Fatalf("a PATCH without startRate changed the plan's rate to %+v", r.JSON200.StartRate)
	}
	if r := patch(`{"maxRunning": 20, "startRate": null}`); r.JSON200.StartRate != nil {
		t.Fatalf("a PATCH with startRate null left %+v", r.JSON200.StartRate)
	}
	pgtest.RequireExactStats(t, b.pool, "after a start rate changed under running dispatchers")
}

// TestADelayedItemStartsWithin500msOfItsNotBefore: an idle dispatcher
// with a 5 s poll; an item enqueued with a notBefore 2 s ahead starts
// within 500 ms after it, because the claim that saw it reported when it
// comes due.
func TestADelayedItemStartsWithin500msOfItsNotBefore(t *testing.T) {
	b := setupDispatch(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, def := b.workspace(t, domain.PlanPro)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	b.startDispatchersPolling(ctx, &wg, 1, 5*time.Second)
	notBefore := time.Now().Add(2 * time.Second)
	q, _, err := b.store.Enqueue(ctx, ports.ItemToEnqueue{ID: domain.ID(uuid.New()), WorkspaceID: ws, DefinitionID: def,
		Input: json.RawMessage(`{}`), Priority: 2, NotBefore: &notBefore, Actor: domain.Actor{Admin: true}})
	if err != nil {
		t.Fatal(err)
	}
	porttest.Eventually(t, 10*time.Second, porttest.Holds("the delayed item to start", func() bool { return b.running(t)[ws] == 1 }))
	var late time.Duration
	var lateSeconds float64
	if err := b.pool.QueryRow(ctx, `SELECT extract(epoch FROM e.started_at - q.available_at)::float8
		FROM workflow_execution_queue q JOIN workflow_executions e ON e.id = q.execution_id WHERE q.id = $1`, q.ID).Scan(&lateSeconds); err != nil {
		t.Fatal(err)
	}
	late = time.Duration(lateSeconds * float64(time.Second))
	if late < 0 || late > 500*time.Millisecond {
		t.Fatalf("the delayed item started %v after its notBefore, want within 500 ms (and not before it)", late)
	}
	t.Logf("a delayed item started %v after its notBefore, on a dispatcher polling every 5 s", late)
}
