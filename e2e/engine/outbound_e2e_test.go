package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// hits records when a test server was called, per path.
type hits struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (h *hits) add(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[string][]time.Time{}
	}
	h.at[path] = append(h.at[path], time.Now())
	return len(h.at[path])
}

func (h *hits) of(path string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.at[path])
}

// TestARetryAfterPausesTheHostForItsWorkspaceOnly: an upstream answers
// workspace A's first three calls 429 with Retry-After: 2. A's node waits
// each pause out and completes, its record at attempt 1 although the
// worker allows only 2 attempts; the calls are at least 2 s apart. Meanwhile
// workspace B calls the same host and is not held by A's pause (its call
// comes before A's first pause ends), nor by a worker slot: the
// external-API worker has one slot, which A's waiting node does not hold.
// The pause is listed among A's paused hosts, and not among B's.
func TestARetryAfterPausesTheHostForItsWorkspaceOnly(t *testing.T) {
	const refusals = 3
	var h hits
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := h.add(r.URL.Path); r.URL.Path == "/a" && n <= refusals {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_NODE_MAX_ATTEMPTS":               "2",
		"SLUICE_WORKER_EXTERNAL_API_CONCURRENCY": "1",
	})
	a, b := harness.NewE2EWithPlan(t, base, "PRO"), harness.NewE2EWithPlan(t, base, "PRO")
	graph := func(path string) map[string]any {
		return map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + path})}}
	}
	began := time.Now()
	idA := a.StartIn(graph("/a"), nil)
	waitForHits(t, &h, "/a", 1)

	startB := time.Now()
	idB := b.StartIn(graph("/b"), nil)
	exB := b.WaitFor(idB, "COMPLETED", "FAILED")
	tookB := time.Since(startB)

	// While A's node waits out its pauses, A's host is listed as paused
	// for A, past its first 429, and for no other workspace.
	type pause struct {
		Host        string
		PausedUntil time.Time
	}
	var pausedA, pausedB []pause
	porttest.Eventually(t, 10*time.Second, porttest.Holds("A's host listed as paused", func() bool {
		pausedA = nil
		harness.Call(t, "GET", base+"/api/v1/workspaces/"+a.Ws+"/outbound-pauses", harness.TestAdminToken, nil, &pausedA)
		return len(pausedA) == 1
	}))
	if pausedA[0].Host != "127.0.0.1" || pausedA[0].PausedUntil.Before(h.of("/a")[0].Add(time.Second)) {
		t.Errorf("A's pauses: %+v, want 127.0.0.1 paused past its first 429", pausedA)
	}
	if code := harness.Call(t, "GET", base+"/api/v1/workspaces/"+b.Ws+"/outbound-pauses", harness.TestAdminToken, nil, &pausedB); code != http.StatusOK || len(pausedB) != 0 {
		t.Errorf("B's pauses: %d %+v, want 200 and none: A's pause is A's", code, pausedB)
	}

	exA := a.WaitFor(idA, "COMPLETED", "FAILED")
	tookA := time.Since(began)
	callsA, callsB := h.of("/a"), h.of("/b")
	t.Logf("A: %d calls, COMPLETED %s after enqueue; B: enqueue to %s in %s, its call %s after A's first 429",
		len(callsA), tookA.Round(time.Millisecond), exB.Status, tookB.Round(time.Millisecond), callsB[0].Sub(callsA[0]).Round(time.Millisecond))
	if exA.Status != "COMPLETED" {
		t.Fatalf("A's execution ended %s (%v), want COMPLETED after the pauses", exA.Status, exA.Error)
	}
	if n := exA.Node("call"); n.Status != "COMPLETED" || n.Attempt != 1 {
		t.Errorf("A's node: %s at attempt %d, want COMPLETED at attempt 1 (the 429s spend no attempt)", n.Status, n.Attempt)
	}
	if len(callsA) != refusals+1 {
		t.Errorf("A's host saw %d calls, want %d (3 refused, 1 answered)", len(callsA), refusals+1)
	}
	for i := 1; i < len(callsA); i++ {
		if gap := callsA[i].Sub(callsA[i-1]); gap < 2*time.Second-50*time.Millisecond {
			t.Errorf("A's call %d came %s after the 429 before it, inside its Retry-After of 2s", i+1, gap)
		}
	}
	if exB.Status != "COMPLETED" {
		t.Fatalf("B's execution ended %s (%v)", exB.Status, exB.Error)
	}
	// B is not held by A's pause: B, enqueued after A's first 429, has
	// its call answered before that 2 s pause ends (200 ms to spare).
	if d := callsB[0].Sub(callsA[0]); d > 1800*time.Millisecond {
		t.Errorf("B's call came %s after A's first 429 (B's run took %s from enqueue), want within 1.8s: it waited for A's pause of its host", d, tookB)
	}
	if len(callsB) != 1 || !callsB[0].Before(callsA[len(callsA)-1]) {
		t.Errorf("B's call (%v) did not come while A's host was paused (A's last call %v)", callsB, callsA[len(callsA)-1])
	}
	// Each 429 paused the host, and A's node waited each pause out: the
	// waits' time adds up to about the three pauses of 2 s.
	pauses := metricValue(t, base, `outbound_retry_after_pauses_total{outcome="host_paused"}`)
	waits := metricValue(t, base, `outbound_wait_seconds_count{reason="pause"}`)
	waited := metricValue(t, base, `outbound_wait_seconds_sum{reason="pause"}`)
	t.Logf("metrics: %g pauses, %g pause waits of %.2f s in all", pauses, waits, waited)
	if pauses != refusals {
		t.Errorf("outbound_retry_after_pauses_total{outcome=host_paused} = %g, want %d (one per 429)", pauses, refusals)
	}
	if waits < refusals || waited < refusals*1.5 || waited > refusals*2+0.5 {
		t.Errorf("outbound_wait_seconds{reason=pause}: %g waits of %.2f s, want at least %d waits of about %d s in all", waits, waited, refusals, refusals*2)
	}
}

// TestAHostLimitHoldsTheWorkspacesCallsToItsRate: a workspace limits a
// host to 4 calls a second with a burst of 2, and one execution fans out
// 10 HTTP nodes to it. The calls arrive no faster than the rate: the first
// to the last take at least (10-2)/4 = 2 s, and no window holds more than
// the burst plus the rate's share of it.
func TestAHostLimitHoldsTheWorkspacesCallsToItsRate(t *testing.T) {
	const calls, rate, burst = 10, 4.0, 2
	var h hits
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.add("/")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()
	base := harness.StartSluice(t, nil)
	e := harness.NewE2EWithPlan(t, base, "ENTERPRISE")
	var set map[string]any
	if code := harness.Call(t, "PUT", base+"/api/v1/workspaces/"+e.Ws+"/outbound-limits/127.0.0.1", harness.TestAdminToken,
		map[string]any{"requestsPerSecond": rate, "burst": burst}, &set); code != http.StatusOK {
		t.Fatalf("setting the host's limit: %d", code)
	}
	nodes := make([]any, calls)
	for i := range nodes {
		nodes[i] = harness.Node(fmt.Sprintf("n%02d", i), "HTTP_REQUEST", map[string]any{"url": fmt.Sprintf("%s/%d", srv.URL, i)})
	}
	began := time.Now()
	ex := e.WaitFor(e.StartIn(map[string]any{"nodes": nodes}, nil), "COMPLETED", "FAILED")
	took := time.Since(began)
	if ex.Status != "COMPLETED" {
		t.Fatalf("execution ended %s (%v)", ex.Status, ex.Error)
	}
	at := h.of("/")
	if len(at) != calls {
		t.Fatalf("the host saw %d calls, want %d", len(at), calls)
	}
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	span := at[len(at)-1].Sub(at[0])
	want := time.Duration(float64(calls-burst) / rate * float64(time.Second))
	t.Logf("%d calls at %g/s with a burst of %d: first to last %s (bound %s), enqueue to COMPLETED %s",
		calls, rate, burst, span.Round(time.Millisecond), want, took.Round(time.Millisecond))
	// Each call is admitted at the rate on the database's clock just
	// before it goes; jitter allows for the milliseconds between that and
	// its arrival here.
	const jitter = 50 * time.Millisecond
	if span < want-jitter {
		t.Errorf("%d calls took %s from first to last, under (N-burst)/rate = %s", calls, span, want)
	}
	for i := range at {
		for j := i + 1; j < len(at); j++ {
			window := at[j].Sub(at[i]) + jitter
			if allowed := burst + int(window.Seconds()*rate); j-i+1 > allowed {
				t.Errorf("%d calls within %s, over the burst plus the rate (%d)", j-i+1, at[j].Sub(at[i]), allowed)
			}
		}
	}
	if span > want+10*time.Second {
		t.Errorf("%d calls took %s, far past the rate's %s: the limit held them back for too long", calls, span, want)
	}
	// The nodes past the burst each waited for a slot of the rate, and
	// none waited on a pause: no upstream asked for one.
	rateWaits := metricValue(t, base, `outbound_wait_seconds_count{reason="rate"}`)
	rateWaited := metricValue(t, base, `outbound_wait_seconds_sum{reason="rate"}`)
	refused := metricValue(t, base, `outbound_send_refusals_total`)
	t.Logf("metrics: %g rate waits of %.2f s in all, %g refused at send time", rateWaits, rateWaited, refused)
	if rateWaits < calls-burst {
		t.Errorf("outbound_wait_seconds_count{reason=rate} = %g, want at least %d (every node past the burst waits)", rateWaits, calls-burst)
	}
	if rateWaited < want.Seconds() {
		t.Errorf("outbound_wait_seconds_sum{reason=rate} = %.2f s, under the last node's wait of %s", rateWaited, want)
	}
	if p := metricValue(t, base, `outbound_wait_seconds_count{reason="pause"}`); p != 0 {
		t.Errorf("outbound_wait_seconds_count{reason=pause} = %g, want 0: no host was paused", p)
	}
}

// waitForHits waits until the server has seen n calls to path.
func waitForHits(t *testing.T, h *hits, path string, n int) {
	t.Helper()
	porttest.Eventually(t, 60*time.Second, porttest.Holds(fmt.Sprintf("%d calls to %s", n, path), func() bool { return len(h.of(path)) >= n }))
}
