package engine

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// activeIn is the number of executions a workspace holds slots for.
func activeIn(t testing.TB, base, ws string) int {
	t.Helper()
	var w struct{ Active int }
	harness.Call(t, "GET", base+"/api/v1/workspaces/"+ws, harness.TestAdminToken, nil, &w)
	return w.Active
}

func TestANodesRetryPolicyDecidesItsAttemptsAndFinalStatuses(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	var flaky, notFound atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			flaky.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			notFound.Add(1)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()

	// Five attempts where the worker's default is three, 50 ms apart.
	five := harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/flaky"})
	five["retry"] = map[string]any{"maxAttempts": 5, "initialInterval": "50ms", "backoffCoefficient": 1}
	ex := e.WaitFor(e.Start(map[string]any{"nodes": []any{five}}, nil), "COMPLETED", "FAILED")
	if ex.Status != "FAILED" || flaky.Load() != 5 {
		t.Fatalf("a 503 under maxAttempts 5: %s after %d requests; want FAILED after 5", ex.Status, flaky.Load())
	}

	// A 404 is final by default; listing only 400 as final retries it.
	retried := harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/gone"})
	retried["retry"] = map[string]any{"maxAttempts": 2, "initialInterval": "50ms", "finalStatuses": []int{400}}
	ex = e.WaitFor(e.Start(map[string]any{"nodes": []any{retried}}, nil), "COMPLETED", "FAILED")
	if ex.Status != "FAILED" || notFound.Load() != 2 {
		t.Fatalf("a 404 not listed final under maxAttempts 2: %s after %d requests; want FAILED after 2", ex.Status, notFound.Load())
	}
}

func TestANodesTimeoutEndsEachAttempt(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	var calls atomic.Int32
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	slow := harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL})
	slow["timeout"] = "1s"
	slow["retry"] = map[string]any{"maxAttempts": 2, "initialInterval": "50ms"}
	ex := e.WaitFor(e.Start(map[string]any{"nodes": []any{slow}}, nil), "COMPLETED", "FAILED")
	if ex.Status != "FAILED" || calls.Load() != 2 || ex.Error == nil || !strings.Contains(*ex.Error, "timed out") {
		t.Fatalf("a hanging endpoint under a 1 s timeout, 2 attempts: %s, %d requests, error %v", ex.Status, calls.Load(), ex.Error)
	}
}

func TestARunPastItsDeadlineIsCancelledAndFreedWithinASecond(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2EWithPlan(t, base, "FREE")
	graph := map[string]any{
		"runTimeout": "3s",
		"nodes":      []any{harness.Node("wait", "DELAY", map[string]any{"duration": "1h"}), harness.Node("after", "TRANSFORM", map[string]any{"output": 1})},
		"edges":      []any{harness.Edge("wait", "after")},
	}
	id := e.StartIn(graph, nil)
	var started time.Time
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the run to start", func() bool {
		var ex struct {
			StartedAt *time.Time `json:"startedAt"`
		}
		harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+id, harness.TestAdminToken, nil, &ex)
		if ex.StartedAt != nil {
			started = *ex.StartedAt
		}
		return ex.StartedAt != nil
	}))
	var freedAt time.Time
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the slot to be freed", func() bool {
		freedAt = time.Now()
		return activeIn(t, base, e.Ws) == 0
	}))
	ex := e.WaitFor(id, "CANCELLED")
	// The deadline counts from the workflow's start, which follows the
	// recorded start; the slot must be free within a second of it.
	if late := freedAt.Sub(started.Add(3 * time.Second)); late > time.Second {
		t.Fatalf("slot freed %s after the deadline; want within 1s", late)
	} else {
		t.Logf("slot freed %s after the deadline (counted from the recorded start)", late)
	}
	if ex.Error == nil || !strings.Contains(*ex.Error, "run deadline of 3s passed") {
		t.Fatalf("execution error %v; want the deadline named", ex.Error)
	}
	if w, a := ex.Node("wait"), ex.Node("after"); w.Status != "CANCELLED" || a.Status != "SKIPPED" {
		t.Fatalf("records past the deadline: wait %s, after %s; want CANCELLED, SKIPPED", w.Status, a.Status)
	}

	// An enqueue's own, shorter deadline wins over the version's.
	var def struct {
		Items []struct{ ID string } `json:"items"`
	}
	harness.Call(t, "GET", base+"/api/v1/workflow/definitions?workspaceId="+e.Ws, harness.TestAdminToken, nil, &def)
	var q struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": e.Ws, "workflowDefinitionId": def.Items[0].ID, "runTimeout": "1s"}, &q); code != 202 {
		t.Fatalf("enqueue with a run deadline: %d", code)
	}
	ex = e.WaitFor(harness.ExecutionOf(t, base, e.Ws, q.QueueID), "CANCELLED")
	if ex.Error == nil || !strings.Contains(*ex.Error, "run deadline of 1s passed") {
		t.Fatalf("execution error %v; want the enqueue's deadline named", ex.Error)
	}
}

// TestAStartNoWorkerPicksUpFailsNamingItsQueueAndFreesItsSlot runs a
// sluice whose worker polls only the external-API queue, so the
// executions' workflow queue has no worker: the FREE workspace's first
// run fails, naming that queue, once SLUICE_STUCK_START_AFTER passes, and
// its slot goes to the next item.
func TestAStartNoWorkerPicksUpFailsNamingItsQueueAndFreesItsSlot(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_WORKER_QUEUES":              "external-api",
		"SLUICE_STUCK_START_AFTER":          "2s",
		"SLUICE_DISPATCH_RECONCILE_AFTER":   "0s",
		"SLUICE_DISPATCH_RECOVERY_INTERVAL": "200ms",
	})
	e := harness.NewE2EWithPlan(t, base, "FREE")
	graph := map[string]any{"nodes": []any{harness.Node("a", "TRANSFORM", map[string]any{"output": 1})}}
	first := e.StartIn(graph, nil)
	var q struct {
		QueueID string `json:"queueId"`
	}
	var def struct {
		Items []struct{ ID string } `json:"items"`
	}
	harness.Call(t, "GET", base+"/api/v1/workflow/definitions?workspaceId="+e.Ws, harness.TestAdminToken, nil, &def)
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": e.Ws, "workflowDefinitionId": def.Items[0].ID}, &q); code != 202 {
		t.Fatalf("second start: %d", code)
	}
	ex := e.WaitFor(first, "FAILED", "COMPLETED")
	if ex.Status != "FAILED" || ex.Error == nil || !strings.Contains(*ex.Error, "workflows") || !strings.Contains(*ex.Error, "no worker picked up") {
		t.Fatalf("the unpicked run: %s, error %v; want FAILED naming its task queue", ex.Status, ex.Error)
	}
	t.Logf("recorded error: %s", *ex.Error)
	// The freed slot admits the second item, which fails the same way.
	second := harness.ExecutionOf(t, base, e.Ws, q.QueueID)
	if second == first {
		t.Fatal("the second item names the first execution")
	}
	e.WaitFor(second, "FAILED")
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the slots to be free", func() bool { return activeIn(t, base, e.Ws) == 0 }))
}

// TestARetryRunsOnlyTheFailedNode: a → b → c where b fails at its first
// run (a final 400); the retry reuses a's recorded output (no second call
// to a), runs b again, and c reads a's reused output. The requeue of a
// cancelled item runs it again with its own input.
func TestARetryRunsOnlyTheFailedNode(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	var aCalls, bCalls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			_, _ = w.Write([]byte(`{"token":"t-` + string(rune('0'+aCalls.Add(1))) + `"}`))
		case "/b":
			if bCalls.Add(1) == 1 {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	graph := map[string]any{
		"nodes": []any{
			harness.Node("a", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/a"}),
			harness.Node("b", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/b"}),
			harness.Node("c", "TRANSFORM", map[string]any{"output": map[string]any{"token": "{{ steps.a.output.body.token }}", "n": "{{ input.n }}"}}),
		},
		"edges": []any{harness.Edge("a", "b"), harness.Edge("b", "c")},
	}
	first := e.WaitFor(e.Start(graph, map[string]any{"n": 7}), "FAILED", "COMPLETED")
	if first.Status != "FAILED" || first.Node("a").Status != "COMPLETED" || first.Node("b").Status != "FAILED" || first.Node("c").Status != "SKIPPED" {
		t.Fatalf("original: %s, a %s, b %s, c %s; want FAILED at b", first.Status, first.Node("a").Status, first.Node("b").Status, first.Node("c").Status)
	}
	var q struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+first.ID+"/retry", harness.TestAdminToken, nil, &q); code != 202 {
		t.Fatalf("retry: %d", code)
	}
	retried := e.WaitFor(harness.ExecutionOf(t, base, e.Ws, q.QueueID), "COMPLETED", "FAILED")
	if retried.Status != "COMPLETED" || aCalls.Load() != 1 || bCalls.Load() != 2 {
		t.Fatalf("retry: %s with %d calls to a, %d to b; want COMPLETED, a not called again, b once more", retried.Status, aCalls.Load(), bCalls.Load())
	}
	var c struct {
		Token string `json:"token"`
		N     int    `json:"n"`
	}
	if err := json.Unmarshal(retried.Node("c").Output, &c); err != nil || c.Token != "t-1" || c.N != 7 {
		t.Fatalf("c's output %s; want a's first token and the original input", retried.Node("c").Output)
	}
	var shown struct {
		RetryOf string `json:"retryOf"`
	}
	harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+retried.ID, harness.TestAdminToken, nil, &shown)
	if shown.RetryOf != first.ID {
		t.Fatalf("the retry names %q as retried, want %s", shown.RetryOf, first.ID)
	}
	if a := retried.Node("a"); a.Status != "COMPLETED" || !strings.Contains(string(a.Output), "t-1") {
		t.Fatalf("the retry's record of a: %s %s; want COMPLETED with the reused output", a.Status, a.Output)
	}

	// A failed queue item, requeued, runs again whole with its own input:
	// the same graph's item fails at b's first call, as before.
	bCalls.Store(0)
	var item struct {
		QueueID string `json:"queueId"`
	}
	var def struct {
		Items []struct{ ID string } `json:"items"`
	}
	harness.Call(t, "GET", base+"/api/v1/workflow/definitions?workspaceId="+e.Ws, harness.TestAdminToken, nil, &def)
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": e.Ws, "workflowDefinitionId": def.Items[0].ID, "input": map[string]any{"n": 42}}, &item); code != 202 {
		t.Fatalf("enqueue: %d", code)
	}
	e.WaitFor(harness.ExecutionOf(t, base, e.Ws, item.QueueID), "FAILED")
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the item to be FAILED", func() bool {
		var it struct{ Status string }
		return harness.Call(t, "GET", base+"/api/v1/workflow/queue/"+item.QueueID, harness.TestAdminToken, nil, &it) == 200 && it.Status == "FAILED"
	}))
	var again struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/queue/"+item.QueueID+"/requeue", harness.TestAdminToken, nil, &again); code != 202 {
		t.Fatalf("requeue: %d", code)
	}
	requeued := e.WaitFor(harness.ExecutionOf(t, base, e.Ws, again.QueueID), "COMPLETED", "FAILED")
	if err := json.Unmarshal(requeued.Node("c").Output, &c); requeued.Status != "COMPLETED" || err != nil || c.N != 42 || aCalls.Load() != 3 {
		t.Fatalf("requeued item: %s, c %s, %d calls to a; want COMPLETED with its own input, a run again", requeued.Status, requeued.Node("c").Output, aCalls.Load())
	}
}

// TestARetryRunsTheVersionItRetriesAfterANewVersionIsSaved: v1 is a → b,
// b failing at its first two calls; v2, saved after v1's run failed, is
// a → c. The retry runs v1's graph (b again, never c, a reused), and when
// it fails too, the requeue of its item still runs v1.
func TestARetryRunsTheVersionItRetriesAfterANewVersionIsSaved(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	var aCalls, bCalls, cCalls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			aCalls.Add(1)
		case "/b":
			if bCalls.Add(1) <= 2 {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
		case "/c":
			cCalls.Add(1)
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	graphTo := func(second string) map[string]any {
		return map[string]any{
			"nodes": []any{
				harness.Node("a", "HTTP_REQUEST", map[string]any{"url": srv.URL + "/a"}),
				harness.Node(second, "HTTP_REQUEST", map[string]any{"url": srv.URL + "/" + second}),
			},
			"edges": []any{harness.Edge("a", second)},
		}
	}
	first := e.WaitFor(e.Start(graphTo("b"), nil), "FAILED", "COMPLETED")
	if first.Status != "FAILED" || first.Node("b").Status != "FAILED" {
		t.Fatalf("v1's run: %s, b %s; want FAILED at b", first.Status, first.Node("b").Status)
	}
	var defs struct {
		Items []struct{ ID string } `json:"items"`
	}
	harness.Call(t, "GET", base+"/api/v1/workflow/definitions?workspaceId="+e.Ws, harness.TestAdminToken, nil, &defs)
	var v2 struct{ Version int }
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions/"+defs.Items[0].ID+"/versions", harness.TestAdminToken,
		map[string]any{"graph": graphTo("c")}, &v2); code != 201 || v2.Version != 2 {
		t.Fatalf("saving v2: %d, version %d", code, v2.Version)
	}

	type run struct {
		harness.Execution
		QueueID         string `json:"queueId"`
		WorkflowVersion int    `json:"workflowVersion"`
	}
	runOf := func(queueID string) run {
		t.Helper()
		ex := e.WaitFor(harness.ExecutionOf(t, base, e.Ws, queueID), "COMPLETED", "FAILED")
		var r run
		harness.Call(t, "GET", base+"/api/v1/workflow/executions/"+ex.ID, harness.TestAdminToken, nil, &r)
		return r
	}
	var q struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+first.ID+"/retry", harness.TestAdminToken, nil, &q); code != 202 {
		t.Fatalf("retry: %d", code)
	}
	retried := runOf(q.QueueID)
	if retried.Status != "FAILED" || retried.WorkflowVersion != 1 || retried.Node("b").Status != "FAILED" ||
		retried.Node("c").Key != "" || bCalls.Load() != 2 || cCalls.Load() != 0 || aCalls.Load() != 1 {
		t.Fatalf("retry: %s at version %d, b %q, c %q; calls a %d, b %d, c %d; want v1 run again, FAILED at b's second call, c never run, a reused",
			retried.Status, retried.WorkflowVersion, retried.Node("b").Status, retried.Node("c").Status, aCalls.Load(), bCalls.Load(), cCalls.Load())
	}

	// The retry's item, requeued, is still a retry of v1.
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the retry's item to be FAILED", func() bool {
		var it struct{ Status string }
		return harness.Call(t, "GET", base+"/api/v1/workflow/queue/"+q.QueueID, harness.TestAdminToken, nil, &it) == 200 && it.Status == "FAILED"
	}))
	var again struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/queue/"+q.QueueID+"/requeue", harness.TestAdminToken, nil, &again); code != 202 {
		t.Fatalf("requeue: %d", code)
	}
	requeued := runOf(again.QueueID)
	if requeued.Status != "COMPLETED" || requeued.WorkflowVersion != 1 || requeued.Node("b").Status != "COMPLETED" ||
		requeued.Node("c").Key != "" || bCalls.Load() != 3 || cCalls.Load() != 0 || aCalls.Load() != 1 {
		t.Fatalf("requeued retry: %s at version %d, b %q; calls a %d, b %d, c %d; want v1 COMPLETED at b's third call, c never run, a reused",
			requeued.Status, requeued.WorkflowVersion, requeued.Node("b").Status, aCalls.Load(), bCalls.Load(), cCalls.Load())
	}

	// A fresh enqueue runs the current version, v2.
	var fresh struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/start", harness.TestAdminToken,
		map[string]any{"workspaceId": e.Ws, "workflowDefinitionId": defs.Items[0].ID}, &fresh); code != 202 {
		t.Fatalf("enqueue: %d", code)
	}
	if current := runOf(fresh.QueueID); current.Status != "COMPLETED" || current.WorkflowVersion != 2 || cCalls.Load() != 1 {
		t.Fatalf("fresh enqueue: %s at version %d, %d calls to c; want v2 COMPLETED, c called once", current.Status, current.WorkflowVersion, cCalls.Load())
	}
}

// TestAForEachIterationRunsUnderItsTemplatesRetryPolicy: a FOR_EACH over
// an HTTP template whose every element's first call fails with a 503
// completes when the template allows 2 attempts, each element called
// twice, and fails at the first iteration when it allows 1.
func TestAForEachIterationRunsUnderItsTemplatesRetryPolicy(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		key := r.URL.Path + "?" + r.URL.RawQuery
		calls[key]++
		n := calls[key]
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"id":"` + r.URL.Query().Get("id") + `"}`))
	}))
	defer srv.Close()
	forEach := func(path string, attempts int) map[string]any {
		return map[string]any{"nodes": []any{harness.Node("each", "FOR_EACH", map[string]any{
			"items": []any{1, 2, 3},
			"node": map[string]any{
				"type": "HTTP_REQUEST", "config": map[string]any{"url": srv.URL + path + "?id={{ item }}"},
				"retry": map[string]any{"maxAttempts": attempts, "initialInterval": "50ms"},
			},
		})}}
	}
	callsTo := func(path string) []int {
		mu.Lock()
		defer mu.Unlock()
		return []int{calls[path+"?id=1"], calls[path+"?id=2"], calls[path+"?id=3"]}
	}

	ex := e.WaitFor(e.Start(forEach("/twice", 2), nil), "COMPLETED", "FAILED")
	var out []struct {
		Body struct{ ID string } `json:"body"`
	}
	if err := json.Unmarshal(ex.Node("each").Output, &out); ex.Status != "COMPLETED" || err != nil || len(out) != 3 || out[2].Body.ID != "3" {
		t.Fatalf("maxAttempts 2: %s, output %s; want COMPLETED with the three answers in order", ex.Status, ex.Node("each").Output)
	}
	if got := callsTo("/twice"); got[0] != 2 || got[1] != 2 || got[2] != 2 {
		t.Fatalf("maxAttempts 2: calls per element %v, want 2 each", got)
	}
	if it := ex.Node("each[1]"); it.Status != "COMPLETED" || it.Attempt != 2 {
		t.Fatalf("iteration 1's record: %s at attempt %d, want COMPLETED at attempt 2", it.Status, it.Attempt)
	}

	ex = e.WaitFor(e.Start(forEach("/once", 1), nil), "COMPLETED", "FAILED")
	if ex.Status != "FAILED" || ex.Node("each").Status != "FAILED" || ex.Error == nil || !strings.Contains(*ex.Error, "iteration") {
		t.Fatalf("maxAttempts 1: %s (%v), each %s; want FAILED at an iteration", ex.Status, ex.Error, ex.Node("each").Status)
	}
	for i, n := range callsTo("/once") {
		if n > 1 {
			t.Fatalf("maxAttempts 1: element %d called %d times, want at most once", i+1, n)
		}
	}
}

// TestARetryIsKeyedByTheVersionItRuns: v1 keys runs by input.a, v2 (saved
// after v1's run failed) by input.b, which the original input lacks. The
// retry runs v1, so it is keyed by v1's key: accepted, and stored with
// the original's input.a, where keying it by v2's would refuse it.
func TestARetryIsKeyedByTheVersionItRuns(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	keyedBy := func(path string) map[string]any {
		return map[string]any{
			"concurrency": map[string]any{"key": "{{ input." + path + " }}", "limit": 1},
			"nodes":       []any{harness.Node("t", "TRANSFORM", map[string]any{"output": "{{ input.missing }}"})},
		}
	}
	first := e.WaitFor(e.Start(keyedBy("a"), map[string]any{"a": "acme"}), "FAILED", "COMPLETED")
	if first.Status != "FAILED" {
		t.Fatalf("v1's run: %s, want FAILED (it reads a missing input path)", first.Status)
	}
	var defs struct {
		Items []struct{ ID string } `json:"items"`
	}
	harness.Call(t, "GET", base+"/api/v1/workflow/definitions?workspaceId="+e.Ws, harness.TestAdminToken, nil, &defs)
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions/"+defs.Items[0].ID+"/versions", harness.TestAdminToken,
		map[string]any{"graph": keyedBy("b")}, nil); code != 201 {
		t.Fatalf("saving v2: %d", code)
	}
	var q struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", base+"/api/v1/workflow/executions/"+first.ID+"/retry", harness.TestAdminToken, nil, &q); code != 202 {
		t.Fatalf("retry: %d, want 202 (keyed by v1's input.a, which the input has)", code)
	}
	var item struct {
		ConcurrencyKey *string `json:"concurrencyKey"`
	}
	// The retry fails as the original did, so its item stays to be read.
	if code := harness.Call(t, "GET", base+"/api/v1/workflow/queue/"+q.QueueID, harness.TestAdminToken, nil, &item); code != 200 ||
		item.ConcurrencyKey == nil || *item.ConcurrencyKey != "acme" {
		t.Fatalf("the retry's item: %d, keyed %v; want v1's key over the input, acme", code, item.ConcurrencyKey)
	}
}
