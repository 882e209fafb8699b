package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// poolSample is one reading of what runs, per workspace, and what waits.
type poolSample struct {
	at      time.Time
	running map[domain.ID]int
	pending map[domain.ID]int
	total   int
}

// samplePool reads every workspace's RUNNING and PENDING counts in one
// statement (the counts workspace_queue_stats keeps in the transactions
// that change them).
func (b *dispatchBundle) samplePool(ctx context.Context) (poolSample, error) {
	s := poolSample{at: time.Now(), running: map[domain.ID]int{}, pending: map[domain.ID]int{}}
	rows, err := b.pool.Query(ctx, "SELECT workspace_id, running, pending FROM workspace_queue_stats")
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var id domain.ID
		var running, pending int
		if err := rows.Scan(&id, &running, &pending); err != nil {
			return s, err
		}
		s.running[id], s.pending[id], s.total = running, pending, s.total+running
	}
	return s, rows.Err()
}

// completeRunsAfter ends every RUNNING execution once it has run for
// runLength, as a worker would, until ctx ends.
func (b *dispatchBundle) completeRunsAfter(ctx context.Context, wg *sync.WaitGroup, runLength time.Duration) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rows, err := b.pool.Query(ctx, "SELECT id FROM workflow_executions WHERE status = 'RUNNING' AND started_at < now() - make_interval(secs => $1)", runLength.Seconds())
			if err != nil {
				continue
			}
			var ids []domain.ID
			for rows.Next() {
				var id domain.ID
				_ = rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				_, _ = b.store.FinishExecution(ctx, id, domain.ExecutionCompleted, nil, queue.AtEnd(domain.ExecutionCompleted, "", harness.TestLog()))
			}
			time.Sleep(5 * time.Millisecond) // a worker's pace of completions, not synchronisation
		}
	}()
}

// startDispatcherProcesses runs n `sluice dispatcher` processes on the
// database at url, non-exclusive, each woken by its own LISTEN and
// polling every 50 ms, starting workflows on a task queue no worker
// serves: the runs wait until the test ends them.
func startDispatcherProcesses(t *testing.T, url string, n int) {
	t.Helper()
	env := []string{
		"DATABASE_URL=" + url,
		"TEMPORAL_ADDRESS=" + harness.TemporalAddress(t),
		"TEMPORAL_TASK_QUEUE_PREFIX=pools" + uuid.NewString()[:8] + ".",
		"SLUICE_DISPATCH_EXCLUSIVE=false",
		"SLUICE_DISPATCH_POLL_INTERVAL=50ms",
	}
	for range n {
		harness.StartRole(t, "dispatcher", env)
	}
}

// TestAPoolOf100IsSharedByFloorsCeilingsAndWeightsAcrossThreeDispatchers:
// a pool of 100, FREE floor 1 ceiling 10, PRO 5/30, ENTERPRISE 20/60;
// runs last 3 s; three dispatcher processes race (non-exclusive) and a sampler
// reads every workspace's RUNNING count every 50 ms. With only 14 FREE
// workspaces busy (140 of ceilings) the pool runs at least 95 % full;
// three ENTERPRISE workspaces that then arrive each reach their floor of
// 20 within one run length (the slowest within two, with margin for a
// loaded machine); no sample is ever over a ceiling or the pool; and no
// workspace below its floor with items waiting stays so for more than one
// run length while another holds borrowed slots. It prints the pool's use,
// the times to floor and the longest such wait.
func TestAPoolOf100IsSharedByFloorsCeilingsAndWeightsAcrossThreeDispatchers(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := postgres.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	log := harness.TestLog()
	b := &dispatchBundle{pool: pool, store: postgres.NewStore(pool, log), log: log}
	const capacity, runLength = 100, 3 * time.Second
	shares := map[domain.Plan][2]int{domain.PlanFree: {1, 10}, domain.PlanPro: {5, 30}, domain.PlanEnterprise: {20, 60}}
	for plan, fc := range shares {
		ceiling, floor := fc[1], fc[0]
		if _, err := b.store.UpdatePlan(ctx, plan, domain.PlanChange{MaxRunning: &ceiling, Floor: &floor}, nil); err != nil {
			t.Fatal(err)
		}
	}
	n := capacity
	if _, err := b.store.UpdatePool(ctx, &n, nil); err != nil {
		t.Fatal(err)
	}
	plans := map[domain.ID]domain.Plan{}
	for range 14 {
		ws, def := b.workspace(t, domain.PlanFree)
		plans[ws] = domain.PlanFree
		b.enqueueBulk(t, ws, def, 150)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	startDispatcherProcesses(t, url, 3)
	b.completeRunsAfter(ctx, &wg, runLength)

	var mu sync.Mutex
	var samples []poolSample
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if s, err := b.samplePool(ctx); err == nil {
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}
	}()
	last := func() poolSample {
		mu.Lock()
		defer mu.Unlock()
		if len(samples) == 0 {
			return poolSample{}
		}
		return samples[len(samples)-1]
	}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the FREE workspaces to fill the pool", func() bool { return last().total >= capacity*95/100 }))
	// Three run lengths of FREE workspaces alone: the pool's use.
	freeFrom := time.Now()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("three run lengths to pass", func() bool { return time.Since(freeFrom) > 3*runLength }))
	mu.Lock()
	used, count := 0, 0
	for _, s := range samples {
		if !s.at.Before(freeFrom) {
			used, count = used+s.total, count+1
		}
	}
	mu.Unlock()
	use := float64(used) / float64(count*capacity)
	t.Logf("only FREE workspaces busy (14 of ceiling 10, floor 1): the pool ran %.1f %% full on average over %d samples", 100*use, count)
	if use < 0.95 {
		t.Errorf("the pool ran %.1f %% full with only FREE workspaces busy, want at least 95 %%", 100*use)
	}

	// Three ENTERPRISE workspaces arrive, each with its backlog at once
	// (one bulk enqueue).
	arrived := map[domain.ID]time.Time{}
	var enterprise []domain.ID
	defs := map[domain.ID]domain.ID{}
	for range 3 {
		ws, def := b.workspace(t, domain.PlanEnterprise)
		plans[ws], defs[ws] = domain.PlanEnterprise, def
		enterprise = append(enterprise, ws)
	}
	for _, ws := range enterprise {
		arrived[ws] = time.Now()
		b.enqueueBulk(t, ws, defs[ws], 150)
	}
	reached := map[domain.ID]time.Duration{}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("every ENTERPRISE workspace to reach its floor", func() bool {
		s := last()
		for _, ws := range enterprise {
			if _, ok := reached[ws]; !ok && s.running[ws] >= 20 {
				reached[ws] = s.at.Sub(arrived[ws])
			}
		}
		return len(reached) == len(enterprise)
	}))
	// Two more run lengths with everyone busy.
	sharing := time.Now()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("two run lengths with everyone busy", func() bool { return time.Since(sharing) > 2*runLength }))
	cancel()
	<-sampled
	wg.Wait()

	// A run's length is from its start to its end as recorded: the 2 s
	// it is given, and however long the completer takes to end it.
	var medianSeconds float64
	if err := b.pool.QueryRow(context.Background(), `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - started_at))
		FROM workflow_executions WHERE status = 'COMPLETED'`).Scan(&medianSeconds); err != nil {
		t.Fatal(err)
	}
	median := time.Duration(medianSeconds * float64(time.Second))
	var toFloor []time.Duration
	for _, d := range reached {
		toFloor = append(toFloor, d)
	}
	slices.Sort(toFloor)
	t.Logf("ENTERPRISE (floor 20) time to floor after arriving in a full pool: %v; median run length %v", toFloor, median)
	if m := toFloor[len(toFloor)/2]; m > median {
		t.Errorf("the median ENTERPRISE workspace reached its floor in %v, want within one median run length (%v)", m, median)
	}
	if slowest := toFloor[len(toFloor)-1]; slowest > 2*median {
		t.Errorf("the slowest ENTERPRISE workspace reached its floor in %v, want within two median run lengths (%v)", slowest, 2*median)
	}

	// Borrowers share by weight: with everyone busy, floors take 14 + 60
	// of the 100, and the 26 lent go 1:4 per FREE and ENTERPRISE workspace
	// (1 and 4 borrowed each, were the dealing exact at every instant).
	borrowedBy := map[domain.Plan]float64{}
	count = 0
	for _, s := range samples {
		if s.at.Before(sharing) {
			continue
		}
		count++
		for ws, r := range s.running {
			borrowedBy[plans[ws]] += float64(max(0, r-shares[plans[ws]][0]))
		}
	}
	perFree := borrowedBy[domain.PlanFree] / float64(14*count)
	perEnterprise := borrowedBy[domain.PlanEnterprise] / float64(3*count)
	t.Logf("with everyone busy, borrowed on average per workspace: FREE (weight 1) %.1f, ENTERPRISE (weight 4) %.1f, over %d samples", perFree, perEnterprise, count)
	if perEnterprise < 2*perFree {
		t.Errorf("an ENTERPRISE workspace borrowed %.1f on average, a FREE one %.1f: want the weights' 4:1, at least 2:1", perEnterprise, perFree)
	}

	// Every sample: no ceiling, no pool broken; and how long a workspace
	// below its floor, with items waiting, stayed so while another held
	// borrowed slots.
	var violations []string
	since := map[domain.ID]time.Time{}
	var longest time.Duration
	var longestPlan domain.Plan
	for _, s := range samples {
		if s.total > capacity {
			violations = append(violations, fmt.Sprintf("%d RUNNING in a pool of %d", s.total, capacity))
		}
		borrowed := 0
		for ws, r := range s.running {
			fc := shares[plans[ws]]
			if r > fc[1] {
				violations = append(violations, fmt.Sprintf("workspace %s: %d RUNNING over its ceiling %d", ws, r, fc[1]))
			}
			borrowed += max(0, r-fc[0])
		}
		for ws := range plans {
			below := s.running[ws] < shares[plans[ws]][0] && s.pending[ws] > 0 && borrowed > 0
			start, was := since[ws]
			switch {
			case below && !was:
				since[ws] = s.at
			case below:
				if d := s.at.Sub(start); d > longest {
					longest, longestPlan = d, plans[ws]
				}
			case was:
				delete(since, ws)
			}
		}
	}
	t.Logf("%d samples every 50 ms: %d over a ceiling or the pool; the longest a workspace below its floor waited while others borrowed: %v (%s)", len(samples), len(violations), longest, longestPlan)
	if len(violations) > 0 {
		t.Fatalf("%d violations, e.g. %s", len(violations), violations[0])
	}
	if longest > median {
		t.Errorf("a workspace below its floor waited %v while others held borrowed slots, want at most one median run length (%v)", longest, median)
	}
	pgtest.RequireExactStats(t, b.pool, "after three dispatchers shared a pool")
}

// TestAPoolFloorAndCeilingEditedThroughTheAPIApplyToTheNextClaim: two
// running dispatchers admit a PRO workspace's backlog (ceiling 5). The
// admin sets a pool of 3: once its runs end, no more than 3 run; raised
// to 4, the fourth starts within a second; removed, the ceiling of 5
// applies again within a second. In a pool of 6, a second PRO workspace
// whose floor the admin raises to 3 takes the slots that free first, up
// to its floor, before the borrower; its ceiling lowered to 2 holds it at
// 2 from the next claim on.
func TestAPoolFloorAndCeilingEditedThroughTheAPIApplyToTheNextClaim(t *testing.T) {
	s := harness.NewStack(t)
	c := harness.TemporalClient(t, harness.TemporalAddress(t))
	log := harness.TestLog()
	b := &dispatchBundle{pool: s.Pool, store: postgres.NewStore(s.Pool, log), client: c, log: log,
		engine: engine.NewWorkflowClient(c, engine.NewTaskQueues("pools"+uuid.NewString()[:8]+"."), engine.DefaultRunLimits())}
	admin := s.Client(t, harness.AdminToken)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	one, def := b.workspace(t, domain.PlanPro)
	b.enqueue(t, one, def, 80)
	cfg := testConfig()
	cfg.PollInterval = 5 * time.Second // only a wake-up may make a change show within a second
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 2 {
		l := postgres.NewListener(b.pool, b.log)
		d := b.dispatcher(b.engine, cfg, l)
		wg.Add(2)
		go func() { defer wg.Done(); l.Run(ctx) }()
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	total := func() int {
		n := 0
		for _, r := range b.running(t) {
			n += r
		}
		return n
	}
	finishAll := func() {
		t.Helper()
		rows, err := b.pool.Query(ctx, "SELECT id FROM workflow_executions WHERE status = 'RUNNING'")
		if err != nil {
			t.Fatal(err)
		}
		var ids []domain.ID
		for rows.Next() {
			var id domain.ID
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			if _, err := b.store.FinishExecution(ctx, id, domain.ExecutionCompleted, nil, queue.AtEnd(domain.ExecutionCompleted, "", log)); err != nil {
				t.Fatal(err)
			}
		}
	}
	setPool := func(capacity *int) {
		t.Helper()
		r, err := admin.UpdatePoolWithResponse(ctx, client.UpdatePoolJSONRequestBody{Capacity: capacity})
		if err != nil || r.StatusCode() != http.StatusOK {
			t.Fatalf("PATCH /pool %v: %v %d %s", capacity, err, r.StatusCode(), r.Body)
		}
	}
	over := 0
	exactly := func(want int) func() bool {
		return func() bool {
			n := total()
			if n > want {
				over++
			}
			return n == want
		}
	}
	porttest.Eventually(t, 10*time.Second, porttest.Holds("the PRO ceiling of 5 to fill", exactly(5)))

	three, four := 3, 4
	setPool(&three)
	finishAll()
	took := porttest.Eventually(t, time.Second, porttest.Holds("a pool lowered to 3 to fill once the runs end", exactly(3)))
	t.Logf("a lowered pool was filled to 3, never more, %v after the runs ended", took)
	setPool(&four)
	took = porttest.Eventually(t, time.Second, porttest.Holds("the pool raised to 4 to be used", exactly(4)))
	t.Logf("a raised pool was used %v after the API answered", took)
	setPool(nil)
	took = porttest.Eventually(t, time.Second, porttest.Holds("the ceiling of 5 once the pool is removed", exactly(5)))
	t.Logf("a removed pool let the ceiling apply %v after the API answered", took)
	if over > 0 {
		t.Fatalf("%d samples over the pool or the ceiling in force", over)
	}

	// A floor raised through the API: the second workspace takes the
	// freed slots up to it before the borrower takes any.
	six := 6
	setPool(&six)
	two, def2 := b.workspace(t, domain.PlanPro)
	floor := 3
	r, err := admin.SetWorkspaceLimitsWithResponse(ctx, uuid.UUID(two), client.SetWorkspaceLimitsJSONRequestBody{Floor: &floor})
	if err != nil || r.StatusCode() != http.StatusOK || r.JSON200.Floor == nil || *r.JSON200.Floor != 3 {
		t.Fatalf("PUT limits floor 3: %v %d %s", err, r.StatusCode(), r.Body)
	}
	porttest.Eventually(t, 5*time.Second, porttest.Holds("the first workspace to borrow the pool of 6", func() bool { return b.running(t)[one] == 5 && total() == 5 }))
	b.enqueue(t, two, def2, 20)
	took = porttest.Eventually(t, time.Second, porttest.Holds("the sixth slot to go to the workspace below its floor", func() bool { return b.running(t)[two] == 1 }))
	t.Logf("the free slot went to the floor's owner %v after it enqueued", took)
	finishAll()
	porttest.Eventually(t, 5*time.Second, porttest.Holds("the freed slots to go to the floor first", func() bool { return total() == 6 }))
	if got := b.running(t)[two]; got < 3 {
		t.Fatalf("the workspace below its floor of 3 got %d of the 6 freed slots, want its floor first", got)
	}
	two2 := 2
	r, err = admin.SetWorkspaceLimitsWithResponse(ctx, uuid.UUID(two), client.SetWorkspaceLimitsJSONRequestBody{MaxRunning: &two2, Floor: &two2})
	if err != nil || r.StatusCode() != http.StatusOK {
		t.Fatalf("PUT limits ceiling 2: %v %d %s", err, r.StatusCode(), r.Body)
	}
	finishAll()
	took = porttest.Eventually(t, time.Second, porttest.Holds("the lowered ceiling and floor of 2 to hold the second workspace", func() bool {
		n := b.running(t)[two]
		if n > 2 {
			over++
		}
		return total() == 6 && n == 2
	}))
	t.Logf("a lowered ceiling held the workspace %v after the runs ended", took)
	if over > 0 {
		t.Fatalf("%d samples over a lowered pool or ceiling", over)
	}
	pgtest.RequireExactStats(t, b.pool, "after the pool, a floor and a ceiling changed under running dispatchers")
}
