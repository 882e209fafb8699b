package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// This file holds the benchmarks' fixtures: a fake workflow engine, a
// timing wrapper around the dispatch store, bulk seeding in plain SQL and
// EXPLAIN ANALYZE of the claim path. Every name starts with bench so that it
// cannot clash with other test files of package app_test.

// benchRequireDB skips the benchmark when no Postgres is configured. It is
// checked before pgtest, so a plain `go test -bench=.` skips cleanly even
// where SLUICE_REQUIRE_INTEGRATION is set.
func benchRequireDB(b *testing.B) {
	b.Helper()
	if os.Getenv("DATABASE_URL") == "" {
		b.Skip("DATABASE_URL not set: dispatch benchmarks need Postgres (run `make bench`)")
	}
}

// benchEngine is the Temporal port replaced in-process: every start
// succeeds at once, so what is measured is Sluice and Postgres alone.
type benchEngine struct {
	starts atomic.Int64
}

var _ ports.WorkflowEngine = (*benchEngine)(nil)

func (e *benchEngine) StartWorkflow(context.Context, ports.WorkflowStart) error {
	e.starts.Add(1)
	return nil
}

// DescribeWorkflow says every workflow runs, so the reconciler and stale
// recovery leave the benchmark's rows alone.
func (e *benchEngine) DescribeWorkflow(context.Context, domain.ID) (ports.WorkflowState, error) {
	return ports.WorkflowRunning, nil
}

func (e *benchEngine) WorkflowResult(context.Context, domain.ID) (domain.ExecutionStatus, string, error) {
	return domain.ExecutionCompleted, "", nil
}

func (e *benchEngine) CancelWorkflow(context.Context, domain.ID) error { return nil }

func (e *benchEngine) WorkflowPickup(context.Context, domain.ID) (ports.WorkflowPickup, error) {
	return ports.WorkflowPickup{PickedUp: true}, nil
}

func (e *benchEngine) TerminateWorkflow(context.Context, domain.ID, string) error { return nil }

func (e *benchEngine) SendEvent(context.Context, domain.ID, string, json.RawMessage) error {
	return nil
}

func (e *benchEngine) CheckHealth(context.Context) error { return nil }

// benchNoWakeups never signals; the drain loops call DispatchBatch directly.
type benchNoWakeups struct{}

func (benchNoWakeups) C() <-chan struct{} { return nil }

// benchLogger formats every record as production does (JSON at Info) and
// throws it away, so the per-item log cost is counted but no I/O is.
func benchLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// benchPhases accumulates where dispatch batches spend their time.
type benchPhases struct {
	batches    atomic.Int64
	claimPre   atomic.Int64 // ns: claim tx begin → admit called (claimable workspaces, locks, running counts)
	admit      atomic.Int64 // ns: the Go admission planner, without its window reads
	claimPost  atomic.Int64 // ns: admit returned → claim committed (candidates, executions, mark claimed, commit)
	markDisp   atomic.Int64 // ns: MarkDispatched
	workspaces atomic.Int64 // workspaces with pending work and room seen by Claim, summed over batches
}

func (p *benchPhases) reset() {
	for _, v := range []*atomic.Int64{&p.batches, &p.claimPre, &p.admit, &p.claimPost, &p.markDisp, &p.workspaces} {
		v.Store(0)
	}
}

// String gives the mean per batch of each phase in milliseconds.
func (p *benchPhases) String() string {
	n := p.batches.Load()
	if n == 0 {
		return "no batches"
	}
	ms := func(v *atomic.Int64) float64 { return float64(v.Load()) / float64(n) / 1e6 }
	return fmt.Sprintf("per batch: claim before admit %.2f ms, admit %.3f ms, claim after admit+commit %.2f ms, mark dispatched %.2f ms; %.0f claimable workspaces with room seen",
		ms(&p.claimPre), ms(&p.admit), ms(&p.claimPost), ms(&p.markDisp), float64(p.workspaces.Load())/float64(n))
}

// benchTimedStore times the dispatch store's calls without changing them.
type benchTimedStore struct {
	ports.DispatchStore
	phases *benchPhases
}

func (s benchTimedStore) Claim(ctx context.Context, fence ports.Fence, budget int, plan ports.PlanFunc, reject ports.RejectFunc) (ports.ClaimResult, error) {
	start := time.Now()
	var admitStart, admitEnd time.Time
	var reading time.Duration
	res, err := s.DispatchStore.Claim(ctx, fence, budget, func(now time.Time, pool domain.PoolFigures, ws []ports.ClaimableWorkspace, budget int, read ports.WindowReader) (ports.ClaimPlan, error) {
		admitStart = time.Now()
		p, err := plan(now, pool, ws, budget, func(n map[domain.ID]int) (map[domain.ID][]domain.KeyedCandidate, error) {
			began := time.Now()
			defer func() { reading += time.Since(began) }()
			return read(n)
		})
		admitEnd = time.Now()
		return p, err
	}, reject)
	end := time.Now()
	if err != nil {
		return res, err
	}
	s.phases.batches.Add(1)
	s.phases.workspaces.Add(int64(res.Workspaces))
	if admitStart.IsZero() {
		s.phases.claimPre.Add(int64(end.Sub(start)))
		return res, nil
	}
	// The planner's window reads are the store's statements: they count
	// after admit, as they did before the planner read them itself.
	s.phases.claimPre.Add(int64(admitStart.Sub(start)))
	s.phases.admit.Add(int64(admitEnd.Sub(admitStart) - reading))
	s.phases.claimPost.Add(int64(end.Sub(admitEnd) + reading))
	return res, nil
}

func (s benchTimedStore) MarkDispatched(ctx context.Context, fence ports.Fence, items []ports.DispatchedItem) ([]ports.DispatchedRecord, error) {
	start := time.Now()
	recs, err := s.DispatchStore.MarkDispatched(ctx, fence, items)
	s.phases.markDisp.Add(int64(time.Since(start)))
	return recs, err
}

// benchDB is one fresh migrated database with a pool for the dispatcher
// (sized as production's postgres.Connect sizes it) and one for seeding and
// for the enqueuers, which stand for the API process.
type benchDB struct {
	url      string
	pool     *pgxpool.Pool // the dispatcher's
	aux      *pgxpool.Pool // seeding, ceiling, enqueuers
	tracer   *benchTracer
	dropped  bool
	baseURL  string
	database string
	// stopLease stops the heartbeat of the last dispatcher built on this
	// database, releasing its lease; nil before the first.
	stopLease func()
	// walBytes adds up the WAL written during the ceiling's statements and
	// the dispatcher's batches on this database, not the seeding's nor the
	// completions'.
	walBytes int64
}

// walPosition is the cluster's WAL insert position in bytes. The
// benchmarks' contenders run one after the other, so the WAL written
// between two positions read around one contender's step is that step's,
// give or take a checkpoint's or autovacuum's.
func (db *benchDB) walPosition(b *testing.B) int64 {
	b.Helper()
	var pos int64
	if err := db.aux.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&pos); err != nil {
		b.Fatalf("reading the WAL position: %v", err)
	}
	return pos
}

func benchOpenDB(b *testing.B) *benchDB {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := pgtest.URL(b)
	// Both pools are configured as every Sluice process configures its
	// pool; the dispatcher's also gets a tracer that times each statement.
	dcfg, err := postgres.PoolConfig(u)
	if err != nil {
		b.Fatal(err)
	}
	tracer := &benchTracer{}
	dcfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, dcfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := postgres.PoolConfig(u)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 16
	aux, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		b.Fatal(err)
	}
	db := &benchDB{url: u, pool: pool, aux: aux, tracer: tracer, baseURL: os.Getenv("DATABASE_URL"), database: strings.TrimPrefix(parsed.Path, "/")}
	b.Cleanup(db.close)
	return db
}

// close closes the pools and drops the database now rather than at the end
// of the benchmark, so several 1M-row databases never pile up on disk.
// pgtest's own cleanup then finds nothing to drop.
func (db *benchDB) close() {
	if db.dropped {
		return
	}
	db.dropped = true
	if db.stopLease != nil {
		db.stopLease()
	}
	db.pool.Close()
	db.aux.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, db.baseURL)
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{db.database}.Sanitize()))
}

// benchLeaseTTL is the term of the lease a benchmark's dispatcher claims
// under: longer than any benchmark runs, so its heartbeat takes the lease
// once and no renewal (nor a stall of the loaded machine past a short
// term) falls inside a measurement.
const benchLeaseTTL = 6 * time.Hour

// dispatcher builds a dispatcher on the real store with the fake engine,
// its store calls timed into phases, under the lease production gives it:
// the queue lease when cfg is exclusive, a registration lease of its own
// when not. The lease's heartbeat runs until the benchmark ends, or until
// the next dispatcher of this database is built, and the lease is held
// before this returns: claims are fenced by the lease's term, and a start
// is made only within the term its claim was made in
// (dispatch.QueueLease.HeldUntil), so a dispatcher whose heartbeat does not
// hold the lease claims nothing (dispatch.ErrLeaseNotHeld).
func (db *benchDB) dispatcher(b *testing.B, cfg dispatch.DispatcherConfig, wakeups ports.Wakeups, phases *benchPhases) (*dispatch.Dispatcher, *benchEngine) {
	b.Helper()
	engine := &benchEngine{}
	d, _ := db.dispatcherOn(b, cfg, wakeups, phases, engine)
	return d, engine
}

// dispatcherOn is dispatcher with the given engine; it returns the
// dispatcher's series too.
func (db *benchDB) dispatcherOn(b *testing.B, cfg dispatch.DispatcherConfig, wakeups ports.Wakeups, phases *benchPhases, engine ports.WorkflowEngine) (*dispatch.Dispatcher, *dispatch.Metrics) {
	b.Helper()
	log := benchLogger()
	store := postgres.NewStore(db.pool, log)
	if wakeups == nil {
		wakeups = benchNoWakeups{}
	}
	// An earlier dispatcher of this database lets the queue lease go
	// first, as a dispatcher that stops gracefully does.
	if db.stopLease != nil {
		db.stopLease()
	}
	lease := postgres.NewLease(db.pool, "bench-"+uuid.NewString())
	leaseMetrics := dispatch.NewLeaseMetrics(prometheus.NewRegistry())
	queueLease := dispatch.NewRegistrationLease(lease, benchLeaseTTL, leaseMetrics, log)
	if cfg.Exclusive {
		queueLease = dispatch.NewQueueLease(lease, benchLeaseTTL, leaseMetrics, log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); queueLease.Run(ctx) }()
	db.stopLease = func() { cancel(); <-done }
	b.Cleanup(db.stopLease)
	porttest.Eventually(b, time.Minute, porttest.Holds("the dispatcher's lease to be held", queueLease.Holding))
	// The statements counted per batch are the dispatcher's from here,
	// not the lease's taking.
	db.tracer.reset()
	metrics := dispatch.NewMetrics(prometheus.NewRegistry())
	d := dispatch.NewDispatcher(dispatch.DispatcherDeps{
		Store: benchTimedStore{DispatchStore: store, phases: phases}, Executions: store, Engine: engine, Wakeups: wakeups,
		Lease: queueLease, Breaker: dispatch.NewBreaker(cfg.BreakerBackoff, metrics), Metrics: metrics, Log: log,
	}, cfg)
	return d, metrics
}

// benchWorkspaces creates n workspaces on plan, each with one definition at
// version 1 (an empty graph), and returns the workspaces' and definitions'
// ids in matching order.
func (db *benchDB) workspaces(b *testing.B, plan domain.Plan, n int) (ws, defs []domain.ID) {
	b.Helper()
	ctx := context.Background()
	ws, defs = make([]domain.ID, n), make([]domain.ID, n)
	for i := range ws {
		ws[i], defs[i] = domain.ID(uuid.New()), domain.ID(uuid.New())
	}
	stmts := []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO workspaces (id, name, plan) SELECT unnest($1::uuid[]), 'bench', $2`, []any{ws, string(plan)}},
		{`INSERT INTO workflow_definitions (id, workspace_id, name) SELECT unnest($1::uuid[]), unnest($2::uuid[]), 'bench'`, []any{defs, ws}},
		{`INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph)
		  SELECT unnest($1::uuid[]), 1, '{"nodes":[],"edges":[]}'::jsonb`, []any{defs}},
	}
	for _, s := range stmts {
		if _, err := db.aux.Exec(ctx, s.sql, s.args...); err != nil {
			b.Fatalf("seeding workspaces: %v", err)
		}
	}
	return ws, defs
}

// items bulk-inserts n PENDING items spread round-robin over the given
// workspaces in one INSERT ... SELECT generate_series, created age ago in
// order, so that different seeds order against each other by age.
func (db *benchDB) items(b *testing.B, ws, defs []domain.ID, n, priority int, age time.Duration) {
	b.Helper()
	_, err := db.aux.Exec(context.Background(), `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, priority, created_at, available_at)
		SELECT gen_random_uuid(),
		       ($1::uuid[])[1 + g % cardinality($1::uuid[])],
		       ($2::uuid[])[1 + g % cardinality($2::uuid[])],
		       $3, now() - $4::interval + g * interval '1 microsecond', now() - $4::interval
		FROM generate_series(0, $5::int - 1) AS g`,
		ws, defs, priority, age, n)
	if err != nil {
		b.Fatalf("seeding %d items: %v", n, err)
	}
}

// occupy gives each workspace one RUNNING execution: a FREE workspace is
// then at capacity.
func (db *benchDB) occupy(b *testing.B, ws, defs []domain.ID) {
	b.Helper()
	_, err := db.aux.Exec(context.Background(), `
		INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status)
		SELECT gen_random_uuid(), w, d, 1, 'RUNNING' FROM unnest($1::uuid[], $2::uuid[]) AS t(w, d)`, ws, defs)
	if err != nil {
		b.Fatalf("occupying workspaces: %v", err)
	}
}

// history gives the workspaces n COMPLETED executions from the past, as a
// service that has been running has. Without them workflow_executions
// starts empty, and the plans that pgx's statement cache keeps for the life
// of a connection are made for an empty table: a sequential scan of
// workflow_executions that the admission recount under the workspace locks
// (ExecutionsRunningForWorkspaces) then repeats every batch as the table
// grows, until autoanalyze invalidates the plan.
func (db *benchDB) history(b *testing.B, ws, defs []domain.ID, n int) {
	b.Helper()
	_, err := db.aux.Exec(context.Background(), `
		INSERT INTO workflow_executions (id, workspace_id, workflow_definition_id, workflow_version, status, started_at, completed_at, duration_ms)
		SELECT gen_random_uuid(),
		       ($1::uuid[])[1 + g % cardinality($1::uuid[])],
		       ($2::uuid[])[1 + g % cardinality($2::uuid[])],
		       1, 'COMPLETED', now() - interval '1 day', now() - interval '1 day' + interval '1 second', 1000
		FROM generate_series(0, $3::int - 1) AS g`, ws, defs, n)
	if err != nil {
		b.Fatalf("seeding history: %v", err)
	}
}

// vacuumAnalyze does what autovacuum would have done to a backlog that
// built up over time, so the planner sees the table's real size.
func (db *benchDB) vacuumAnalyze(b *testing.B) {
	b.Helper()
	for _, t := range []string{"workflow_execution_queue", "workflow_executions", "workspaces", "workspace_queue_stats"} {
		if _, err := db.aux.Exec(context.Background(), "VACUUM ANALYZE "+t); err != nil {
			b.Fatalf("vacuum analyze %s: %v", t, err)
		}
	}
}

// completeRunning ends the given workspaces' RUNNING executions, as
// workflows that finish at once would. The drain loops call it between
// batches, off the clock, so that running counts stay as small as they are
// in production instead of growing with every dispatched item.
func (db *benchDB) completeRunning(b *testing.B, ws []domain.ID) {
	b.Helper()
	_, err := db.aux.Exec(context.Background(), `
		UPDATE workflow_executions SET status = 'COMPLETED', completed_at = now(), duration_ms = 0
		WHERE status = 'RUNNING' AND workspace_id = ANY($1::uuid[])`, ws)
	if err != nil {
		b.Fatalf("completing executions: %v", err)
	}
}

// statusCounts describes the queue by status and the counts the claim's
// prefilter reads, for a benchmark that fails.
func (db *benchDB) statusCounts(b *testing.B) string {
	b.Helper()
	var out string
	if err := db.aux.QueryRow(context.Background(), `
		SELECT (SELECT string_agg(status || '=' || n, ' ') FROM (SELECT status, count(*) n FROM workflow_execution_queue GROUP BY 1) s)
		    || '; stats pending ' || (SELECT sum(pending) FROM workspace_queue_stats)
		    || ' running ' || (SELECT sum(running) FROM workspace_queue_stats)
		    || '; executions RUNNING ' || (SELECT count(*) FROM workflow_executions WHERE status = 'RUNNING')`).Scan(&out); err != nil {
		return err.Error()
	}
	return out
}

func (db *benchDB) countStatus(b *testing.B, status string) int {
	b.Helper()
	var n int
	if err := db.aux.QueryRow(context.Background(), `SELECT count(*) FROM workflow_execution_queue WHERE status = $1`, status).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// pendingIn counts the PENDING items of the given workspaces, or of all
// workspaces when ws is nil.
func (db *benchDB) pendingIn(b *testing.B, ws []domain.ID) int {
	b.Helper()
	if ws == nil {
		return db.countStatus(b, "PENDING")
	}
	var n int
	if err := db.aux.QueryRow(context.Background(), `SELECT count(*) FROM workflow_execution_queue WHERE status = 'PENDING' AND workspace_id = ANY($1)`, ws).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// benchCeilingSQL is the plain-SQL ceiling: one autocommit statement per
// batch claims the next pending items in the pending index's order with SKIP
// LOCKED and marks them DISPATCHED. No admission, no execution rows, no
// second statement: the least work a batch claim-and-mark can do.
const benchCeilingSQL = `
UPDATE workflow_execution_queue q
SET status = 'DISPATCHED', dispatched_at = now(), execution_id = gen_random_uuid()
WHERE q.id IN (
    SELECT i.id FROM workflow_execution_queue i
    WHERE i.status = 'PENDING' AND i.available_at <= now()
    ORDER BY i.workspace_id, i.priority, i.created_at, i.id
    LIMIT $1
    FOR UPDATE SKIP LOCKED)`

// ceiling marks at least want items (all that are left when fewer are)
// with benchCeilingSQL, batch by batch, and returns how many it marked and
// the time taken.
func (db *benchDB) ceiling(b *testing.B, batch, want int) (int, time.Duration) {
	b.Helper()
	ctx := context.Background()
	total := 0
	wal := db.walPosition(b)
	start := time.Now()
	for total < want {
		tag, err := db.aux.Exec(ctx, benchCeilingSQL, batch)
		if err != nil {
			b.Fatalf("ceiling batch: %v", err)
		}
		if tag.RowsAffected() == 0 {
			break
		}
		total += int(tag.RowsAffected())
	}
	took := time.Since(start)
	db.walBytes += db.walPosition(b) - wal
	return total, took
}

// benchDrain calls DispatchBatch until at least want more items are
// DISPATCHED and returns how many were and the time spent inside
// DispatchBatch. With complete set, the given workspaces' executions are
// completed between batches, off the clock.
func benchDrain(b *testing.B, db *benchDB, d *dispatch.Dispatcher, want int, complete []domain.ID) (int, time.Duration) {
	b.Helper()
	ctx := context.Background()
	var spent time.Duration
	done := 0
	for done < want {
		wal := db.walPosition(b)
		start := time.Now()
		res, err := d.DispatchBatch(ctx)
		spent += time.Since(start)
		db.walBytes += db.walPosition(b) - wal
		if err != nil {
			b.Fatalf("dispatch batch: %v", err)
		}
		if res.Claimed == 0 && db.pendingIn(b, complete) == 0 {
			// An adaptive batch overshoots a round's share; the last round
			// finds the measured workspaces drained early. Work queued in
			// other workspaces (full ones, in some scenarios) stays.
			break
		}
		if res.Claimed == 0 {
			b.Fatalf("dispatcher stopped claiming after %d of %d items (%+v); queue by status: %s", done, want, res, db.statusCounts(b))
		}
		if res.Released > 0 || res.Failed > 0 {
			b.Fatalf("unexpected releases or failures: %+v", res)
		}
		done += res.Dispatched
		if complete != nil {
			db.completeRunning(b, complete)
		}
	}
	return done, spent
}

// benchMeter adds up the items and time of one contender over the rounds
// of an interleaved measurement.
type benchMeter struct {
	items int
	took  time.Duration
}

func (m *benchMeter) add(items int, took time.Duration) {
	m.items += items
	m.took += took
}

func (m *benchMeter) rate() float64 { return benchRate(m.items, m.took) }

// benchInterleave runs the contenders' steps in rounds, rotating which goes
// first, so that the machine's noise (two shared cores) and the database's
// background work fall on all of them alike.
func benchInterleave(rounds int, steps []func()) {
	for r := range rounds {
		for k := range steps {
			steps[(r+k)%len(steps)]()
		}
	}
}

// benchPercentile returns the nearest-rank percentile of sorted values.
func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func benchSortDurations(ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
}

func benchRate(items int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(items) / d.Seconds()
}

// benchQuery is one named sqlc query with its parameters numbered the way
// sqlc numbers them: $1 is the first parameter used, and so on.
type benchQuery struct {
	SQL    string
	Params []string
}

// benchQueries reads the named queries from db/queries, so that EXPLAIN
// runs exactly the text the store runs, whatever it is at the time.
func benchQueries() (map[string]benchQuery, error) {
	files, err := filepath.Glob(filepath.Join("..", "..", "db", "queries", "*.sql"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no query files found under ../../db/queries: %w", err)
	}
	embedRe := regexp.MustCompile(`sqlc\.embed\((\w+)\)`)
	nameRe := regexp.MustCompile(`^-- name: (\w+)`)
	paramRe := regexp.MustCompile(`sqlc\.n?arg\((\w+)\)|@(\w+)`)
	out := map[string]benchQuery{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var name string
		var body []string
		flush := func() {
			if name == "" {
				return
			}
			q := benchQuery{}
			idx := map[string]int{}
			text := embedRe.ReplaceAllString(strings.Join(body, "\n"), "$1.*")
			q.SQL = paramRe.ReplaceAllStringFunc(text, func(m string) string {
				sub := paramRe.FindStringSubmatch(m)
				p := sub[1] + sub[2]
				if _, ok := idx[p]; !ok {
					q.Params = append(q.Params, p)
					idx[p] = len(q.Params)
				}
				return fmt.Sprintf("$%d", idx[p])
			})
			out[name] = q
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if m := nameRe.FindStringSubmatch(line); m != nil {
				flush()
				name, body = m[1], nil
				continue
			}
			body = append(body, line)
		}
		flush()
	}
	return out, nil
}

// explainClaimPath runs EXPLAIN (ANALYZE, BUFFERS) on the claim path's
// queries as one dispatcher batch would issue them, inside a transaction
// that is rolled back, and logs the plans. quotas are the workspaces a batch
// would claim from.
func (db *benchDB) explainClaimPath(b *testing.B, label string, quotas map[domain.ID]int) {
	b.Helper()
	qs, err := benchQueries()
	if err != nil {
		b.Logf("EXPLAIN skipped: %v", err)
		return
	}
	ctx := context.Background()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()

	pendingArgs := map[string]any{}
	var args []any
	for _, p := range qs["QueueClaimableWorkspaces"].Params {
		args = append(args, pendingArgs[p])
	}
	var pending []domain.ID
	rows, err := tx.Query(ctx, qs["QueueClaimableWorkspaces"].SQL, args...)
	if err != nil {
		b.Logf("EXPLAIN skipped: QueueClaimableWorkspaces: %v", err)
		return
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil || len(vals) == 0 {
			break
		}
		switch id := vals[0].(type) {
		case [16]byte:
			pending = append(pending, domain.ID(id))
		default:
			if u, err := domain.ParseID(fmt.Sprint(id)); err == nil {
				pending = append(pending, u)
			}
		}
	}
	rows.Close()
	var qIDs []domain.ID
	var qNs []int32
	for id, n := range quotas {
		qIDs, qNs = append(qIDs, id), append(qNs, int32(n)*4)
	}
	values := map[string]map[string]any{
		"QueueClaimableWorkspaces":       pendingArgs,
		"WorkspacesLockForAdmission":     {"ids": pending},
		"ExecutionsRunningForWorkspaces": {"workspace_ids": pending},
		"QueueAdmissibleWindow":          {"workspace_ids": qIDs, "windows": qNs},
	}
	for _, name := range []string{"QueueClaimableWorkspaces", "WorkspacesLockForAdmission", "ExecutionsRunningForWorkspaces", "QueueAdmissibleWindow"} {
		q, ok := qs[name]
		if !ok {
			b.Logf("EXPLAIN %s: query not found in db/queries", name)
			continue
		}
		var args []any
		missing := ""
		for _, p := range q.Params {
			v, ok := values[name][p]
			if !ok {
				missing = p
				break
			}
			args = append(args, v)
		}
		if missing != "" {
			b.Logf("EXPLAIN %s skipped: no bench value for parameter %q", name, missing)
			continue
		}
		if _, err := tx.Exec(ctx, "SAVEPOINT explain"); err != nil {
			b.Fatal(err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q.SQL, args...)
		if err != nil {
			b.Logf("EXPLAIN %s failed: %v", name, err)
			_, _ = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT explain")
			continue
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err == nil {
				plan = append(plan, "    "+line)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			b.Logf("EXPLAIN %s failed: %v", name, err)
			_, _ = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT explain")
			continue
		}
		benchPrint(fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS) [%s] %s (%d claimable workspaces, %d with quota):\n%s\n", label, name, len(pending), len(qIDs), strings.Join(plan, "\n")))
	}
}

// benchTracer times the dispatcher's statements as the client sees them,
// round trip included, keyed by sqlc query name (or the statement itself
// for BEGIN, COMMIT and the like).
type benchTracer struct {
	mu    sync.Mutex
	stats map[string]*benchStat
}

type benchStat struct {
	n     int
	total time.Duration
}

type benchTraceKey struct{}

type benchTraceStart struct {
	name  string
	start time.Time
}

var benchNameRe = regexp.MustCompile(`^-- name: (\w+)`)

func (t *benchTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	name := strings.TrimSpace(data.SQL)
	if m := benchNameRe.FindStringSubmatch(name); m != nil {
		name = m[1]
	} else if len(name) > 30 {
		name = name[:30]
	}
	return context.WithValue(ctx, benchTraceKey{}, benchTraceStart{name: name, start: time.Now()})
}

func (t *benchTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	s, ok := ctx.Value(benchTraceKey{}).(benchTraceStart)
	if !ok {
		return
	}
	d := time.Since(s.start)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stats == nil {
		t.stats = map[string]*benchStat{}
	}
	st := t.stats[s.name]
	if st == nil {
		st = &benchStat{}
		t.stats[s.name] = st
	}
	st.n++
	st.total += d
}

func (t *benchTracer) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats = nil
}

// report lists the statements by total time, with their mean per batch.
func (t *benchTracer) report(batches int64) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	type row struct {
		name string
		st   benchStat
	}
	var rows []row
	for n, st := range t.stats {
		rows = append(rows, row{n, *st})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].st.total > rows[j].st.total })
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%s %.2f ms", r.name, float64(r.st.total)/float64(max(1, batches))/1e6))
	}
	return "per batch by statement: " + strings.Join(parts, ", ")
}
