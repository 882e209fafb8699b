package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/cmd/sluice/service"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// hostileRecord is a node record with its input, as GET shows it.
type hostileRecord struct {
	Key    string          `json:"key"`
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
	Error  *string         `json:"error"`
}

// finalRecords waits for the execution to end and returns its status, its
// node records by key and the raw body GET answered.
func finalRecords(e *harness.E2E, id string) (string, map[string]hostileRecord, string) {
	e.T.Helper()
	e.WaitFor(id, "COMPLETED", "FAILED")
	req, err := http.NewRequest("GET", e.Base+"/api/v1/workflow/executions/"+id, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+harness.TestAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		e.T.Fatal(err)
	}
	var ex struct {
		Status string          `json:"status"`
		Nodes  []hostileRecord `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &ex); err != nil {
		e.T.Fatal(err)
	}
	byKey := map[string]hostileRecord{}
	for _, n := range ex.Nodes {
		byKey[n.Key] = n
	}
	return ex.Status, byKey, string(raw)
}

// TestHostileNodesAreRefusedAndRecorded runs what a hostile workspace would
// put in its nodes on the real stack: requests to the service's own network,
// a template that multiplies a large input, and a credential it templates
// into a header. Only 127.0.0.1 is allowed, for the one legitimate server.
// Host names are resolved by hostileResolver, which points two of them at
// special-purpose addresses.
func TestHostileNodesAreRefusedAndRecorded(t *testing.T) {
	resolver := hostileResolver(t, map[string]netip.Addr{
		"site-local.hostile.test": netip.MustParseAddr("fec0::1"),
		"special.hostile.test":    netip.MustParseAddr("192.0.0.8"),
	})
	base := harness.StartSluiceWith(t, map[string]string{"SLUICE_HTTP_NODE_ALLOW": "127.0.0.1/32"},
		fx.Decorate(func(c service.Config) service.Config { c.Nodes.Resolver = resolver; return c }))
	e := harness.NewE2E(t, base)

	t.Run("private targets are refused and the record names the rule", func(t *testing.T) {
		e.T = t
		for _, tt := range []struct{ url, want string }{
			{"http://169.254.169.254/latest/meta-data/iam/security-credentials/", "refused: 169.254.169.254 is link-local; allow it with SLUICE_HTTP_NODE_ALLOW"},
			{"http://127.0.0.2:8080/admin", "127.0.0.2 is loopback"},
			{"http://[::1]:8080/", "::1 is loopback"},
			{"http://10.0.0.1/", "10.0.0.1 is private (RFC 1918)"},
			{"http://[::ffff:192.168.1.1]/", "is private (RFC 1918)"},
			{"http://100.100.100.200/latest/meta-data/", "is shared address space"},
			{"http://[::a9fe:a9fe]/latest/meta-data/", "is link-local"},
			{"http://[2002:a9fe:a9fe::1]/latest/meta-data/", "is link-local"},
			{"http://[64:ff9b:1::a9fe:a9fe]/", "is local-use NAT64"},
			{"http://240.0.0.1/", "is reserved (240.0.0.0/4)"},
			{"http://198.18.0.1/", "is benchmarking (198.18.0.0/15)"},
			{"http://[fec0::1]/", "fec0::1 is outside IPv6 global unicast (2000::/3)"},
			{"http://192.0.0.8/", "192.0.0.8 is special-purpose (IANA, 192.0.0.0/24)"},
			{"http://site-local.hostile.test/", "site-local.hostile.test resolves to an address that is outside IPv6 global unicast (2000::/3)"},
			{"http://special.hostile.test/", "special.hostile.test resolves to an address that is special-purpose (IANA, 192.0.0.0/24)"},
			{"http://93.184.216.34:25/", "port 25 of 93.184.216.34 is outside the ports HTTP_REQUEST reaches"},
		} {
			id := e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": tt.url})}}, nil)
			status, nodes, _ := finalRecords(e, id)
			call := nodes["call"]
			if status != "FAILED" || call.Status != "FAILED" || call.Error == nil || !strings.Contains(*call.Error, tt.want) {
				got := "none"
				if call.Error != nil {
					got = *call.Error
				}
				t.Errorf("%s: execution %s, node %s, error %q; want FAILED naming %q", tt.url, status, call.Status, got, tt.want)
			}
		}
	})

	t.Run("a redirect to the metadata address is refused", func(t *testing.T) {
		e.T = t
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}))
		defer srv.Close()
		id := e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL})}}, nil)
		status, nodes, _ := finalRecords(e, id)
		if c := nodes["call"]; status != "FAILED" || c.Error == nil || !strings.Contains(*c.Error, "169.254.169.254 is link-local") {
			t.Errorf("execution %s, node %+v; want FAILED naming the refused address", status, c)
		}
	})

	t.Run("template amplification fails the node with a clear error", func(t *testing.T) {
		e.T = t
		graph := map[string]any{"nodes": []any{harness.Node("amplify", "TRANSFORM", map[string]any{
			"output": strings.Repeat("{{ input.s }}", 2000),
		})}}
		id := e.Start(graph, map[string]any{"s": strings.Repeat("x", 400<<10)})
		status, nodes, _ := finalRecords(e, id)
		a := nodes["amplify"]
		if status != "FAILED" || a.Status != "FAILED" || a.Error == nil ||
			!strings.Contains(*a.Error, "the budget is 1048576 bytes") || !strings.Contains(*a.Error, "SLUICE_NODE_TEMPLATE_BUDGET") {
			t.Errorf("execution %s, node %s, error %v; want FAILED naming the template budget", status, a.Status, a.Error)
		}
	})

	t.Run("a response body over its cap fails the node, not cut", func(t *testing.T) {
		e.T = t
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			_, _ = w.Write([]byte(strings.Repeat("a", 2<<20)))
		}))
		defer srv.Close()
		id := e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL})}}, nil)
		status, nodes, _ := finalRecords(e, id)
		c := nodes["call"]
		if status != "FAILED" || c.Error == nil || !strings.Contains(*c.Error, "over the limit of 1048576 bytes (SLUICE_HTTP_NODE_RESPONSE_MAX)") {
			t.Errorf("execution %s, node %+v; want FAILED naming the response cap", status, c)
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("the server got %d requests, want 1: an answer over the cap is not retried", n)
		}
	})

	t.Run("a templated Authorization header and query token are redacted", func(t *testing.T) {
		e.T = t
		var gotAuth atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotAuth.Store(r.Header.Get("Authorization") + " " + r.URL.Query().Get("access_token"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}))
		defer srv.Close()
		graph := map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{
			"url":     srv.URL + "/v1?access_token={{ input.token }}",
			"headers": map[string]any{"Authorization": "Bearer {{ input.token }}", "X-Api-Key": "{{ input.token }}"},
		})}}
		id := e.Start(graph, map[string]any{"token": "tok-hostile-s3cr3t"})
		status, nodes, raw := finalRecords(e, id)
		if status != "COMPLETED" {
			t.Fatalf("execution %s: %v", status, nodes["call"].Error)
		}
		if got, _ := gotAuth.Load().(string); got != "Bearer tok-hostile-s3cr3t tok-hostile-s3cr3t" {
			t.Errorf("the server got %q: the credential must still be sent", got)
		}
		in := string(nodes["call"].Input)
		if !strings.Contains(in, `"Authorization":"[redacted]"`) || !strings.Contains(in, `access_token=[redacted]`) {
			t.Errorf("recorded input %s, want the Authorization header and the query value redacted", in)
		}
		// The execution's own input is the tenant's data, shown as sent;
		// no node record may repeat the credential.
		for _, n := range nodes {
			if strings.Contains(string(n.Input)+string(n.Output), "s3cr3t") {
				t.Errorf("node %s record holds the credential", n.Key)
			}
		}
		if strings.Count(raw, "tok-hostile-s3cr3t") != 1 {
			t.Errorf("GET shows the credential %d times, want once (the execution input): %s", strings.Count(raw, "tok-hostile-s3cr3t"), raw)
		}
	})
}

// TestDefinitionsWhoseTemplatesCanNeverFitAreRefused saves a chain of
// TRANSFORMs that multiplies a literal past the node budget.
func TestDefinitionsWhoseTemplatesCanNeverFitAreRefused(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	graph := map[string]any{
		"nodes": []any{
			harness.Node("seed", "TRANSFORM", map[string]any{"output": strings.Repeat("x", 300<<10)}),
			harness.Node("grow", "TRANSFORM", map[string]any{"output": []any{
				"{{ steps.seed.output }}", "{{ steps.seed.output }}", "{{ steps.seed.output }}", "{{ steps.seed.output }}"}}),
		},
		"edges": []any{harness.Edge("seed", "grow")},
	}
	var problem struct {
		Errors []struct{ Path, Message string } `json:"errors"`
	}
	code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", harness.TestAdminToken,
		map[string]any{"workspaceId": e.Ws, "name": "amplifier", "graph": graph}, &problem)
	if code != 422 {
		t.Fatalf("save answered %d, want 422", code)
	}
	raw, _ := json.Marshal(problem)
	if !strings.Contains(string(raw), "/graph/nodes/1/config") || !strings.Contains(string(raw), "node template budget") {
		t.Errorf("problem %s, want it to name /graph/nodes/1/config and the budget", raw)
	}
}

// hostileHost is a tenant's host for the combination rows: it answers
// every path under /busy 429 with "Retry-After: 0", anything else 200,
// and counts the calls and the request bytes it was sent.
type hostileHost struct {
	*httptest.Server
	calls, bytes atomic.Int64
}

func newHostileHost(t *testing.T) *hostileHost {
	h := &hostileHost{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		h.calls.Add(1)
		h.bytes.Add(n)
		if strings.HasPrefix(r.URL.Path, "/busy") {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(h.Close)
	return h
}

// endsBySluice is what every combination row holds of a run: Sluice ended
// it (COMPLETED, or FAILED with a recorded cause), within the row's time;
// no record of it or of its children is left RUNNING; the server
// terminated none of its workflows; and its workspace's next run
// completes. It returns the run, its records and its history's events
// and bytes.
func endsBySluice(t *testing.T, base string, db *pgx.Conn, ws, id string, within time.Duration) (harness.NodeRun, []treeRecord, int64, int64) {
	t.Helper()
	ex := harness.WaitRun(t, base, id, within, "the run to end", func(r harness.NodeRun) bool { return r.Status == "COMPLETED" || r.Status == "FAILED" })
	if ex.Status == "FAILED" && (ex.Error == nil || *ex.Error == "") {
		t.Errorf("the run FAILED with no recorded cause")
	}
	recs := treeRecords(t, db, id)
	if left := stillRunning(recs); len(left) > 0 {
		t.Errorf("records left RUNNING: %v", left)
	}
	if n := terminatedRuns(t, id, recs); n > 0 {
		t.Errorf("%d workflows terminated by the server", n)
	}
	events, bytes := endedBySluice(t, id)
	next := startRun(t, base, ws, harness.DefineIn(t, base, ws, "next", harness.OneTransform))
	if r := harness.WaitRun(t, base, next, time.Minute, "the workspace's next run to end", func(r harness.NodeRun) bool {
		return r.Status == "COMPLETED" || r.Status == "FAILED"
	}); r.Status != "COMPLETED" {
		t.Errorf("the workspace's next run ended %s, want COMPLETED", r.Status)
	}
	return ex, recs, events, bytes
}

// recordedCause is the run's recorded error, or "".
func recordedCause(r harness.NodeRun) string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// TestHostileCombinationsEndBySluice runs, on the real stack, what a FREE
// workspace can do where features compose: each multiplier of the round
// three findings (Retry-After rounds, the worker's and a workspace's own,
// FOR_EACH iterations, SUB_WORKFLOW
// children, WAIT_FOR_EVENT events, item bytes, stored executions) taken
// together with another. Each row's run is ended by Sluice with a recorded
// cause, or refused with a 4xx naming the bound; none leaves a record
// RUNNING or a workflow for the server to terminate, and the workspace's
// next run completes.
//
// The stack is test-scoped so that each row takes seconds: 2 Retry-After
// rounds (SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS, default 10) with a floor of
// 100 ms (SLUICE_OUTBOUND_PAUSE_FLOOR, default 1 s), and history limits
// of 8 MiB (SLUICE_ENGINE_HISTORY_LIMIT, default 32 MiB) and 1,000 events
// (SLUICE_ENGINE_HISTORY_EVENTS_LIMIT, default 45,000). One row runs its
// own stack at the defaults.
func TestHostileCombinationsEndBySluice(t *testing.T) {
	const rounds = 2
	var quotas *worker.QuotaSnapshot
	base := harness.StartSluiceWith(t, map[string]string{
		"SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS": fmt.Sprint(rounds),
		"SLUICE_OUTBOUND_PAUSE_FLOOR":        "100ms",
		"SLUICE_ENGINE_HISTORY_LIMIT":        fmt.Sprint(8 << 20),
		"SLUICE_ENGINE_HISTORY_EVENTS_LIMIT": "1000",
		// Past the history limit, so that the events x bytes row meets
		// the history budget rather than the events' own bound (the row
		// at the defaults meets that).
		"SLUICE_EVENT_BYTES_PER_RUN": fmt.Sprint(64 << 20),
	}, fx.Populate(&quotas))
	db := connOf(t, base)
	forEach := func(items any, template map[string]any) map[string]any {
		return map[string]any{"nodes": []any{harness.Node("each", "FOR_EACH", map[string]any{"items": items, "node": template})}, "edges": []any{}}
	}
	strs := func(n, size int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = strings.Repeat(string(rune('a'+i%26)), size)
		}
		return out
	}

	t.Run("rounds: a one-node call to a host answering 429 Retry-After: 0", func(t *testing.T) {
		h := newHostileHost(t)
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		graph := map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": h.URL + "/busy"})}, "edges": []any{}}
		began := time.Now()
		id := startRun(t, base, ws, harness.DefineIn(t, base, ws, "busy", graph))
		ex, _, events, bytes := endsBySluice(t, base, db, ws, id, 2*time.Minute)
		t.Logf("FIGURE one call x %d rounds: %s after %s, the host saw %d calls; history %d events, %d bytes: %s",
			rounds, ex.Status, time.Since(began).Round(time.Millisecond), h.calls.Load(), events, bytes, recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "Retry-After rounds exhausted, over the maximum of 2") {
			t.Errorf("the run ended %s (%s), want FAILED naming the Retry-After rounds", ex.Status, recordedCause(ex))
		}
		if c := h.calls.Load(); c != rounds+1 {
			t.Errorf("the host saw %d calls, want the first and one per round: %d", c, rounds+1)
		}
	})

	t.Run("rounds: the same call in a workspace whose own retryAfterRounds is 1, under the worker's 2", func(t *testing.T) {
		h := newHostileHost(t)
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		if code := harness.Call(t, "PUT", base+"/api/v1/workspaces/"+ws+"/limits", harness.TestAdminToken,
			map[string]any{"maxRunning": nil, "retryAfterRounds": 1}, nil); code != http.StatusOK {
			t.Fatalf("setting the workspace's retryAfterRounds: %d", code)
		}
		id := domain.ID(uuid.MustParse(ws))
		porttest.Eventually(t, 5*time.Second, porttest.Holds("the worker's snapshot to show the workspace's rounds", func() bool {
			q, ok := quotas.Current(id, domain.PlanFree)
			return ok && q.RetryAfterRounds == 1
		}))
		graph := map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": h.URL + "/busy"})}, "edges": []any{}}
		run := startRun(t, base, ws, harness.DefineIn(t, base, ws, "busy", graph))
		ex, _, events, bytes := endsBySluice(t, base, db, ws, run, 2*time.Minute)
		t.Logf("FIGURE one call x the workspace's 1 round: %s, the host saw %d calls; history %d events, %d bytes: %s",
			ex.Status, h.calls.Load(), events, bytes, recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "over the maximum of 1 a node (the workspace's retryAfterRounds quota)") {
			t.Errorf("the run ended %s (%s), want FAILED naming the workspace's retryAfterRounds", ex.Status, recordedCause(ex))
		}
		if c := h.calls.Load(); c != 2 {
			t.Errorf("the host saw %d calls, want the first and one round: 2", c)
		}
	})

	t.Run("events: a FOR_EACH of 200 calls (PRO) ends at the history events limit", func(t *testing.T) {
		h := newHostileHost(t)
		ws := harness.NewE2EWithPlan(t, base, "PRO").Ws
		ints := make([]any, 200)
		for i := range ints {
			ints[i] = i
		}
		graph := forEach("{{ input.items }}", map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{"url": h.URL + "/ok/{{ item }}"}})
		began := time.Now()
		id := harness.ExecutionOf(t, base, ws, enqueueWith(t, base, ws, harness.DefineIn(t, base, ws, "long", graph), map[string]any{"items": ints}))
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, 2*time.Minute)
		t.Logf("FIGURE 200 iterations at an events limit of 1000: %s after %s, the host saw %d calls; history %d events, %d bytes; %d records: %s",
			ex.Status, time.Since(began).Round(time.Millisecond), h.calls.Load(), events, bytes, len(recs), recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "at the limit of 1000 (SLUICE_ENGINE_HISTORY_EVENTS_LIMIT") {
			t.Errorf("the run ended %s (%s), want FAILED naming the events limit", ex.Status, recordedCause(ex))
		}
		if c := h.calls.Load(); c >= 200 {
			t.Errorf("the host saw %d calls, want the iterations before the limit only", c)
		}
	})

	t.Run("children x nodes in flight: ten SUB_WORKFLOWs of a 10-minute DELAY hold FREE's 4 and are cancelled whole", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		id := startRun(t, base, ws, harness.DefineIn(t, base, ws, "ten", fanOutGraph(10, harness.DefineIn(t, base, ws, "wait", delayGraph("10m")))))
		peak := 0
		porttest.Eventually(t, time.Minute, porttest.Holds("the first children to wait in their DELAY", func() bool {
			recs := treeRecords(t, db, id)
			delays := 0
			for _, r := range recs {
				if r.typ == "DELAY" && r.status == "RUNNING" {
					delays++
				}
			}
			peak = max(peak, runningByDepth(recs)[0])
			return delays == freeNodesInFlight
		}))
		if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+id+"/cancel", harness.TestAdminToken, nil, nil); code != http.StatusAccepted {
			t.Fatalf("cancel: %d", code)
		}
		var recs []treeRecord
		porttest.Eventually(t, time.Minute, porttest.Holds("the tree to end", func() bool {
			var ex harness.NodeRun
			harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+id, harness.TestAdminToken, nil, &ex)
			recs = treeRecords(t, db, id)
			peak = max(peak, runningByDepth(recs)[0])
			return ex.Status == "CANCELLED" && len(stillRunning(recs)) == 0
		}))
		t.Logf("FIGURE ten SUB_WORKFLOWs of a 10-minute DELAY, FREE: at most %d open at once (nodesInFlight %d); CANCELLED with %d records, none RUNNING", peak, freeNodesInFlight, len(recs))
		if peak > freeNodesInFlight {
			t.Errorf("%d child runs open at once, over FREE's nodes in flight of %d", peak, freeNodesInFlight)
		}
		if n := terminatedRuns(t, id, recs); n > 0 {
			t.Errorf("%d workflows terminated by the server", n)
		}
		next := startRun(t, base, ws, harness.DefineIn(t, base, ws, "next", harness.OneTransform))
		harness.WaitRun(t, base, next, time.Minute, "the workspace's next run to complete", harness.StatusIs("COMPLETED"))
	})

	t.Run("children x graph bytes: three SUB_WORKFLOWs of a child whose graph carries 900 KB", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		child := harness.DefineIn(t, base, ws, "big", map[string]any{"nodes": []any{
			harness.Node("big", "TRANSFORM", map[string]any{"output": strings.Repeat("x", 900<<10)}),
			harness.Node("small", "TRANSFORM", map[string]any{"output": "done"}),
		}, "edges": []any{harness.Edge("big", "small")}})
		id := startRun(t, base, ws, harness.DefineIn(t, base, ws, "three", fanOutGraph(3, child)))
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, 2*time.Minute)
		t.Logf("FIGURE three children of a 900 KB graph: %s (%s); root history %d events, %d bytes; %d records", ex.Status, recordedCause(ex), events, bytes, len(recs))
	})

	t.Run("rounds x iterations: a FOR_EACH of calls to a host answering 429 Retry-After: 0", func(t *testing.T) {
		const items = 8
		h := newHostileHost(t)
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		graph := forEach("{{ input.items }}", map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{"url": h.URL + "/busy/{{ item }}"}})
		ints := make([]any, items)
		for i := range ints {
			ints[i] = i
		}
		began := time.Now()
		id := harness.ExecutionOf(t, base, ws, enqueueWith(t, base, ws, harness.DefineIn(t, base, ws, "rounds", graph), map[string]any{"items": ints}))
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, 2*time.Minute)
		t.Logf("FIGURE %d iterations x %d rounds: %s after %s, the host saw %d calls; history %d events, %d bytes; %d records: %s",
			items, rounds, ex.Status, time.Since(began).Round(time.Millisecond), h.calls.Load(), events, bytes, len(recs), recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "Retry-After rounds exhausted") {
			t.Errorf("the run ended %s (%s), want FAILED naming the Retry-After rounds", ex.Status, recordedCause(ex))
		}
		if c := h.calls.Load(); c > items*(rounds+1) {
			t.Errorf("the host saw %d calls, over %d iterations x (1 + %d rounds)", c, items, rounds)
		}
	})

	t.Run("bytes x rounds: a FOR_EACH of 100 x 10 KB items posting each to a host answering 429 Retry-After: 0", func(t *testing.T) {
		const items, size = 100, 10_000
		h := newHostileHost(t)
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		graph := forEach("{{ input.items }}", map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{
			"url": h.URL + "/busy", "method": "POST", "body": "{{ item }}"}})
		began := time.Now()
		id := harness.ExecutionOf(t, base, ws, enqueueWith(t, base, ws, harness.DefineIn(t, base, ws, "bytes", graph), map[string]any{"items": strs(items, size)}))
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, 2*time.Minute)
		t.Logf("FIGURE %d x %d B items x %d rounds: %s after %s, the host saw %d calls of %d bytes in all; history %d events, %d bytes; %d records: %s",
			items, size, rounds, ex.Status, time.Since(began).Round(time.Millisecond), h.calls.Load(), h.bytes.Load(), events, bytes, len(recs), recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "Retry-After rounds exhausted") {
			t.Errorf("the run ended %s (%s), want FAILED naming the Retry-After rounds", ex.Status, recordedCause(ex))
		}
		if c := h.calls.Load(); c > items*(rounds+1) {
			t.Errorf("the host saw %d calls, over %d iterations x (1 + %d rounds)", c, items, rounds)
		}
		// The run's 1 MB input is in the history once: each iteration, and
		// each of its rounds, carries its own element and not the whole.
		if limit := int64(items*size + items*size/2); bytes > limit {
			t.Errorf("the history is %d bytes after %d calls, over the input once and a half (%d): iterations carry more than their element", bytes, h.calls.Load(), limit)
		}
	})

	t.Run("children x rounds: SUB_WORKFLOWs whose child calls a host answering 429 Retry-After: 0", func(t *testing.T) {
		const children = 3
		h := newHostileHost(t)
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		child := harness.DefineIn(t, base, ws, "busy", map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": h.URL + "/busy"})}, "edges": []any{}})
		began := time.Now()
		id := startRun(t, base, ws, harness.DefineIn(t, base, ws, "children", fanOutGraph(children, child)))
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, 2*time.Minute)
		t.Logf("FIGURE %d children x %d rounds: %s after %s, the host saw %d calls; root history %d events, %d bytes; %d records: %s",
			children, rounds, ex.Status, time.Since(began).Round(time.Millisecond), h.calls.Load(), events, bytes, len(recs), recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "Retry-After rounds exhausted") {
			t.Errorf("the run ended %s (%s), want FAILED naming the Retry-After rounds", ex.Status, recordedCause(ex))
		}
		if c := h.calls.Load(); c > children*(rounds+1) {
			t.Errorf("the host saw %d calls, over %d children x (1 + %d rounds)", c, children, rounds)
		}
	})

	t.Run("children x iterations: a FOR_EACH cannot run SUB_WORKFLOWs or waits per element (422 naming the template's type)", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		child := harness.DefineIn(t, base, ws, "one", harness.OneTransform)
		for _, template := range []map[string]any{
			{"type": "SUB_WORKFLOW", "config": map[string]any{"definition": child}},
			{"type": "WAIT_FOR_EVENT", "config": map[string]any{"event": "e"}},
		} {
			code, problem, _ := createTimed(t, base, ws, "each", forEach("{{ input.items }}", template))
			t.Logf("FIGURE a FOR_EACH of %s: %d %s", template["type"], code, problem)
			if code != http.StatusUnprocessableEntity || !strings.Contains(problem, "/graph/nodes/0/config/node/type") {
				t.Errorf("a FOR_EACH of %s: %d %s, want 422 naming /graph/nodes/0/config/node/type", template["type"], code, problem)
			}
		}
	})

	t.Run("children x iterations x bytes: SUB_WORKFLOWs whose child posts each of its large items", func(t *testing.T) {
		const children, items, size = 3, 20, 40_000
		h := newHostileHost(t)
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		child := harness.DefineIn(t, base, ws, "poster", forEach("{{ input.items }}", map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{
			"url": h.URL + "/post", "method": "POST", "body": "{{ item }}"}}))
		nodes := make([]any, children)
		for i := range nodes {
			nodes[i] = harness.Node(fmt.Sprintf("s%d", i), "SUB_WORKFLOW", map[string]any{"definition": child, "input": map[string]any{"items": "{{ input.items }}"}})
		}
		parent := harness.DefineIn(t, base, ws, "children", map[string]any{"nodes": nodes, "edges": []any{}})
		began := time.Now()
		id := harness.ExecutionOf(t, base, ws, enqueueWith(t, base, ws, parent, map[string]any{"items": strs(items, size)}))
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, 2*time.Minute)
		t.Logf("FIGURE %d children x %d items of %d B: %s after %s, the host saw %d posts of %d bytes in all; root history %d events, %d bytes; %d records: %s",
			children, items, size, ex.Status, time.Since(began).Round(time.Millisecond), h.calls.Load(), h.bytes.Load(), events, bytes, len(recs), recordedCause(ex))
		if ex.Status != "COMPLETED" {
			t.Errorf("the run ended %s (%s), want COMPLETED: each child carries its own input, within every limit", ex.Status, recordedCause(ex))
		}
		if c := h.calls.Load(); c != children*items {
			t.Errorf("the host saw %d posts, want %d", c, children*items)
		}
	})

	t.Run("children x events: a child's WAIT_FOR_EVENT cannot be signalled through its parent", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		child := harness.DefineIn(t, base, ws, "waiter", map[string]any{"nodes": []any{
			harness.Node("approve", "WAIT_FOR_EVENT", map[string]any{"event": "approval", "timeout": "5s"})}, "edges": []any{}})
		id := startRun(t, base, ws, harness.DefineIn(t, base, ws, "parent", fanOutGraph(3, child)))
		var problem struct{ Detail string }
		code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+id+"/events", harness.TestAdminToken,
			map[string]any{"name": "approval", "payload": strings.Repeat("x", 900_000)}, &problem)
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, time.Minute)
		t.Logf("FIGURE an event for 3 children's WAIT_FOR_EVENT sent to the parent: %d %q; the run %s: %s; history %d events, %d bytes; %d records",
			code, problem.Detail, ex.Status, recordedCause(ex), events, bytes, len(recs))
		if code != http.StatusConflict || !strings.Contains(problem.Detail, `no WAIT_FOR_EVENT node for event "approval"`) {
			t.Errorf("the event answered %d %q, want 409: only the execution's own nodes take events", code, problem.Detail)
		}
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), `no event "approval" came within 5s`) {
			t.Errorf("the run ended %s (%s), want FAILED naming the children's timeout", ex.Status, recordedCause(ex))
		}
	})

	t.Run("events x bytes: large events kept for waits behind a DELAY are refused at the history limit", func(t *testing.T) {
		const waits, size = 10, 900_000
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		nodes := []any{harness.Node("d", "DELAY", map[string]any{"duration": "5s"})}
		var edges []any
		for i := range waits {
			k := fmt.Sprintf("w%d", i)
			nodes = append(nodes, harness.Node(k, "WAIT_FOR_EVENT", map[string]any{"event": k}))
			edges = append(edges, harness.Edge("d", k))
		}
		id := startRun(t, base, ws, harness.DefineIn(t, base, ws, "events", map[string]any{"nodes": nodes, "edges": edges}))
		accepted := 0
		for i := range waits {
			if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+id+"/events", harness.TestAdminToken,
				map[string]any{"name": fmt.Sprintf("w%d", i), "payload": strings.Repeat("x", size)}, nil); code == http.StatusAccepted {
				accepted++
			}
		}
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, time.Minute)
		t.Logf("FIGURE %d events of %d B for waits behind a DELAY: %d accepted; the run %s: %s; history %d events, %d bytes (limit %d); %d records",
			waits, size, accepted, ex.Status, recordedCause(ex), events, bytes, 8<<20, len(recs))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "SLUICE_ENGINE_HISTORY_LIMIT") {
			t.Errorf("the run ended %s (%s), want FAILED naming the history limit", ex.Status, recordedCause(ex))
		}
	})

	t.Run("events x bytes, at the default limits: the run's events are refused past their bound, long before Temporal's 50 MB", func(t *testing.T) {
		const waits, size = 20, 1_000_000
		defaults := harness.StartSluice(t, nil)
		ws := harness.NewE2EWithPlan(t, defaults, "FREE").Ws
		nodes := []any{harness.Node("d", "DELAY", map[string]any{"duration": "5s"})}
		var edges []any
		for i := range waits {
			k := fmt.Sprintf("w%d", i)
			nodes = append(nodes, harness.Node(k, "WAIT_FOR_EVENT", map[string]any{"event": k, "timeout": "10s"}))
			edges = append(edges, harness.Edge("d", k))
		}
		id := startRun(t, defaults, ws, harness.DefineIn(t, defaults, ws, "events", map[string]any{"nodes": nodes, "edges": edges}))
		accepted, refused := 0, map[int]int{}
		var lastProblem struct {
			Detail string
			Errors []struct{ Path string }
		}
		began := time.Now()
		for i := range waits {
			lastProblem.Detail, lastProblem.Errors = "", nil
			code := harness.Call(t, "POST", defaults+"/api/v1/workflow/executions/"+id+"/events", harness.TestAdminToken,
				map[string]any{"name": fmt.Sprintf("w%d", i), "payload": strings.Repeat("x", size)}, &lastProblem)
			if code == http.StatusAccepted {
				accepted++
			} else {
				refused[code]++
			}
		}
		sent := time.Since(began)
		ex, recs, events, bytes := endsBySluice(t, defaults, connOf(t, defaults), ws, id, 2*time.Minute)
		t.Logf("FIGURE %d events of %d B for waits behind a DELAY, default limits: %d accepted, refused %v (last: %q), in %s; the run %s: %s; history %d events, %d bytes; %d records",
			waits, size, accepted, refused, lastProblem.Detail, sent.Round(time.Millisecond), ex.Status, recordedCause(ex), events, bytes, len(recs))
		// A payload of size x's is a JSON string of size+2 bytes.
		want := domain.DefaultProcessQuotas().EventBytesPerRun / (size + 2)
		if accepted != want || refused[http.StatusTooManyRequests] != waits-want {
			t.Errorf("%d events accepted and %v refused, want %d accepted and the other %d refused 429 by the run's event bytes", accepted, refused, want, waits-want)
		}
		if !strings.Contains(lastProblem.Detail, "event payload bytes in one run") || len(lastProblem.Errors) != 1 || lastProblem.Errors[0].Path != "/payload" {
			t.Errorf("the last refusal said %q %+v, want the quota naming /payload", lastProblem.Detail, lastProblem.Errors)
		}
		if bytes > int64(domain.DefaultProcessQuotas().EventBytesPerRun)+1<<20 {
			t.Errorf("the run's history reached %d bytes, want its events' bound plus a little", bytes)
		}
	})

	t.Run("a save whose SUB_WORKFLOW tree multiplies past subWorkflowNodes is 422 naming it", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		leaves := make([]any, 11)
		for i := range leaves {
			leaves[i] = harness.Node(fmt.Sprintf("t%d", i), "TRANSFORM", map[string]any{"output": i})
		}
		child := harness.DefineIn(t, base, ws, "eleven", map[string]any{"nodes": leaves, "edges": []any{}})
		code, problem, took := createTimed(t, base, ws, "ten", fanOutGraph(10, child))
		t.Logf("FIGURE 10 SUB_WORKFLOWs of 11 nodes: %d in %s: %s", code, took.Round(time.Millisecond), problem)
		if code != http.StatusUnprocessableEntity || !strings.Contains(problem, "subWorkflowNodes quota of 100") {
			t.Errorf("the save answered %d %s, want 422 naming subWorkflowNodes", code, problem)
		}
	})

	t.Run("a child version pinned by number runs after a newer one is saved", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		one := func(out string) map[string]any {
			return map[string]any{"nodes": []any{harness.Node("t", "TRANSFORM", map[string]any{"output": out})}, "edges": []any{}}
		}
		child := harness.DefineIn(t, base, ws, "pinned", one("version one"))
		parent := harness.DefineIn(t, base, ws, "pins", map[string]any{"nodes": []any{
			harness.Node("s", "SUB_WORKFLOW", map[string]any{"definition": child, "version": 1})}, "edges": []any{}})
		if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions/"+child+"/versions", harness.TestAdminToken, map[string]any{"graph": one("version two")}, nil); code != http.StatusCreated {
			t.Fatalf("the child's version 2: %d", code)
		}
		id := startRun(t, base, ws, parent)
		ex, _, _, _ := endsBySluice(t, base, db, ws, id, time.Minute)
		out, _ := json.Marshal(ex.Nodes)
		t.Logf("FIGURE a parent pinning version 1 of a child now at version 2: %s, records %s", ex.Status, out)
		if ex.Status != "COMPLETED" || !strings.Contains(string(out), "version one") || strings.Contains(string(out), "version two") {
			t.Errorf("the run ended %s with records %s, want COMPLETED running version 1", ex.Status, out)
		}
	})

	t.Run("a bulk enqueue into a workspace at its storedExecutions quota is 429 naming it", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		if code := harness.Call(t, "PUT", base+"/api/v1/workspaces/"+ws+"/limits", harness.TestAdminToken,
			map[string]any{"maxRunning": nil, "storedExecutions": 3}, nil); code != http.StatusOK {
			t.Fatalf("set the workspace's storedExecutions: %d", code)
		}
		def := harness.DefineIn(t, base, ws, "bulk", harness.OneTransform)
		bulk := func(n int) (int, string) {
			items := make([]any, n)
			for i := range items {
				items[i] = map[string]any{"input": map[string]any{"i": i}}
			}
			var problem struct{ Title, Detail string }
			code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start-batch", harness.TestAdminToken,
				map[string]any{"workspaceId": ws, "workflowDefinitionId": def, "items": items}, &problem)
			return code, problem.Title + ": " + problem.Detail
		}
		over, overProblem := bulk(4)
		within, _ := bulk(3)
		atQuota, atProblem := bulk(1)
		t.Logf("FIGURE storedExecutions 3: a bulk of 4 %d %q; of 3 %d; then of 1 %d %q", over, overProblem, within, atQuota, atProblem)
		if over != http.StatusTooManyRequests || !strings.Contains(overProblem, "stored executions") {
			t.Errorf("a bulk of 4 past a quota of 3: %d %q, want 429 naming stored executions", over, overProblem)
		}
		if within != http.StatusAccepted {
			t.Errorf("a bulk of 3 within the quota: %d, want 202", within)
		}
		if atQuota != http.StatusTooManyRequests || !strings.Contains(atProblem, "stored executions") {
			t.Errorf("a bulk of 1 at the quota: %d %q, want 429 naming stored executions", atQuota, atProblem)
		}
	})
	t.Run("children x nodes in flight: ten TEMPORAL_WORKFLOWs on a queue no worker polls hold FREE's 4 and fail at their timeout naming the queue", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		const queue = "hostile-nobody-polls"
		allowQueue(t, base, ws, queue)
		nodes := make([]any, 10)
		for i := range nodes {
			nodes[i] = harness.Node(fmt.Sprintf("t%d", i), "TEMPORAL_WORKFLOW", map[string]any{"workflowType": "Anything", "taskQueue": queue, "executionTimeout": "3s"})
		}
		began := time.Now()
		id := startRun(t, base, ws, harness.DefineIn(t, base, ws, "unpolled", map[string]any{"nodes": nodes, "edges": []any{}}))
		peak := 0
		ex := harness.WaitRun(t, base, id, 2*time.Minute, "the run to end", func(r harness.NodeRun) bool {
			running := 0
			for _, r := range treeRecords(t, db, id) {
				if r.status == "RUNNING" {
					running++
				}
			}
			peak = max(peak, running)
			return r.Status == "COMPLETED" || r.Status == "FAILED"
		})
		recs := treeRecords(t, db, id)
		t.Logf("FIGURE ten children on an unpolled queue, FREE: %s after %s, at most %d open at once (nodesInFlight %d), %d records: %s",
			ex.Status, time.Since(began).Round(time.Millisecond), peak, freeNodesInFlight, len(recs), recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), `no worker on task queue "`+queue+`"`) {
			t.Errorf("the run ended %s (%s), want FAILED naming the team's queue", ex.Status, recordedCause(ex))
		}
		if peak > freeNodesInFlight {
			t.Errorf("%d children open at once, over FREE's nodes in flight of %d", peak, freeNodesInFlight)
		}
		if left := stillRunning(recs); len(left) > 0 {
			t.Errorf("records left RUNNING: %v", left)
		}
		next := startRun(t, base, ws, harness.DefineIn(t, base, ws, "next", harness.OneTransform))
		harness.WaitRun(t, base, next, time.Minute, "the workspace's next run to complete", harness.StatusIs("COMPLETED"))
	})

	t.Run("input x workflow id: a workflowIdSuffix from 10 KB of input fails the node naming the bound, starting nothing", func(t *testing.T) {
		ws := harness.NewE2EWithPlan(t, base, "FREE").Ws
		const queue = "hostile-suffix"
		allowQueue(t, base, ws, queue)
		graph := map[string]any{"nodes": []any{harness.Node("team", "TEMPORAL_WORKFLOW", map[string]any{
			"workflowType": "Anything", "taskQueue": queue, "workflowIdSuffix": "{{ input.id }}"})}, "edges": []any{}}
		def := harness.DefineIn(t, base, ws, "suffix", graph)
		id := harness.ExecutionOf(t, base, ws, enqueueWith(t, base, ws, def, map[string]any{"id": strings.Repeat("i", 10<<10)}))
		ex, recs, events, bytes := endsBySluice(t, base, db, ws, id, time.Minute)
		t.Logf("FIGURE a 10 KB workflow id suffix: %s; history %d events, %d bytes; %d records: %s", ex.Status, events, bytes, len(recs), recordedCause(ex))
		if ex.Status != "FAILED" || !strings.Contains(recordedCause(ex), "over the maximum of 200") {
			t.Errorf("the run ended %s (%s), want FAILED naming the suffix's bound", ex.Status, recordedCause(ex))
		}
	})
}

// allowQueue puts queue, for any workflow type, on ws's allow-list.
func allowQueue(t *testing.T, base, ws, queue string) {
	t.Helper()
	if code := harness.Call(t, "PUT", base+"/api/v1/workspaces/"+ws+"/allowed-workflows", harness.TestAdminToken,
		map[string]any{"taskQueue": queue}, nil); code != http.StatusOK {
		t.Fatalf("allowing %s: %d", queue, code)
	}
}

// enqueueWith enqueues a run of def in ws with input and returns its queue
// item.
func enqueueWith(t *testing.T, base, ws, def string, input map[string]any) string {
	t.Helper()
	var q struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": ws, "workflowDefinitionId": def, "input": input}, &q); code != http.StatusAccepted {
		t.Fatalf("start: %d", code)
	}
	return q.QueueID
}

// connOf opens a connection to the database of the sluice started at
// base, for treeRecords.
func connOf(t *testing.T, base string) *pgx.Conn {
	t.Helper()
	db, err := pgx.Connect(context.Background(), harness.AppsByBase[base].DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// hostileResolver answers DNS queries over UDP from names, with one A or
// AAAA record for a name it holds and no record otherwise, so that an
// HTTP_REQUEST can name a host that resolves to an address the guard
// refuses. It returns a resolver that asks only it.
func hostileResolver(t *testing.T, names map[string]netip.Addr) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if answer := dnsAnswer(buf[:n], names); answer != nil {
				_, _ = conn.WriteTo(answer, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", conn.LocalAddr().String())
	}}
}

// dnsAnswer is the response to one DNS query (RFC 1035 4.1): its header
// and question echoed, and an answer when names holds the name with an
// address of the type asked; nil for what is not a query of one question.
func dnsAnswer(q []byte, names map[string]netip.Addr) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	question := q[12 : i+5]
	out := append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, question...)
	addr, ok := names[strings.ToLower(strings.Join(labels, "."))]
	const typeA, typeAAAA = 1, 28
	if !ok || (qtype == typeA) != addr.Is4() || (qtype != typeA && qtype != typeAAAA) {
		return out
	}
	out[7] = 1 // one answer
	rdata := addr.AsSlice()
	out = append(out, 0xc0, 12) // the question's name
	out = binary.BigEndian.AppendUint16(out, qtype)
	out = binary.BigEndian.AppendUint16(out, 1)  // class IN
	out = binary.BigEndian.AppendUint32(out, 60) // TTL
	out = binary.BigEndian.AppendUint16(out, uint16(len(rdata)))
	return append(out, rdata...)
}
