package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports/porttest"
)

var (
	// benchItems is how many items the throughput benchmark drains.
	benchItems = benchSize(20_000, 200)
	// benchWorkspaceCount is how many ENTERPRISE workspaces hold the
	// measured items: with the default limit of 20 that is 1,000 free
	// slots, more than any batch size measured, so limits never throttle.
	benchWorkspaceCount = benchSize(50, 10)
	// benchHistory is how many COMPLETED executions every database starts
	// with, as a service that has been running has.
	benchHistory = benchSize(20_000, 200)
)

// benchSeedMeasured creates the measured workspaces with their history and
// n PENDING items at priority 2.
func benchSeedMeasured(b *testing.B, db *benchDB, n int) (ws, defs []domain.ID) {
	b.Helper()
	ws, defs = db.workspaces(b, domain.PlanEnterprise, benchWorkspaceCount)
	db.history(b, ws, defs, benchHistory)
	db.items(b, ws, defs, n, 2, 2*time.Hour)
	return ws, defs
}

// BenchmarkDispatchThroughput compares Sluice's dispatch throughput with a
// plain-SQL ceiling. For each batch size, the contenders drain the same
// 20,000 items (50 ENTERPRISE workspaces × 400, default tier limits) on
// identical fresh databases, interleaved in ten rounds of 2,000 items.
//
//   - ceiling: one autocommit UPDATE ... WHERE id IN (SELECT ... FOR UPDATE
//     SKIP LOCKED LIMIT batch) per batch (benchCeilingSQL).
//   - sluice: Dispatcher.DispatchBatch in a loop on the real store and lease
//     with the fake engine. Between batches, off the clock, the dispatched
//     executions are completed, as workflows that finish at once would be;
//     otherwise every workspace's RUNNING set grows with each item and
//     admission reads it whole every batch, which no workspace with a limit
//     of 20 does.
//   - sluice, RUNNING kept (batch 100 only): no completions; ENTERPRISE's
//     limit is raised to 400 so nothing throttles, and RUNNING executions
//     pile up to 20,000.
//
// Each batch size is its own sub-benchmark (fixed batches: BatchSize =
// MaxBatchSize). The last, "default", runs the default configuration, whose
// batch starts at 10 and doubles while batches come back full up to 200;
// its ceiling runs at batch 200, the most it claims at once.
func BenchmarkDispatchThroughput(b *testing.B) {
	benchRequireDB(b)
	defaults := dispatch.DefaultDispatcherConfig()
	rows := []struct {
		name        string
		cfg         dispatch.DispatcherConfig
		ceilBatch   int
		kept        bool
		description string
	}{
		{"batch=10", fixedBatch(10), 10, false, "batch  10"},
		{"batch=100", fixedBatch(100), 100, true, "batch 100"},
		{"batch=500", fixedBatch(500), 500, false, "batch 500"},
		{"default", defaults, defaults.MaxBatchSize, false,
			fmt.Sprintf("default (batch %d doubling to %d; ceiling at %d)", defaults.BatchSize, defaults.MaxBatchSize, defaults.MaxBatchSize)},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) { benchThroughputRow(b, row.cfg, row.ceilBatch, row.kept, row.description) })
	}
}

// fixedBatch is the default configuration with a batch that does not adapt.
func fixedBatch(n int) dispatch.DispatcherConfig {
	cfg := dispatch.DefaultDispatcherConfig()
	cfg.BatchSize, cfg.MaxBatchSize = n, n
	return cfg
}

func benchThroughputRow(b *testing.B, cfg dispatch.DispatcherConfig, ceilBatch int, hasKept bool, description string) {
	const rounds = 10
	var ceiling, slc, keptM benchMeter
	slcPhases, keptPhases := &benchPhases{}, &benchPhases{}
	var slcStmts, keptStmts string

	ceilDB := benchOpenDB(b)
	benchSeedMeasured(b, ceilDB, benchItems)
	ceilDB.vacuumAnalyze(b)

	slcDB := benchOpenDB(b)
	slcWS, _ := benchSeedMeasured(b, slcDB, benchItems)
	slcDB.vacuumAnalyze(b)
	sd, slcEngine := slcDB.dispatcher(b, cfg, nil, slcPhases)

	steps := []func(){
		func() { ceiling.add(ceilDB.ceiling(b, ceilBatch, benchItems/rounds)) },
		func() { slc.add(benchDrain(b, slcDB, sd, benchItems/rounds, slcWS)) },
	}
	var keptDB *benchDB
	if hasKept {
		keptDB = benchOpenDB(b)
		benchSeedMeasured(b, keptDB, benchItems)
		keptDB.vacuumAnalyze(b)
		if _, err := keptDB.pool.Exec(context.Background(), "UPDATE plans SET max_running = $1 WHERE name = 'ENTERPRISE'", benchItems/benchWorkspaceCount); err != nil {
			b.Fatal(err)
		}
		kd, _ := keptDB.dispatcher(b, cfg, nil, keptPhases)
		steps = append(steps, func() { keptM.add(benchDrain(b, keptDB, kd, benchItems/rounds, nil)) })
	}
	benchInterleave(rounds, steps)

	if ceiling.items != benchItems || slc.items != benchItems {
		b.Fatalf("%s: ceiling marked %d and sluice dispatched %d items, want %d each", description, ceiling.items, slc.items, benchItems)
	}
	if got := slcDB.countStatus(b, "DISPATCHED"); got != benchItems || slcEngine.starts.Load() != int64(benchItems) {
		b.Fatalf("sluice: %d DISPATCHED and %d starts, want %d of each", got, slcEngine.starts.Load(), benchItems)
	}
	slcStmts = slcDB.tracer.report(slcPhases.batches.Load())
	ceilDB.close()
	slcDB.close()
	if keptDB != nil {
		keptStmts = keptDB.tracer.report(keptPhases.batches.Load())
		keptDB.close()
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== dispatch throughput, %s: %d items in %d ENTERPRISE workspaces, fake Temporal, interleaved in %d rounds ==\n",
		description, benchItems, benchWorkspaceCount, rounds)
	ratio := 100 * slc.rate() / ceiling.rate()
	benchMetric(b, ceiling.rate(), "ceiling_items/s")
	benchMetric(b, slc.rate(), "sluice_items/s")
	benchMetric(b, ratio, "sluice/ceiling_%")
	fmt.Fprintf(&sb, "%s: ceiling %7.0f items/s (%v)  sluice %7.0f items/s (%v)  sluice/ceiling %5.1f %%  [target >= 50 %%: %s]\n",
		description, ceiling.rate(), ceiling.took.Round(time.Millisecond), slc.rate(), slc.took.Round(time.Millisecond), ratio, benchVerdict(ratio >= 50))
	fmt.Fprintf(&sb, "    sluice %s\n    sluice %s\n", slcPhases, slcStmts)
	ceilWAL, slcWAL := float64(ceilDB.walBytes)/float64(ceiling.items), float64(slcDB.walBytes)/float64(slc.items)
	benchMetric(b, slcWAL, "sluice_wal_B/item")
	fmt.Fprintf(&sb, "    WAL per item: ceiling %.0f B, sluice %.0f B (%.1f times the ceiling's; every row write is a WAL record, every index entry another)\n",
		ceilWAL, slcWAL, slcWAL/ceilWAL)
	if hasKept {
		kr := 100 * keptM.rate() / ceiling.rate()
		benchMetric(b, keptM.rate(), "sluice_running_kept_items/s")
		fmt.Fprintf(&sb, "%s, RUNNING kept (ENTERPRISE limit %d): sluice %7.0f items/s (%v)  %5.1f %% of ceiling\n",
			description, benchItems/benchWorkspaceCount, keptM.rate(), keptM.took.Round(time.Millisecond), kr)
		fmt.Fprintf(&sb, "    sluice %s\n    sluice %s\n", keptPhases, keptStmts)
	}
	benchPrint(sb.String())
}

// BenchmarkEnqueueToDispatchLatency enqueues at a steady 100 items/s for
// 15 s through the API's use case (Service.Enqueue) while the
// dispatcher's Run loop runs with its default configuration (batches of 10,
// a 5 s poll, the queue lease) and LISTEN/NOTIFY wake-ups from
// postgres.Listener. Latency runs from the start of the enqueue call to
// dispatched_at, the database time at which the dispatcher marked the item
// DISPATCHED (same host, same clock). The items are spread over 100
// ENTERPRISE workspaces, 15 each, so the default limits never throttle.
func BenchmarkEnqueueToDispatchLatency(b *testing.B) {
	benchRequireDB(b)
	const rate = 100
	var (
		duration = benchSize(15*time.Second, time.Second)
		nWS      = benchSize(100, 10)
	)
	total := int(rate * duration / time.Second)
	db := benchOpenDB(b)
	ws, defs := db.workspaces(b, domain.PlanEnterprise, nWS)
	db.history(b, ws, defs, benchHistory)
	db.vacuumAnalyze(b)
	log := benchLogger()
	st := postgres.NewStore(db.aux, log)
	svc := usecases.NewExecutions(st, st, st, st, nil, domain.DefaultProcessQuotas())

	ctx, cancel := context.WithCancel(context.Background())
	listener := postgres.NewListener(db.pool, log)
	phases := &benchPhases{}
	cfg := dispatch.DefaultDispatcherConfig()
	d, engine := db.dispatcher(b, cfg, listener, phases)
	var loops sync.WaitGroup
	loops.Add(2)
	go func() { defer loops.Done(); listener.Run(ctx) }()
	go func() { defer loops.Done(); d.Run(ctx) }()
	defer func() { cancel(); loops.Wait() }()

	// Wait until the listener's LISTEN is in place, then push a few items
	// through so that every connection is warm.
	porttest.Eventually(b, 10*time.Second, porttest.Holds("the listener to LISTEN", func() bool {
		var n int
		err := db.aux.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'LISTEN%'`).Scan(&n)
		return err == nil && n > 0
	}))
	enqueue := func(i int) (domain.ID, error) {
		w := i % nWS
		rec, _, err := svc.Enqueue(context.Background(), domain.Actor{WorkspaceID: ws[w], KeyID: domain.ID(uuid.New())}, usecases.EnqueueRequest{
			WorkspaceID: ws[w], DefinitionID: defs[w], Input: json.RawMessage(`{"n":1}`),
		})
		return rec.ID, err
	}
	const warmup = 10
	for i := range warmup {
		if _, err := enqueue(i); err != nil {
			b.Fatal(err)
		}
	}
	porttest.Eventually(b, 10*time.Second, porttest.Holds("the warm-up items to dispatch", func() bool { return db.countStatus(b, "DISPATCHED") == warmup }))
	phases.reset()
	db.tracer.reset()
	warmStarts := engine.starts.Load()

	type sent struct {
		id       domain.ID
		start    time.Time
		enqueued time.Duration
		err      error
	}
	out := make([]sent, total)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range total {
		if wait := time.Until(begin.Add(time.Duration(i) * time.Second / rate)); wait > 0 {
			time.Sleep(wait) // pacing the open-loop load, not synchronisation
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			id, err := enqueue(warmup + i)
			out[i] = sent{id: id, start: start, enqueued: time.Since(start), err: err}
		}()
	}
	wg.Wait()
	sending := time.Since(begin)
	ids := make([]domain.ID, total)
	for i, s := range out {
		if s.err != nil {
			b.Fatalf("enqueue %d: %v", i, s.err)
		}
		ids[i] = s.id
	}
	porttest.Eventually(b, 30*time.Second, porttest.Holds("every item to dispatch", func() bool {
		var n int
		err := db.aux.QueryRow(context.Background(),
			`SELECT count(*) FROM workflow_execution_queue WHERE id = ANY($1) AND status = 'DISPATCHED'`, ids).Scan(&n)
		return err == nil && n == total
	}))
	cancel()
	loops.Wait()

	dispatchedAt := map[domain.ID]time.Time{}
	createdAt := map[domain.ID]time.Time{}
	rows, err := db.aux.Query(context.Background(),
		`SELECT id, created_at, dispatched_at FROM workflow_execution_queue WHERE id = ANY($1)`, ids)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var id domain.ID
		var c, d time.Time
		if err := rows.Scan(&id, &c, &d); err != nil {
			b.Fatal(err)
		}
		createdAt[id], dispatchedAt[id] = c, d
	}
	rows.Close()
	lat := make([]time.Duration, 0, total)
	dbLat := make([]time.Duration, 0, total)
	enq := make([]time.Duration, 0, total)
	for _, s := range out {
		lat = append(lat, dispatchedAt[s.id].Sub(s.start))
		dbLat = append(dbLat, dispatchedAt[s.id].Sub(createdAt[s.id]))
		enq = append(enq, s.enqueued)
	}
	benchSortDurations(lat)
	benchSortDurations(dbLat)
	benchSortDurations(enq)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	p50, p90, p99, pmax := benchPercentile(lat, 50), benchPercentile(lat, 90), benchPercentile(lat, 99), lat[len(lat)-1]
	benchMetric(b, ms(p50), "p50_ms")
	benchMetric(b, ms(p99), "p99_ms")
	benchMetric(b, ms(pmax), "max_ms")
	benchMetric(b, float64(total)/sending.Seconds(), "enqueues/s")

	var sb strings.Builder
	items := engine.starts.Load() - warmStarts
	fmt.Fprintf(&sb, "\n== enqueue→dispatch latency: %d enqueues over %v (%.1f/s) into %d ENTERPRISE workspaces; Run loop with default config (batch %d, poll %v), LISTEN/NOTIFY wake-ups ==\n",
		total, sending.Round(time.Millisecond), float64(total)/sending.Seconds(), nWS, cfg.BatchSize, cfg.PollInterval)
	fmt.Fprintf(&sb, "enqueue call start → DISPATCHED: p50 %.1f ms [target <= 50: %s]  p90 %.1f ms  p99 %.1f ms [target <= 250: %s]  max %.1f ms\n",
		ms(p50), benchVerdict(p50 <= 50*time.Millisecond), ms(p90), ms(p99), benchVerdict(p99 <= 250*time.Millisecond), ms(pmax))
	fmt.Fprintf(&sb, "created_at → dispatched_at (database clock): p50 %.1f ms  p99 %.1f ms\n", ms(benchPercentile(dbLat, 50)), ms(benchPercentile(dbLat, 99)))
	fmt.Fprintf(&sb, "enqueue call itself: p50 %.1f ms  p99 %.1f ms\n", ms(benchPercentile(enq, 50)), ms(benchPercentile(enq, 99)))
	fmt.Fprintf(&sb, "%d claim transactions for %d items (%.2f items each)\n    %s\n    %s (maintenance included)\n",
		phases.batches.Load(), items, float64(items)/float64(max(1, phases.batches.Load())), phases, db.tracer.report(phases.batches.Load()))
	benchPrint(sb.String())
}

// BenchmarkDispatchUnderBacklog measures how much dispatch rate survives a
// deep backlog. Every scenario drains the same measured items, 10,000 in 50
// ENTERPRISE workspaces, first 5,000 in batches of 100, then 5,000 in
// batches of 10 (the default), with the dispatched executions completed
// between batches off the clock. The scenarios' databases exist side by
// side and are drained interleaved in rounds, and they differ only in what
// else is queued:
//
//   - empty: nothing;
//   - 1M behind: 1,000,000 more PENDING items at priority 4 in the same
//     workspaces, so they wait behind the measured ones;
//   - 1000 at capacity: 1,000 FREE workspaces, each with one RUNNING
//     execution and 10 older PENDING items (10,000);
//   - 1M at capacity: 1,000 FREE workspaces at capacity holding 1,000,000
//     older PENDING items between them.
//
// Every database is VACUUM ANALYZEd after seeding, as autovacuum would have
// done to a backlog that built up over time. With SLUICE_BENCH_EXPLAIN=1 the
// benchmark also prints EXPLAIN (ANALYZE, BUFFERS) of the claim path's
// queries, read from db/queries, before and after the drain.
func BenchmarkDispatchUnderBacklog(b *testing.B) {
	benchRequireDB(b)
	var (
		measured   = benchSize(15_000, 1_500)
		atCapacity = benchSize(1_000, 50)
		million    = benchSize(1_000_000, 10_000)
	)
	// batch 0 is the default configuration, whose batch adapts.
	phaseBatches := []struct{ batch, items, rounds int }{{100, measured / 3, 5}, {10, measured / 3, 10}, {0, measured - 2*(measured/3), 5}}
	type scenario struct {
		name  string
		key   string
		setup func(db *benchDB, ws, defs []domain.ID)
	}
	scenarios := []scenario{
		{"empty backlog", "empty", func(*benchDB, []domain.ID, []domain.ID) {}},
		{fmt.Sprintf("%d pending behind, same workspaces, priority 4", million), "1M_behind", func(db *benchDB, ws, defs []domain.ID) {
			db.items(b, ws, defs, million, 4, time.Hour)
		}},
		{fmt.Sprintf("%d FREE workspaces at capacity, 10 pending each", atCapacity), "1000_at_capacity", func(db *benchDB, _, _ []domain.ID) {
			fws, fdefs := db.workspaces(b, domain.PlanFree, atCapacity)
			db.occupy(b, fws, fdefs)
			db.items(b, fws, fdefs, 10*atCapacity, 2, 3*time.Hour)
		}},
		{fmt.Sprintf("%d pending in %d FREE workspaces at capacity", million, atCapacity), "1M_at_capacity", func(db *benchDB, _, _ []domain.ID) {
			fws, fdefs := db.workspaces(b, domain.PlanFree, atCapacity)
			db.occupy(b, fws, fdefs)
			db.items(b, fws, fdefs, million, 2, 3*time.Hour)
		}},
	}
	explain := os.Getenv("SLUICE_BENCH_EXPLAIN") != ""
	type state struct {
		db     *benchDB
		ws     []domain.ID
		setup  time.Duration
		meters []benchMeter
		phases []*benchPhases
		stmts  []string
	}
	states := make([]*state, len(scenarios))
	benchStart := time.Now()
	quotas := func(ws []domain.ID) map[domain.ID]int {
		q := map[domain.ID]int{}
		for _, w := range ws {
			q[w] = 100 / benchWorkspaceCount
		}
		return q
	}
	for si, sc := range scenarios {
		st := &state{db: benchOpenDB(b), meters: make([]benchMeter, len(phaseBatches))}
		setupStart := time.Now()
		var defs []domain.ID
		st.ws, defs = benchSeedMeasured(b, st.db, measured)
		sc.setup(st.db, st.ws, defs)
		st.db.vacuumAnalyze(b)
		st.setup = time.Since(setupStart)
		if explain {
			st.db.explainClaimPath(b, sc.name+", before the drain", quotas(st.ws))
		}
		states[si] = st
	}
	setupTotal := time.Since(benchStart)

	for pi, pb := range phaseBatches {
		var steps []func()
		for _, st := range states {
			cfg := dispatch.DefaultDispatcherConfig()
			if pb.batch > 0 {
				cfg = fixedBatch(pb.batch)
			}
			ph := &benchPhases{}
			st.phases = append(st.phases, ph)
			d, _ := st.db.dispatcher(b, cfg, nil, ph)
			st.db.tracer.reset()
			steps = append(steps, func() { st.meters[pi].add(benchDrain(b, st.db, d, pb.items/pb.rounds, st.ws)) })
		}
		benchInterleave(pb.rounds, steps)
		for _, st := range states {
			st.stmts = append(st.stmts, st.db.tracer.report(st.phases[pi].batches.Load()))
		}
	}
	for si, st := range states {
		// The adaptive batch of the last phase may run past the measured
		// items into a backlog queued behind them in the same workspaces.
		if got := st.db.countStatus(b, "DISPATCHED"); got < measured {
			b.Fatalf("%s: %d items DISPATCHED, want at least the %d measured ones", scenarios[si].name, got, measured)
		}
		if explain {
			st.db.explainClaimPath(b, scenarios[si].name+", after the drain", quotas(st.ws))
		}
		st.db.close()
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== dispatch rate under backlog: %d measured items in %d ENTERPRISE workspaces, fake Temporal; setup %v, total %v ==\n",
		measured, benchWorkspaceCount, setupTotal.Round(100*time.Millisecond), time.Since(benchStart).Round(time.Second))
	for si, sc := range scenarios {
		st := states[si]
		fmt.Fprintf(&sb, "%s (setup %v):\n", sc.name, st.setup.Round(100*time.Millisecond))
		for pi, pb := range phaseBatches {
			rate := st.meters[pi].rate()
			label, key := fmt.Sprintf("batch %3d", pb.batch), fmt.Sprintf("b%d", pb.batch)
			if pb.batch == 0 {
				label, key = "default  ", "default"
			}
			benchMetric(b, rate, fmt.Sprintf("%s_%s_items/s", sc.key, key))
			if si == 0 {
				fmt.Fprintf(&sb, "  %s: %7.0f items/s\n", label, rate)
			} else {
				kept := 100 * rate / states[0].meters[pi].rate()
				benchMetric(b, kept, fmt.Sprintf("%s_%s_kept_%%", sc.key, key))
				fmt.Fprintf(&sb, "  %s: %7.0f items/s  %5.1f %% of the empty-backlog rate  [target >= 80 %%: %s]\n",
					label, rate, kept, benchVerdict(kept >= 80))
			}
			fmt.Fprintf(&sb, "      %s\n      %s\n", st.phases[pi], st.stmts[pi])
		}
	}
	benchPrint(sb.String())
}

// BenchmarkEnqueueContention measures what enqueue costs when many callers
// write into one workspace at once. 16 callers each enqueue through the
// API's use case (Service.Enqueue) as fast as they can, 4,000 items
// a round, either all into one workspace ("hot") or each into a workspace
// of its own ("spread"); the two alternate for three rounds each. Every
// enqueue updates its workspace's row of workspace_queue_stats under a row
// lock held until commit, so enqueues into one workspace serialise on that
// row; the hot/spread ratio shows what that costs.
func BenchmarkEnqueueContention(b *testing.B) {
	benchRequireDB(b)
	const (
		callers = 16
		rounds  = 3
	)
	perRound := benchSize(4_000, 160)
	db := benchOpenDB(b)
	ws, defs := db.workspaces(b, domain.PlanEnterprise, callers)
	db.vacuumAnalyze(b)
	st := postgres.NewStore(db.aux, benchLogger())
	svc := usecases.NewExecutions(st, st, st, st, nil, domain.DefaultProcessQuotas())
	type meter struct {
		benchMeter
		lat []time.Duration
	}
	run := func(m *meter, spread bool) {
		lat := make([]time.Duration, perRound)
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := 0
				if spread {
					w = c
				}
				for {
					i := int(next.Add(1)) - 1
					if i >= perRound {
						return
					}
					t0 := time.Now()
					_, _, err := svc.Enqueue(context.Background(), domain.Actor{WorkspaceID: ws[w], KeyID: domain.ID(uuid.New())}, usecases.EnqueueRequest{
						WorkspaceID: ws[w], DefinitionID: defs[w], Input: json.RawMessage(`{"n":1}`),
					})
					if err != nil {
						b.Errorf("enqueue: %v", err)
						return
					}
					lat[i] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		m.add(perRound, time.Since(start))
		m.lat = append(m.lat, lat...)
	}
	var hot, spread meter
	benchInterleave(rounds, []func(){func() { run(&hot, false) }, func() { run(&spread, true) }})
	if b.Failed() {
		return
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== enqueue contention: %d callers, %d enqueues a round, %d rounds each, through Service.Enqueue ==\n", callers, perRound, rounds)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for _, r := range []struct {
		name string
		m    *meter
	}{{"hot (one workspace)", &hot}, {"spread (16 workspaces)", &spread}} {
		benchSortDurations(r.m.lat)
		key := strings.Fields(r.name)[0]
		benchMetric(b, r.m.rate(), key+"_enqueues/s")
		benchMetric(b, ms(benchPercentile(r.m.lat, 99)), key+"_p99_ms")
		fmt.Fprintf(&sb, "%-24s %7.0f enqueues/s  p50 %.1f ms  p99 %.1f ms\n", r.name+":", r.m.rate(),
			ms(benchPercentile(r.m.lat, 50)), ms(benchPercentile(r.m.lat, 99)))
	}
	fmt.Fprintf(&sb, "hot/spread: %.1f %%\n", 100*hot.rate()/spread.rate())
	benchPrint(sb.String())
}

// BenchmarkBulkEnqueue compares a bulk enqueue's cost per item with a
// single enqueue's, both into one workspace through the API's use cases:
// one caller enqueues 1,000 items one request at a time
// (Executions.Enqueue), then 10 batches of 1,000 (Executions.EnqueueBatch,
// one statement each); three rounds, alternating which goes first. The
// target is a bulk rate of at least ten times the single one.
func BenchmarkBulkEnqueue(b *testing.B) {
	benchRequireDB(b)
	const (
		batchSize = 1_000
		rounds    = 3
	)
	singles, batches := benchSize(1_000, 50), benchSize(10, 1)
	db := benchOpenDB(b)
	ws, defs := db.workspaces(b, domain.PlanEnterprise, 1)
	db.vacuumAnalyze(b)
	st := postgres.NewStore(db.aux, benchLogger())
	svc := usecases.NewExecutions(st, st, st, st, nil, domain.DefaultProcessQuotas())
	actor := domain.Actor{WorkspaceID: ws[0], KeyID: domain.ID(uuid.New())}
	ctx := context.Background()
	var single, bulk benchMeter
	runSingle := func() {
		start := time.Now()
		for range singles {
			if _, _, err := svc.Enqueue(ctx, actor, usecases.EnqueueRequest{WorkspaceID: ws[0], DefinitionID: defs[0], Input: json.RawMessage(`{"n":1}`)}); err != nil {
				b.Fatalf("enqueue: %v", err)
			}
		}
		single.add(singles, time.Since(start))
	}
	items := make([]usecases.EnqueueBatchItem, batchSize)
	for i := range items {
		items[i] = usecases.EnqueueBatchItem{Input: json.RawMessage(`{"n":1}`)}
	}
	runBulk := func() {
		start := time.Now()
		for range batches {
			if _, err := svc.EnqueueBatch(ctx, actor, usecases.EnqueueBatchRequest{WorkspaceID: ws[0], DefinitionID: defs[0], Items: items}); err != nil {
				b.Fatalf("bulk enqueue: %v", err)
			}
		}
		bulk.add(batches*batchSize, time.Since(start))
	}
	benchInterleave(rounds, []func(){runSingle, runBulk})
	benchMetric(b, single.rate(), "single_items/s")
	benchMetric(b, bulk.rate(), "bulk_items/s")
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== bulk vs single enqueue into one workspace: %d singles and %d batches of %d a round, %d rounds ==\n",
		singles, batches, batchSize, rounds)
	fmt.Fprintf(&sb, "%-28s %8.0f items/s\n", "single (Executions.Enqueue):", single.rate())
	fmt.Fprintf(&sb, "%-28s %8.0f items/s\n", "bulk (EnqueueBatch, 1,000):", bulk.rate())
	fmt.Fprintf(&sb, "bulk/single per item: %.1fx [target >= 10x: %s]\n", bulk.rate()/single.rate(), benchVerdict(bulk.rate() >= 10*single.rate()))
	benchPrint(sb.String())
}
