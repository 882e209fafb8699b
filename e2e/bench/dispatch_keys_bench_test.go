package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
)

const (
	// keysBenchWorkspaces × keysBenchKeysPerWorkspace is the 10,000 keys.
	keysBenchWorkspaces       = 100
	keysBenchKeysPerWorkspace = 100
	// keysBenchBurst is how many items of one key are enqueued together
	// before the next key's, as an end customer's bulk request would.
	keysBenchBurst = 10
	// keysBenchKeyLimit is every key's limit: one run per end customer at
	// a time, so a key is full as soon as one of its items runs.
	keysBenchKeyLimit = 1
)

// keysBenchMeasured is how many of the pending items each contender
// dispatches on the clock.
var keysBenchMeasured = benchSize(20_000, 2_000)

// keysBenchItems is the size of the backlog: 1,000,000 (4,000 in a smoke
// run), or SLUICE_BENCH_KEYS_ITEMS for a quick run.
func keysBenchItems(b *testing.B) int {
	b.Helper()
	s := os.Getenv("SLUICE_BENCH_KEYS_ITEMS")
	if s == "" {
		return benchSize(1_000_000, 4_000)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < keysBenchMeasured {
		b.Fatalf("SLUICE_BENCH_KEYS_ITEMS=%q: want an integer of at least %d", s, keysBenchMeasured)
	}
	return n
}

// BenchmarkDispatchWithConcurrencyKeys compares the dispatch rate over a
// backlog of 1,000,000 PENDING items spread over 10,000 concurrency keys
// with the rate over the same backlog without keys (target: keyed ≥ 80 %
// of unkeyed). Both databases exist side by side and are drained
// interleaved in 10 rounds, 20,000 items each, by the default dispatcher
// configuration (batch 10 doubling to 200) in non-exclusive mode with the
// fake engine.
//
// The shape: 100 ENTERPRISE workspaces (limit 20), each with 100 keys of
// limit 1 (one run per end customer at a time) and 10,000 items, 100 per
// key. A workspace's items were enqueued in bursts of 10 per key, keys in
// turn (10 of key 0, 10 of key 1, ..., 10 of key 99, then key 0 again),
// as end customers' bulk requests arrive. The unkeyed database has the
// same items in the same order with no key.
//
// Runs take one batch to end: before each batch, off the clock, the
// executions claimed before the previous batch are completed, so the
// previous batch's runs are still RUNNING while the next batch claims.
// Their keys are then full and the scan must pass their items, and a key
// frees up and refills a batch later, as workflows a little slower than
// the claim loop would.
//
// SLUICE_BENCH_KEYS_ITEMS sets a smaller backlog for a quick run (at least
// the 20,000 measured); SLUICE_BENCH_EXPLAIN=1 prints EXPLAIN ANALYZE of
// the claim path's queries on the keyed database before the drain.
func BenchmarkDispatchWithConcurrencyKeys(b *testing.B) {
	benchRequireDB(b)
	const rounds = 10
	total := keysBenchItems(b)
	type contender struct {
		name   string
		keyed  bool
		db     *benchDB
		ws     []domain.ID
		setup  time.Duration
		meter  benchMeter
		phases *benchPhases
		drain  func() (int, time.Duration)
	}
	contenders := []*contender{{name: "no keys"}, {name: "10,000 keys", keyed: true}}
	benchStart := time.Now()
	for _, c := range contenders {
		start := time.Now()
		c.db = benchOpenDB(b)
		var defs []domain.ID
		c.ws, defs = c.db.workspaces(b, domain.PlanEnterprise, keysBenchWorkspaces)
		c.db.history(b, c.ws, defs, benchHistory)
		c.db.keyedItems(b, c.ws, defs, total, c.keyed)
		c.db.vacuumAnalyze(b)
		c.setup = time.Since(start)
		if c.keyed && os.Getenv("SLUICE_BENCH_EXPLAIN") != "" {
			quotas := map[domain.ID]int{}
			for _, w := range c.ws[:10] {
				quotas[w] = 20
			}
			c.db.explainClaimPath(b, "10,000 keys, before the drain", quotas)
		}
		c.phases = &benchPhases{}
		d, _ := c.db.dispatcher(b, keysBenchConfig(), nil, c.phases)
		var before time.Time
		c.drain = func() (int, time.Duration) {
			return keysBenchDrain(b, c.db, d, keysBenchMeasured/rounds, &before)
		}
	}
	setup := time.Since(benchStart)
	var steps []func()
	for _, c := range contenders {
		steps = append(steps, func() { c.meter.add(c.drain()) })
	}
	benchInterleave(rounds, steps)

	var stmts []string
	for _, c := range contenders {
		if c.meter.items < keysBenchMeasured {
			b.Fatalf("%s: %d items dispatched, want %d", c.name, c.meter.items, keysBenchMeasured)
		}
		stmts = append(stmts, c.db.tracer.report(c.phases.batches.Load()))
		c.db.close()
	}

	unkeyed, keyed := contenders[0], contenders[1]
	ratio := 100 * keyed.meter.rate() / unkeyed.meter.rate()
	benchMetric(b, unkeyed.meter.rate(), "unkeyed_items/s")
	benchMetric(b, keyed.meter.rate(), "keyed_items/s")
	benchMetric(b, ratio, "keyed/unkeyed_%")
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== dispatch with concurrency keys: %d PENDING items in %d ENTERPRISE workspaces, %d keys of limit %d (bursts of %d per key), against the same items without keys; %d dispatched by each, default config (non-exclusive), fake Temporal, interleaved in %d rounds; setup %v, total %v; load average %s ==\n",
		total, keysBenchWorkspaces, keysBenchWorkspaces*keysBenchKeysPerWorkspace, keysBenchKeyLimit, keysBenchBurst,
		keysBenchMeasured, rounds, setup.Round(100*time.Millisecond), time.Since(benchStart).Round(time.Second), benchLoadAverage())
	for i, c := range contenders {
		fmt.Fprintf(&sb, "%-12s %7.0f items/s (%v, %d batches, %.1f items a batch; setup %v)\n      %s\n      %s\n",
			c.name+":", c.meter.rate(), c.meter.took.Round(time.Millisecond), c.phases.batches.Load(),
			float64(c.meter.items)/float64(max(1, c.phases.batches.Load())), c.setup.Round(100*time.Millisecond), c.phases, stmts[i])
	}
	fmt.Fprintf(&sb, "keyed/unkeyed: %5.1f %%  [target >= 80 %%: %s]\n", ratio, benchVerdict(ratio >= 80))
	benchPrint(sb.String())
}

// keysBenchConfig is the default dispatcher configuration in
// non-exclusive mode, the mode in which key limits must hold against
// racing dispatchers; it claims under a registration lease of its own.
func keysBenchConfig() dispatch.DispatcherConfig {
	cfg := dispatch.DefaultDispatcherConfig()
	cfg.Exclusive = false
	return cfg
}

// keyedItems bulk-inserts n PENDING items spread round-robin over the
// workspaces, created in order, in one INSERT ... SELECT generate_series.
// With keyed set, the j-th item of a workspace has key "customer-k" with
// k = (j / keysBenchBurst) mod keysBenchKeysPerWorkspace, limit
// keysBenchKeyLimit; without, the same items have no key.
func (db *benchDB) keyedItems(b *testing.B, ws, defs []domain.ID, n int, keyed bool) {
	b.Helper()
	_, err := db.aux.Exec(context.Background(), `
		INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, priority, created_at, available_at,
		                                      concurrency_key, concurrency_limit)
		SELECT gen_random_uuid(),
		       ($1::uuid[])[1 + g % cardinality($1::uuid[])],
		       ($2::uuid[])[1 + g % cardinality($2::uuid[])],
		       2, now() - interval '2 hours' + g * interval '1 microsecond', now() - interval '2 hours',
		       CASE WHEN $4 THEN 'customer-' || ((g / cardinality($1::uuid[])) / $5::int) % $6::int END,
		       CASE WHEN $4 THEN $7::int END
		FROM generate_series(0, $3::int - 1) AS g`,
		ws, defs, n, keyed, keysBenchBurst, keysBenchKeysPerWorkspace, keysBenchKeyLimit)
	if err != nil {
		b.Fatalf("seeding %d items: %v", n, err)
	}
}

// checkKeyLimits fails the benchmark if any key has more RUNNING
// executions than its limit: a faster claim that broke the limit would
// measure nothing.
func (db *benchDB) checkKeyLimits(b *testing.B) {
	b.Helper()
	var over int
	if err := db.aux.QueryRow(context.Background(), `
		SELECT count(*) FROM (SELECT 1 FROM workflow_executions WHERE status = 'RUNNING' AND concurrency_key IS NOT NULL
		                      GROUP BY workspace_id, concurrency_key HAVING count(*) > $1) o`, keysBenchKeyLimit).Scan(&over); err != nil {
		b.Fatal(err)
	}
	if over > 0 {
		b.Fatalf("%d keys have more than %d RUNNING executions", over, keysBenchKeyLimit)
	}
}

// keysBenchDrain calls DispatchBatch until at least want more items are
// DISPATCHED and returns how many were and the time spent inside
// DispatchBatch. Before each batch, off the clock, it completes the
// executions claimed before the previous batch began (*before holds when
// that was, on the database's clock), and checks that no key runs past
// its limit.
func keysBenchDrain(b *testing.B, db *benchDB, d *dispatch.Dispatcher, want int, before *time.Time) (int, time.Duration) {
	b.Helper()
	ctx := context.Background()
	var spent time.Duration
	done, idle := 0, 0
	for done < want {
		db.checkKeyLimits(b)
		if !before.IsZero() {
			if _, err := db.aux.Exec(ctx, `
				UPDATE workflow_executions SET status = 'COMPLETED', completed_at = now(), duration_ms = 0
				WHERE status = 'RUNNING' AND started_at < $1`, *before); err != nil {
				b.Fatalf("completing executions: %v", err)
			}
		}
		if err := db.aux.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(before); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		res, err := d.DispatchBatch(ctx)
		spent += time.Since(start)
		if err != nil {
			b.Fatalf("dispatch batch: %v", err)
		}
		if res.Released > 0 || res.Failed > 0 {
			b.Fatalf("unexpected releases or failures: %+v", res)
		}
		if idle = idle + 1; res.Claimed > 0 {
			idle = 0
		}
		if res.Claimed == 0 && db.countStatus(b, "PENDING") == 0 {
			// The adaptive batch overshoots a round's share, so when the
			// backlog is no bigger than the measured items the last round
			// finds it drained early.
			break
		}
		if idle > 2 {
			b.Fatalf("dispatcher stopped claiming after %d of %d items; queue by status: %s", done, want, db.statusCounts(b))
		}
		done += res.Dispatched
	}
	return done, spent
}

// benchLoadAverage is the machine's 1, 5 and 15 minute load averages, to
// print beside figures measured on a shared machine.
func benchLoadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
