package engine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// TestARetryAfterOfZeroWaitsTheFloorAndEndsAfterTheRounds: an upstream
// answering 429 with "Retry-After: 0" for ever. Each round waits the
// floor (2 s here), never less, and the third round's answer fails the
// node, naming the rounds, the host and the status: the host sees the
// first call and one per round waited, 3 in all.
func TestARetryAfterOfZeroWaitsTheFloorAndEndsAfterTheRounds(t *testing.T) {
	t.Parallel()
	srv, calls := retryAfterServer(t, 1000, "0")
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "call", "type": "HTTP_REQUEST", "config": {"url": "%s/x"}}]}`, srv.URL))
	h.wf.Limits = RunLimits{OutboundPauses: domain.OutboundPauses{Floor: 2 * time.Second, Rounds: 2}}
	var mu sync.Mutex
	var timers []time.Duration
	h.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		timers = append(timers, d)
	})
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed {
		t.Fatalf("status = %s (%s), want FAILED", res.Status, res.Error)
	}
	rec := h.record("call")
	for _, want := range []string{"Retry-After rounds exhausted", "over the maximum of 2", "SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS", "127.0.0.1 answered 429"} {
		if rec.Status != domain.NodeFailed || !strings.Contains(rec.Error, want) {
			t.Errorf("node: %s %q, want FAILED naming %q", rec.Status, rec.Error, want)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the upstream saw %d calls, want 3 (the first and one per round)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(timers) != 2 || timers[0] != 2*time.Second || timers[1] != 2*time.Second {
		t.Errorf("timers = %v, want the floor of 2s once per round", timers)
	}
}

// TestTheHistoryBudgetEndsARetryAfterLoopAtTheEventsLimit: rounds and
// waits left unbounded, an upstream answering 429 for ever; once the
// history holds the events limit, the next round is refused and the node
// fails naming the limit and its variable, with every record ended.
func TestTheHistoryBudgetEndsARetryAfterLoopAtTheEventsLimit(t *testing.T) {
	t.Parallel()
	srv, calls := retryAfterServer(t, 1_000_000, "1")
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "call", "type": "HTTP_REQUEST", "config": {"url": "%s/x"}}]}`, srv.URL))
	h.wf.Limits = RunLimits{HistoryEventsLimit: 5000, OutboundPauses: domain.OutboundPauses{Max: 24 * time.Hour, Rounds: 1000}}
	// The history reaches the limit 10 s into the run (its figures are
	// the server's, which the test environment leaves to the test).
	h.env.RegisterDelayedCallback(func() { h.env.SetCurrentHistoryLength(5000) }, 10*time.Second)
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, "SLUICE_ENGINE_HISTORY_EVENTS_LIMIT") {
		t.Fatalf("result = %s (%s), want FAILED naming SLUICE_ENGINE_HISTORY_EVENTS_LIMIT", res.Status, res.Error)
	}
	rec := h.record("call")
	if rec.Status != domain.NodeFailed || !strings.Contains(rec.Error, "5000 events, at the limit of 5000") {
		t.Errorf("node: %s %q, want FAILED naming the events limit", rec.Status, rec.Error)
	}
	// About one call a second for the 10 s before the limit.
	if n := calls.Load(); n < 5 || n > 15 {
		t.Errorf("the upstream saw %d calls, want about 10", n)
	}
	h.wantCompletion(domain.ExecutionFailed, res.Error)
}

// TestTheHistoryBudgetStopsForEachIterationsAtTheBytesLimit: a FOR_EACH
// of 20 HTTP iterations whose history passes the bytes limit after the
// first ones: no further iteration starts, the FOR_EACH fails naming the
// limit, and no record is left RUNNING.
func TestTheHistoryBudgetStopsForEachIterationsAtTheBytesLimit(t *testing.T) {
	t.Parallel()
	// Each path is answered 429 with Retry-After: 1 once, so that the
	// iterations, 4 at a time (FREE's nodes in flight), take time.
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := !seen[r.URL.Path]
		seen[r.URL.Path] = true
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input }}",
		"node": {"type": "HTTP_REQUEST", "config": {"url": "%s/{{ item }}"}}}}]}`, srv.URL)).withInput(`[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19]`)
	h.wf.Limits = RunLimits{HistoryLimit: 2 << 20}
	h.env.RegisterDelayedCallback(func() { h.env.SetCurrentHistorySize(2 << 20) }, 1500*time.Millisecond)
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, "SLUICE_ENGINE_HISTORY_LIMIT") {
		t.Fatalf("result = %s (%s), want FAILED naming SLUICE_ENGINE_HISTORY_LIMIT", res.Status, res.Error)
	}
	ran := map[string]bool{}
	for _, key := range h.ranKeys() {
		ran[key] = true
	}
	if n := len(ran); n >= 20 || n < 4 {
		t.Errorf("%d iterations ran, want the first ones only", n)
	}
	for key, status := range h.store.statuses(h.execID) {
		if status == domain.NodeRunning {
			t.Errorf("%s left RUNNING", key)
		}
	}
	if rec := h.record("each"); rec.Status != domain.NodeFailed || !strings.Contains(rec.Error, "the limit of 2097152 (SLUICE_ENGINE_HISTORY_LIMIT") {
		t.Errorf("each: %s %q, want FAILED naming the history limit", rec.Status, rec.Error)
	}
}

// TestForEachIterationsCarryOnlyWhatTheirTemplateReads: a FOR_EACH over
// 10 elements of 10 KB, each iteration posting its element: an
// iteration's activity input is its element and what the template reads
// (here nothing of the execution input), not the whole 100 KB array
// again, so the history grows by the elements once, not by the array
// per iteration.
func TestForEachIterationsCarryOnlyWhatTheirTemplateReads(t *testing.T) {
	t.Parallel()
	srv, _ := retryAfterServer(t, 0, "0")
	items := make([]string, 10)
	for i := range items {
		items[i] = strings.Repeat(string(rune('a'+i)), 10_000)
	}
	input, err := json.Marshal(map[string]any{"list": items, "tag": "t"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input.list }}",
		"node": {"type": "HTTP_REQUEST", "config": {"url": "%s/x", "method": "POST", "body": {"v": "{{ item }}", "tag": "{{ input.tag }}"}}}}}]}`, srv.URL)).withInput(string(input))
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.inputs) != 10 {
		t.Fatalf("%d iterations ran, want 10", len(h.inputs))
	}
	for _, in := range h.inputs {
		if in.Iteration == nil || len(in.Iteration.Item) != 10_002 {
			t.Errorf("%s: iteration %+v, want its 10 KB element", in.Node.Key, in.Iteration)
			continue
		}
		if got := string(in.Input); got != `{"tag":"t"}` {
			t.Errorf("%s carries %d bytes of the execution input (%.40s…), want only what its template reads: {\"tag\":\"t\"}", in.Node.Key, len(in.Input), got)
		}
	}
}
