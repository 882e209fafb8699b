package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// tenTransforms is a 10-harness.Node DAG of TRANSFORM nodes: a fan-out of 8
// between a first and a last harness.Node, so each run writes some 25 feed events.
var tenTransforms = func() map[string]any {
	nodes := []any{harness.Node("first", "TRANSFORM", map[string]any{"output": map[string]any{"k": "v"}})}
	var edges []any
	for i := range 8 {
		key := fmt.Sprintf("mid%d", i)
		nodes = append(nodes, harness.Node(key, "TRANSFORM", map[string]any{"output": map[string]any{"i": i}}))
		edges = append(edges, map[string]any{"from": "first", "to": key}, map[string]any{"from": key, "to": "last"})
	}
	nodes = append(nodes, harness.Node("last", "TRANSFORM", map[string]any{"output": map[string]any{"done": true}}))
	return map[string]any{"nodes": nodes, "edges": edges}
}()

// growthSample is one look at what the workload has stored.
type growthSample struct {
	at          time.Time
	feedRows    int64
	feedMaxID   int64
	oldestAge   float64
	deleted     float64
	deliveries  map[string]int
	pendingOnes map[string]int
}

func sampleGrowth(t *testing.T, pool *pgxpool.Pool, base string) growthSample {
	t.Helper()
	ctx := context.Background()
	s := growthSample{at: time.Now(), deliveries: map[string]int{}, pendingOnes: map[string]int{}}
	if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(max(id), 0), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 FROM feed_events`).
		Scan(&s.feedRows, &s.feedMaxID, &s.oldestAge); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT workspace_id::text, count(*), count(*) FILTER (WHERE status = 'PENDING') FROM webhook_deliveries GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ws string
		var n, p int
		if err := rows.Scan(&ws, &n, &p); err != nil {
			t.Fatal(err)
		}
		s.deliveries[ws], s.pendingOnes[ws] = n, p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	s.deleted = metricValue(t, base, `retention_deleted_rows_total{kind="feed_events"}`)
	return s
}

// TestAFastWorkloadKeepsTheFeedWithinItsRetentionAndDeliveriesWithinTheirBound:
// two ENTERPRISE workspaces keep 10-harness.Node TRANSFORM DAGs running,
// and a third enqueues bulkRate items a second in batches of 1,000 (each
// held a month by notBefore, so it costs a feed event and a queue row and
// never a run), for a minute in `make test` and five under `make soak`
// (SLUICE_TEST_GROWTH_SECONDS), with events kept 10 s and purged every
// 5 s, and each DAG workspace's two webhook endpoints answering 500 so that
// every delivery stays PENDING. Once the first retention and purge have
// passed, the oldest feed event is never older than the retention plus the
// purge interval and a 5 s margin for a loaded machine, and no workspace
// ever stores more deliveries than its bound (300, 150 PENDING); the
// deliveries left out are counted on the endpoints and in the metric. A
// run of five minutes or more is the issue's size, and must insert 1,000
// feed events a second or more; a shorter one says what it reached. Before
// the purge looped, it deleted at most 10,000 rows a minute per process
// against 937–1,392 inserted a second, and the oldest row was 265 s old
// after 5 minutes of a 60 s retention. The DAGs alone reach 263–390 rows a
// second on a shared 2-core machine: a Temporal worker's throughput, not
// the purge's, bounds them, hence the bulk enqueues.
func TestAFastWorkloadKeepsTheFeedWithinItsRetentionAndDeliveriesWithinTheirBound(t *testing.T) {
	const (
		retention     = 10 * time.Second
		purgeInterval = 5 * time.Second
		margin        = 5 * time.Second
		storedMax     = 300
		pendingMax    = 150
		bulkRate      = 1000 // items a second, in batches of 1,000
		issueSize     = 5 * time.Minute
		issueRate     = 1000 // feed events a second, at the issue's size
	)
	run := time.Minute
	if v := os.Getenv("SLUICE_TEST_GROWTH_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SLUICE_TEST_GROWTH_SECONDS=%q: %v", v, err)
		}
		run = time.Duration(n) * time.Second
	}
	rc := harness.NewWebhookReceiver(t, func(int, *http.Request) int { return http.StatusInternalServerError })
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_STREAM_RETENTION":       retention.String(),
		"SLUICE_STREAM_PURGE_INTERVAL":  purgeInterval.String(),
		"SLUICE_WEBHOOK_CA_FILE":        harness.WebhookCAFile(t, rc.Srv),
		"SLUICE_WEBHOOK_RETRY_BASE":     "1h",
		"SLUICE_WEBHOOK_DELIVERIES_MAX": strconv.Itoa(storedMax),
		"SLUICE_WEBHOOK_PENDING_MAX":    strconv.Itoa(pendingMax),
	})
	pool, err := pgxpool.New(context.Background(), harness.AppsByBase[base].DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	type tenant struct {
		ws, def   string
		endpoints []string
	}
	var tenants []tenant
	for range 2 {
		e := harness.NewE2E(t, base)
		tn := tenant{ws: e.Ws, def: createDefinition(t, base, e.Ws, tenTransforms)}
		for range 2 {
			id, _ := harness.RegisterWebhook(t, base, e.Ws, rc.Srv.URL+"/hook")
			tn.endpoints = append(tn.endpoints, id)
		}
		tenants = append(tenants, tn)
	}

	// The bulk workspace may hold what bulkRate enqueues for the whole
	// run: its items wait a month.
	bulk := harness.NewE2E(t, base)
	bulkDef := createDefinition(t, base, bulk.Ws, harness.OneTransform)
	room := int(run.Seconds()+60) * bulkRate
	if code := harness.Call(t, "PUT", base+"/api/v1/workspaces/"+bulk.Ws+"/limits", harness.TestAdminToken, map[string]any{
		"maxRunning": nil, "pendingItems": room, "storedItems": room, "storedExecutions": room}, nil); code != http.StatusOK {
		t.Fatalf("raising the bulk workspace's quotas: %d", code)
	}

	// Each DAG workspace's driver keeps about 40 items PENDING, in
	// batches; the bulk driver enqueues a batch of 1,000 delayed items
	// every 1,000/bulkRate seconds.
	ctx, stop := context.WithTimeout(context.Background(), run)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		notBefore := time.Now().Add(29 * 24 * time.Hour).UTC().Format(time.RFC3339)
		items := make([]map[string]any, 1000)
		for i := range items {
			items[i] = map[string]any{"notBefore": notBefore}
		}
		tick := time.NewTicker(time.Second * 1000 / bulkRate)
		defer tick.Stop()
		for ctx.Err() == nil {
			code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start-batch", harness.TestAdminToken,
				map[string]any{"workspaceId": bulk.Ws, "workflowDefinitionId": bulkDef, "items": items}, nil)
			if code != http.StatusAccepted && ctx.Err() == nil {
				t.Errorf("enqueueing a bulk batch: %d", code)
				return
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})
	for _, tn := range tenants {
		wg.Go(func() {
			items := make([]map[string]any, 40)
			for i := range items {
				items[i] = map[string]any{}
			}
			for ctx.Err() == nil {
				var pending int
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1 AND status = 'PENDING'`, tn.ws).Scan(&pending); err != nil {
					return // the run's time is up
				}
				if pending < 40 {
					if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start-batch", harness.TestAdminToken,
						map[string]any{"workspaceId": tn.ws, "workflowDefinitionId": tn.def, "items": items}, nil); code != 202 {
						t.Errorf("enqueueing a batch: %d", code)
						return
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}

	start := time.Now()
	first := sampleGrowth(t, pool, base)
	prev := first
	var worstAge float64
	maxStored, maxPending := map[string]int{}, map[string]int{}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
		s := sampleGrowth(t, pool, base)
		dt := s.at.Sub(prev.at).Seconds()
		t.Logf("t=%3.0fs  inserted %6.0f/s  deleted %6.0f/s  rows %7d  oldest %5.1fs  deliveries %v pending %v",
			s.at.Sub(start).Seconds(), float64(s.feedMaxID-prev.feedMaxID)/dt, (s.deleted-prev.deleted)/dt, s.feedRows, s.oldestAge, s.deliveries, s.pendingOnes)
		if s.at.Sub(start) > retention+purgeInterval+margin {
			worstAge = max(worstAge, s.oldestAge)
		}
		for ws, n := range s.deliveries {
			maxStored[ws] = max(maxStored[ws], n)
			maxPending[ws] = max(maxPending[ws], s.pendingOnes[ws])
		}
		prev = s
	}
	wg.Wait()
	total := prev.at.Sub(first.at).Seconds()
	inserted, deleted := float64(prev.feedMaxID-first.feedMaxID), prev.deleted-first.deleted
	t.Logf("over %.0fs: %.0f feed rows inserted (%.0f/s), %.0f deleted (%.0f/s), %d stored at the end; oldest at most %.1fs after the first %s (bound %s)",
		total, inserted, inserted/total, deleted, deleted/total, prev.feedRows, worstAge, retention+purgeInterval+margin, retention+purgeInterval+margin)
	if inserted < 1000 {
		t.Fatalf("the workload wrote %.0f feed events in %.0fs: too few to show anything", inserted, total)
	}
	if run >= issueSize && inserted/total < issueRate {
		t.Errorf("the workload inserted %.0f feed events a second, under the issue's %d: it shows nothing at the issue's size", inserted/total, issueRate)
	}
	if limit := (retention + purgeInterval + margin).Seconds(); worstAge > limit {
		t.Errorf("the oldest feed event was %.1fs old, past its retention %s plus the purge interval %s and %s", worstAge, retention, purgeInterval, margin)
	}

	for _, tn := range tenants {
		t.Logf("workspace %s: at most %d deliveries stored, %d PENDING (bound %d, %d)", tn.ws, maxStored[tn.ws], maxPending[tn.ws], storedMax, pendingMax)
		if maxStored[tn.ws] > storedMax || maxPending[tn.ws] > pendingMax {
			t.Errorf("workspace %s stored %d deliveries, %d PENDING, past its bound %d, %d", tn.ws, maxStored[tn.ws], maxPending[tn.ws], storedMax, pendingMax)
		}
	}
	// The runs already queued go on ending after the drivers stop, so the
	// endpoints' counts and the metric are compared once they agree.
	var dropped int64
	var metric float64
	porttest.Eventually(t, 2*time.Minute, porttest.Holds("the endpoints' drops to equal the drops metric", func() bool {
		dropped = 0
		for _, tn := range tenants {
			for _, ep := range tn.endpoints {
				var view struct {
					DeliveriesDropped int64 `json:"deliveriesDropped"`
				}
				if code := harness.Call(t, "GET", base+"/api/v1/webhooks/endpoints/"+ep, harness.TestAdminToken, nil, &view); code != 200 {
					t.Fatalf("get endpoint: %d", code)
				}
				dropped += view.DeliveriesDropped
			}
		}
		metric = metricValue(t, base, "webhook_deliveries_dropped_total")
		return dropped > 0 && float64(dropped) == metric
	}))
	t.Logf("deliveries dropped: %d counted on the endpoints and in webhook_deliveries_dropped_total", dropped)
}

// TestAnEnqueuePastTheStoredExecutionsQuotaIsRefusedNamingIt: with a
// workspace's storedExecutions at 3, three enqueues pass and the fourth
// is refused with 429 naming "stored executions", both while the three
// are PENDING (each counts as the harness.Execution it will become) and once
// they have completed and are stored executions.
func TestAnEnqueuePastTheStoredExecutionsQuotaIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	if code := harness.Call(t, "PUT", base+"/api/v1/workspaces/"+e.Ws+"/limits", harness.TestAdminToken,
		map[string]any{"maxRunning": nil, "storedExecutions": 3}, nil); code != 200 {
		t.Fatalf("set the workspace's storedExecutions: %d", code)
	}
	def := createDefinition(t, base, e.Ws, harness.OneTransform)
	var queued []string
	for range 3 {
		queued = append(queued, enqueueThroughAPI(t, base, e.Ws, def))
	}
	refused := func(when string) {
		t.Helper()
		req, err := http.NewRequest("POST", base+"/api/v1/workflow/executions/start",
			strings.NewReader(fmt.Sprintf(`{"workspaceId":%q,"workflowDefinitionId":%q}`, e.Ws, def)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+harness.TestAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var problem struct {
			Status int    `json:"status"`
			Detail string `json:"detail"`
			Title  string `json:"title"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&problem); err != nil {
			t.Fatalf("the fourth enqueue %s: %d, body not JSON: %v", when, resp.StatusCode, err)
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(problem.Detail+problem.Title, "stored executions") {
			t.Fatalf("the fourth enqueue %s: %d %s %+v, want 429 problem+json naming stored executions", when, resp.StatusCode, resp.Header.Get("Content-Type"), problem)
		}
		t.Logf("the fourth enqueue %s: %d %q", when, resp.StatusCode, problem.Detail)
	}
	refused("while three are queued")
	for _, q := range queued {
		e.WaitFor(harness.ExecutionOf(t, base, e.Ws, q), "COMPLETED")
	}
	refused("once three executions are stored")
}
