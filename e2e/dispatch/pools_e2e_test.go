package dispatch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

// completeRunsAfter ends every RUNNING execution once it has run for its
// length, as a worker would, until ctx ends: a length of its own (by a
// hash of its id) spread evenly over runLength × (1 ± spread), whose
// median is runLength. Spread, slots free all through a run length as
// real runs' do; runs all of one length, started together when the pool
// first fills, would free theirs in waves a run length apart, and a
// workspace arriving just after a wave would wait a whole run length for
// the next.
func (b *dispatchBundle) completeRunsAfter(ctx context.Context, wg *sync.WaitGroup, runLength time.Duration, spread float64) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			rows, err := b.pool.Query(ctx, `SELECT id FROM workflow_executions WHERE status = 'RUNNING'
				AND started_at < now() - make_interval(secs => $1::float8 * (1 - $2::float8 + 2 * $2::float8 * ((hashtext(id::text) & 1023)::float8 / 1023)))`,
				runLength.Seconds(), spread)
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

// The pool the shared-pool tests set: its capacity, how long a run lasts
// before the test ends it (the median; each run's length is spread by
// poolRunSpread, 2 to 4 s), and each plan's floor and ceiling in it (the
// plans keep their weights: FREE 1, PRO 2, ENTERPRISE 4).
const (
	poolCapacity  = 100
	poolRunLength = 3 * time.Second
	poolRunSpread = 1.0 / 3
)

var poolShares = map[domain.Plan][2]int{domain.PlanFree: {1, 10}, domain.PlanPro: {5, 30}, domain.PlanEnterprise: {20, 60}}

// sharedPool is a pool of poolCapacity on the real stack, shared by
// poolShares: three `sluice dispatcher` processes racing (non-exclusive),
// FREE workspaces with a backlog, runs ended once they have run
// their length (median poolRunLength), and a sampler reading
// every workspace's RUNNING and PENDING counts every 50 ms.
type sharedPool struct {
	*dispatchBundle
	// plans are the plans of the workspaces the test created.
	plans   map[domain.ID]domain.Plan
	stop    func()
	mu      sync.Mutex
	samples []poolSample
}

// newSharedPool sets the pool and the plans' shares on a fresh database,
// creates free FREE workspaces with backlog items each, starts the
// dispatchers, the completer and the sampler, and waits until the FREE
// workspaces fill the pool to 95 %. Everything it starts ends with the
// test, or at stop.
func newSharedPool(t *testing.T, free, backlog int) *sharedPool {
	t.Helper()
	url := pgtest.URL(t)
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := postgres.Connect(ctx, url)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	log := harness.TestLog()
	p := &sharedPool{dispatchBundle: &dispatchBundle{pool: pool, store: postgres.NewStore(pool, log), log: log}, plans: map[domain.ID]domain.Plan{}}
	var wg sync.WaitGroup
	sampled := make(chan struct{})
	p.stop = sync.OnceFunc(func() {
		cancel()
		<-sampled
		wg.Wait()
	})
	for plan, fc := range poolShares {
		ceiling, floor := fc[1], fc[0]
		if _, err := p.store.UpdatePlan(ctx, plan, domain.PlanChange{MaxRunning: &ceiling, Floor: &floor}, nil); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	n := poolCapacity
	if _, err := p.store.UpdatePool(ctx, &n, nil); err != nil {
		cancel()
		t.Fatal(err)
	}
	for range free {
		ws, def := p.workspace(t, domain.PlanFree)
		p.plans[ws] = domain.PlanFree
		p.enqueueBulk(t, ws, def, backlog)
	}
	startDispatcherProcesses(t, url, 3)
	t.Cleanup(p.stop) // before the dispatchers stop: cleanups run last first
	p.completeRunsAfter(ctx, &wg, poolRunLength, poolRunSpread)
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
			if s, err := p.samplePool(ctx); err == nil {
				p.mu.Lock()
				p.samples = append(p.samples, s)
				p.mu.Unlock()
			}
		}
	}()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the FREE workspaces to fill the pool", func() bool { return p.last().total >= poolCapacity*95/100 }))
	return p
}

// last is the latest sample (an empty one before the first).
func (p *sharedPool) last() poolSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.samples) == 0 {
		return poolSample{}
	}
	return p.samples[len(p.samples)-1]
}

// since are the samples taken at or after from, in order.
func (p *sharedPool) since(from time.Time) []poolSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	i, _ := slices.BinarySearchFunc(p.samples, from, func(s poolSample, at time.Time) int { return s.at.Compare(at) })
	return slices.Clone(p.samples[i:])
}

// arrive creates a workspace on plan and enqueues its n items at once
// (one bulk enqueue), returning it and the moment before the enqueue.
func (p *sharedPool) arrive(t *testing.T, plan domain.Plan, n int) (domain.ID, time.Time) {
	t.Helper()
	ws, def := p.workspace(t, plan)
	p.plans[ws] = plan
	at := time.Now()
	p.enqueueBulk(t, ws, def, n)
	return ws, at
}

// finishRuns ends every RUNNING execution of ws now, as its worker would
// were its runs short.
func (p *sharedPool) finishRuns(t *testing.T, ws domain.ID) {
	t.Helper()
	ctx := context.Background()
	rows, err := p.pool.Query(ctx, "SELECT id FROM workflow_executions WHERE workspace_id = $1 AND status = 'RUNNING'", ws)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[domain.ID])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := p.store.FinishExecution(ctx, id, domain.ExecutionCompleted, nil, queue.AtEnd(domain.ExecutionCompleted, "", p.log)); err != nil {
			t.Fatal(err)
		}
	}
}

// borrowed is how many of a sample's RUNNING executions are above their
// workspace's floor.
func (p *sharedPool) borrowed(s poolSample) int {
	n := 0
	for ws, r := range s.running {
		n += max(0, r-poolShares[p.plans[ws]][0])
	}
	return n
}

// medianRunLength is the median run length, from start to end as
// recorded, of the completed runs of the workspaces on plans: the
// poolRunLength they are given, and however long the completer takes to
// end them.
func (p *sharedPool) medianRunLength(t *testing.T, plans ...domain.Plan) time.Duration {
	t.Helper()
	names := make([]string, len(plans))
	for i, plan := range plans {
		names[i] = string(plan)
	}
	var seconds float64
	if err := p.pool.QueryRow(context.Background(), `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM e.completed_at - e.started_at))
		FROM workflow_executions e JOIN workspaces w ON w.id = e.workspace_id
		WHERE e.status = 'COMPLETED' AND w.plan = ANY($1::text[])`, names).Scan(&seconds); err != nil {
		t.Fatal(err)
	}
	return time.Duration(seconds * float64(time.Second))
}

// requireSharesHeld checks every sample: none over a ceiling or the pool
// (fatal), and no workspace below its floor, with items waiting, stays so
// for longer than runLength while another holds borrowed slots. It logs
// the count of samples and the longest such wait.
func (p *sharedPool) requireSharesHeld(t *testing.T, runLength time.Duration) {
	t.Helper()
	p.mu.Lock()
	samples := slices.Clone(p.samples)
	p.mu.Unlock()
	var violations []string
	since := map[domain.ID]time.Time{}
	var longest time.Duration
	var longestPlan domain.Plan
	for _, s := range samples {
		if s.total > poolCapacity {
			violations = append(violations, fmt.Sprintf("%d RUNNING in a pool of %d", s.total, poolCapacity))
		}
		for ws, r := range s.running {
			if ceiling := poolShares[p.plans[ws]][1]; r > ceiling {
				violations = append(violations, fmt.Sprintf("workspace %s: %d RUNNING over its ceiling %d", ws, r, ceiling))
			}
		}
		borrowed := p.borrowed(s)
		for ws, plan := range p.plans {
			below := s.running[ws] < poolShares[plan][0] && s.pending[ws] > 0 && borrowed > 0
			start, was := since[ws]
			switch {
			case below && !was:
				since[ws] = s.at
			case below:
				if d := s.at.Sub(start); d > longest {
					longest, longestPlan = d, plan
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
	if longest > runLength {
		t.Errorf("a workspace below its floor waited %v while others held borrowed slots, want at most one median run length (%v)", longest, runLength)
	}
}

// TestAPoolOf100IsSharedByFloorsCeilingsAndWeightsAcrossThreeDispatchers:
// a pool of 100, FREE floor 1 ceiling 10, PRO 5/30, ENTERPRISE 20/60;
// runs last 2 to 4 s (median 3 s); three dispatcher processes race (non-exclusive) and a sampler
// reads every workspace's RUNNING count every 50 ms. With only 14 FREE
// workspaces busy (140 of ceilings) the pool runs at least 95 % full;
// three ENTERPRISE workspaces that then arrive each reach their floor of
// 20 within one run length (the slowest within two, with margin for a
// loaded machine); no sample is ever over a ceiling or the pool; and no
// workspace below its floor with items waiting stays so for more than one
// run length while another holds borrowed slots. It prints the pool's use,
// the times to floor and the longest such wait.
func TestAPoolOf100IsSharedByFloorsCeilingsAndWeightsAcrossThreeDispatchers(t *testing.T) {
	p := newSharedPool(t, 14, 150)
	// Three run lengths of FREE workspaces alone: the pool's use.
	freeFrom := time.Now()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("three run lengths to pass", func() bool { return time.Since(freeFrom) > 3*poolRunLength }))
	used, count := 0, 0
	for _, s := range p.since(freeFrom) {
		used, count = used+s.total, count+1
	}
	use := float64(used) / float64(count*poolCapacity)
	t.Logf("only FREE workspaces busy (14 of ceiling 10, floor 1): the pool ran %.1f %% full on average over %d samples", 100*use, count)
	if use < 0.95 {
		t.Errorf("the pool ran %.1f %% full with only FREE workspaces busy, want at least 95 %%", 100*use)
	}

	// Three ENTERPRISE workspaces arrive, each with its backlog at once
	// (one bulk enqueue).
	arrived := map[domain.ID]time.Time{}
	var enterprise []domain.ID
	for range 3 {
		ws, at := p.arrive(t, domain.PlanEnterprise, 150)
		arrived[ws] = at
		enterprise = append(enterprise, ws)
	}
	reached := map[domain.ID]time.Duration{}
	porttest.Eventually(t, 30*time.Second, porttest.Holds("every ENTERPRISE workspace to reach its floor", func() bool {
		s := p.last()
		for _, ws := range enterprise {
			if _, ok := reached[ws]; !ok && s.running[ws] >= 20 {
				reached[ws] = s.at.Sub(arrived[ws])
			}
		}
		return len(reached) == len(enterprise)
	}))
	// Two more run lengths with everyone busy.
	sharing := time.Now()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("two run lengths with everyone busy", func() bool { return time.Since(sharing) > 2*poolRunLength }))
	p.stop()

	median := p.medianRunLength(t, domain.PlanFree, domain.PlanEnterprise)
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
	during := p.since(sharing)
	for _, s := range during {
		for ws, r := range s.running {
			borrowedBy[p.plans[ws]] += float64(max(0, r-poolShares[p.plans[ws]][0]))
		}
	}
	perFree := borrowedBy[domain.PlanFree] / float64(14*len(during))
	perEnterprise := borrowedBy[domain.PlanEnterprise] / float64(3*len(during))
	t.Logf("with everyone busy, borrowed on average per workspace: FREE (weight 1) %.1f, ENTERPRISE (weight 4) %.1f, over %d samples", perFree, perEnterprise, len(during))
	if perEnterprise < 2*perFree {
		t.Errorf("an ENTERPRISE workspace borrowed %.1f on average, a FREE one %.1f: want the weights' 4:1, at least 2:1", perEnterprise, perFree)
	}

	// Every sample: no ceiling, no pool broken; and how long a workspace
	// below its floor, with items waiting, stayed so while another held
	// borrowed slots.
	p.requireSharesHeld(t, median)
	pgtest.RequireExactStats(t, p.pool, "after three dispatchers shared a pool")
}

// TestTwentyEnterpriseArrivalsInABorrowedPoolEachReachTheirFloorWithinOneRunLength
// measures "an ENTERPRISE workspace that arrives reaches its floor within
// one median run length, the p99 within two" over enough arrivals for a
// p99. The pool of 100 above is borrowed by 40 busy FREE workspaces
// (floors 40, so 55 or more borrowed once the pool is 95 % full): a lone
// ENTERPRISE workspace's share of the pool by weight, 4 of 44, is 9
// slots, under its floor of 20, so only its floor brings it there (with
// the 14 FREE workspaces of the test above its share by weight, 22, would).
// Once the pool's first runs, started together, have all ended (slots
// then free all through a run length), twenty ENTERPRISE workspaces
// arrive one after another, each with 20 items (its floor) at once, at a
// random moment within a third of a run length after the pool is 95 %
// full again with only FREE workspaces running. Once one has reached its floor the test ends its runs, as its
// worker would were they short (its time to floor is over by then, and a
// quiet workspace holding its slots for a run length would cost the test
// a minute), and the FREE workspaces borrow the pool again. Over the 20,
// the median time to floor must be within one median run length (of the
// FREE runs, which the completer ends) and the p99 (with 20, the
// largest) within two; no sample is over a ceiling or the pool, and no
// workspace below its floor with items waiting stays so for more than
// one run length while another holds borrowed slots. It prints each
// arrival's time to floor, their median and largest, and the run length.
func TestTwentyEnterpriseArrivalsInABorrowedPoolEachReachTheirFloorWithinOneRunLength(t *testing.T) {
	const free, arrivals = 40, 20
	p := newSharedPool(t, free, 100)
	// The pool's first runs, started together, have all ended: from here
	// slots free all through a run length.
	settled := time.Now()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the pool's first runs to end", func() bool {
		return time.Since(settled) > time.Duration(float64(poolRunLength)*(1+poolRunSpread))
	}))
	floor := poolShares[domain.PlanEnterprise][0]
	var enterprise []domain.ID
	var toFloor []time.Duration
	leastBorrowed := poolCapacity
	for i := range arrivals {
		porttest.Eventually(t, 30*time.Second, porttest.Holds("the pool 95 % full with only FREE workspaces running", func() bool {
			s := p.last()
			for _, ws := range enterprise {
				if s.running[ws] > 0 {
					return false
				}
			}
			return s.total >= poolCapacity*95/100
		}))
		ready, pause := time.Now(), rand.N(poolRunLength/3)
		porttest.Eventually(t, poolRunLength, porttest.Holds("the arrival's random moment", func() bool { return time.Since(ready) >= pause }))
		leastBorrowed = min(leastBorrowed, p.borrowed(p.last()))
		ws, at := p.arrive(t, domain.PlanEnterprise, floor)
		enterprise = append(enterprise, ws)
		porttest.Eventually(t, 4*poolRunLength, func() error {
			for _, s := range p.since(at) {
				// Or every item started: had a run ended before the
				// last started (a time to floor past a run length), 20
				// could never run at once.
				if s.running[ws] >= floor || (s.running[ws] > 0 && s.pending[ws] == 0) {
					toFloor = append(toFloor, s.at.Sub(at))
					return nil
				}
			}
			return fmt.Errorf("arrival %d of %d to reach its floor of %d: it holds %d after %v (times to floor so far: %v)",
				i+1, arrivals, floor, p.last().running[ws], time.Since(at).Round(time.Millisecond), toFloor)
		})
		p.finishRuns(t, ws)
	}
	p.stop()

	median := p.medianRunLength(t, domain.PlanFree)
	t.Logf("%d ENTERPRISE arrivals (floor 20, 20 items each) in a full pool where FREE workspaces held at least %d borrowed slots; time to floor, in order: %v",
		arrivals, leastBorrowed, toFloor)
	sorted := slices.Sorted(slices.Values(toFloor))
	p50, p99 := sorted[(len(sorted)+1)/2-1], sorted[len(sorted)-1] // nearest rank: with 20, the 10th and the 20th
	t.Logf("time to floor: median %v, p99 (the largest) %v; median run length %v (%.2f and %.2f of it)",
		p50, p99, median, p50.Seconds()/median.Seconds(), p99.Seconds()/median.Seconds())
	if p50 > median {
		t.Errorf("the median ENTERPRISE arrival reached its floor in %v, want within one median run length (%v)", p50, median)
	}
	if p99 > 2*median {
		t.Errorf("the p99 ENTERPRISE arrival reached its floor in %v, want within two median run lengths (%v)", p99, 2*median)
	}
	p.requireSharesHeld(t, median)
	pgtest.RequireExactStats(t, p.pool, "after twenty ENTERPRISE workspaces arrived in a borrowed pool")
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
