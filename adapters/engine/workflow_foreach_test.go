package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

func TestForEachOutputsIterationsInInputOrderAndRecordsEach(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [
		{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input.list }}",
			"node": {"type": "TRANSFORM", "config": {"output": {"i": "{{ index }}", "v": "{{ item.v }}", "tag": "{{ input.tag }}"}}}}},
		{"key": "after", "type": "TRANSFORM", "config": {"output": "{{ steps.each.output[2].v }}"}}
	], "edges": [{"from": "each", "to": "after"}]}`).withInput(`{"list": [{"v": "a"}, {"v": "b"}, {"v": "c"}], "tag": "t"}`)
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	want := jsonOf(t, `[{"i": 0, "v": "a", "tag": "t"}, {"i": 1, "v": "b", "tag": "t"}, {"i": 2, "v": "c", "tag": "t"}]`)
	if got := h.record("each").Output; !reflect.DeepEqual(got, want) {
		t.Errorf("each output = %v, want %v", got, want)
	}
	if got := h.record("after").Output; got != "c" {
		t.Errorf("after output = %v, want c", got)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"each": domain.NodeCompleted, "each[0]": domain.NodeCompleted,
		"each[1]": domain.NodeCompleted, "each[2]": domain.NodeCompleted, "after": domain.NodeCompleted})
}

func TestForEachOverTheItemCapFailsNamingTheLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input }}",
		"node": {"type": "TRANSFORM", "config": {"output": "{{ item }}"}}}}]}`).withInput(`[1, 2, 3]`)
	h.wf.Limits = RunLimits{ForEachItems: map[domain.Plan]int{domain.PlanFree: 2}}
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, "FOR_EACH limit of 2 (its forEachItems quota)") {
		t.Fatalf("result = %s (%s), want FAILED naming the FOR_EACH limit", res.Status, res.Error)
	}
	if n := len(h.ranKeys()); n != 0 {
		t.Errorf("%d iterations ran, want none", n)
	}
}

func TestForEachIterationsShareTheNodesInFlightWithOtherNodes(t *testing.T) {
	t.Parallel()
	// Every request is held until as many are in flight as FREE's cap,
	// then let go one at a time; a request past the cap would be seen in
	// flight beside the held ones.
	const items, limit = 12, 3
	var (
		mu                      sync.Mutex
		inFlight, arrived, peak int
	)
	total := items + 1 // the iterations and one plain HTTP node beside them
	tokens, last := make(chan struct{}, total), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		arrived++
		peak = max(peak, inFlight)
		if arrived == total {
			close(last)
		} else if inFlight >= limit {
			tokens <- struct{}{}
		}
		mu.Unlock()
		select {
		case <-tokens:
		case <-last:
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		fmt.Fprintf(w, `{"path": %q}`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	list := make([]string, items)
	for i := range list {
		list[i] = fmt.Sprint(i)
	}
	h := newHarness(t, fmt.Sprintf(`{"nodes": [
		{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input }}", "node": {"type": "HTTP_REQUEST", "config": {"url": "%s/{{ item }}"}}}},
		{"key": "side", "type": "HTTP_REQUEST", "config": {"url": "%s/side"}}
	]}`, srv.URL, srv.URL)).withInput("[" + strings.Join(list, ",") + "]")
	h.wf.Limits = RunLimits{NodesInFlight: map[domain.Plan]int{domain.PlanFree: limit}}
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != limit {
		t.Errorf("at most %d requests ran at once, want FREE's cap of %d reached and kept", peak, limit)
	}
	out, ok := h.record("each").Output.([]any)
	if !ok || len(out) != items {
		t.Fatalf("each output = %v, want %d results", h.record("each").Output, items)
	}
	for i, o := range out {
		if body := o.(map[string]any)["body"].(map[string]any); body["path"] != fmt.Sprintf("/%d", i) {
			t.Errorf("result %d = %v, want the response to /%d", i, body, i)
		}
	}
}

// TestForEachHTTPIterationsTakeTheOutboundPath: an HTTP iteration answered
// 429 with Retry-After three times waits each out as an HTTP node does
// (runOutbound), spending no attempt, and completes at attempt 1; outside
// the outbound path a 429 is final and would fail the FOR_EACH.
func TestForEachHTTPIterationsTakeTheOutboundPath(t *testing.T) {
	t.Parallel()
	srv, calls := retryAfterServer(t, 3, "2")
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "each", "type": "FOR_EACH", "config": {"items": [1],
		"node": {"type": "HTTP_REQUEST", "config": {"url": "%s/x?id={{ item }}"}, "retry": {"maxAttempts": 1}}}}]}`, srv.URL))
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if rec := h.record("each[0]"); rec.Status != domain.NodeCompleted || rec.Attempt != 1 {
		t.Errorf("iteration: %s at attempt %d, want COMPLETED at 1", rec.Status, rec.Attempt)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("the upstream saw %d calls, want 4 (3 refused)", n)
	}
}

// TestForEachIterationsRunUnderTheTemplatesRetryPolicy: an iteration
// whose upstream fails four times with a 503 completes under a template
// allowing 5 attempts, at attempt 5, past the worker's 3 (testRetry).
func TestForEachIterationsRunUnderTheTemplatesRetryPolicy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= 4 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "each", "type": "FOR_EACH", "config": {"items": [1],
		"node": {"type": "HTTP_REQUEST", "config": {"url": "%s/x"}, "retry": {"maxAttempts": 5, "initialInterval": "10ms"}, "timeout": "20s"}}}]}`, srv.URL))
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if rec := h.record("each[0]"); rec.Status != domain.NodeCompleted || rec.Attempt != 5 {
		t.Errorf("iteration: %s at attempt %d, want COMPLETED at 5", rec.Status, rec.Attempt)
	}
}

// TestForEachWritesEachIterationsRecordAsItEnds: a FREE run's FOR_EACH of
// 20 TRANSFORM items, four at a time, whose iteration i may end only once
// the store holds iteration i-1's record (recordGate). Records written as
// iterations end let every iteration through at once; records written
// when the loop ends (as they once were) hold iteration 1 until the gate
// gives up, and the test fails naming it. The gate runs in the iteration's
// local activity, off the workflow's path, so it holds nothing the
// records writer needs, and the order it sets does not depend on how the
// test environment schedules coroutines. Each record carries the time its
// own iteration ended: later than the one before it.
func TestForEachWritesEachIterationsRecordAsItEnds(t *testing.T) {
	t.Parallel()
	const items = 20
	gate := &recordGate{waitFor: 15 * time.Second}
	h := newHarnessWith(t, `{"nodes": [{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input }}",
		"node": {"type": "TRANSFORM", "config": {"output": {"i": "{{ index }}"}}}}}]}`, []ports.NodeExecutor{gate, fakeCondition{}}).
		withInput(`[` + strings.Repeat(`0, `, items-1) + `0]`)
	gate.store, gate.execID = h.store, h.execID
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if late := gate.unstored(); len(late) > 0 {
		t.Errorf("iterations %v ended before the record of the iteration before them was stored, want each record written as its iteration ends", late)
	}
	var prev time.Time
	for i := range items {
		rec, ok := h.store.node(h.execID, fmt.Sprintf("each[%d]", i))
		if !ok || rec.CompletedAt == nil {
			t.Fatalf("each[%d] has no completedAt (%v)", i, rec)
		}
		if !rec.CompletedAt.After(prev) {
			t.Errorf("each[%d] completedAt %v, not after each[%d]'s %v: want the time its own iteration ended", i, *rec.CompletedAt, i-1, prev)
		}
		prev = *rec.CompletedAt
	}
}

// recordGate is a TRANSFORM executor (fakeTransform) that runs iteration
// i of a FOR_EACH only once the store holds iteration i-1's record as
// COMPLETED, or waitFor has passed: then it notes i as late, and holds no
// iteration after it, so that a failing run ends within the test's time.
type recordGate struct {
	fakeTransform
	store   *memStore
	execID  domain.ID
	waitFor time.Duration

	mu   sync.Mutex
	late []int
}

var iterationKey = regexp.MustCompile(`^(.+)\[(\d+)\]$`)

func (g *recordGate) Execute(ctx context.Context, run ports.NodeRun) (any, any, error) {
	if m := iterationKey.FindStringSubmatch(run.Node.Key); m != nil {
		i, _ := strconv.Atoi(m[2])
		if i > 0 && len(g.unstored()) == 0 && !g.awaitStored(ctx, fmt.Sprintf("%s[%d]", m[1], i-1)) {
			g.mu.Lock()
			g.late = append(g.late, i)
			g.mu.Unlock()
		}
	}
	return g.fakeTransform.Execute(ctx, run)
}

// awaitStored polls the store until it holds key's record COMPLETED,
// reporting false if waitFor passes first.
func (g *recordGate) awaitStored(ctx context.Context, key string) bool {
	deadline := time.NewTimer(g.waitFor)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if rec, ok := g.store.node(g.execID, key); ok && rec.Status == domain.NodeCompleted {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

// unstored returns the iterations that ran before the record of the one
// before them was stored.
func (g *recordGate) unstored() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.late)
}

// TestForEachIterationOutgrowingItsRoomRunsAgainWithThePayloadLimit: a
// pure iteration's task reserves the room of what it carries, and an
// output built past it (one element repeated 40 times) is not returned
// in that task: the iteration runs again with the payload limit reserved,
// and the run completes with the whole output.
func TestForEachIterationOutgrowingItsRoomRunsAgainWithThePayloadLimit(t *testing.T) {
	t.Parallel()
	many := strings.TrimSuffix(strings.Repeat(`"{{ item }}", `, 40), ", ")
	h := newHarness(t, `{"nodes": [{"key": "each", "type": "FOR_EACH", "config": {"items": "{{ input }}",
		"node": {"type": "TRANSFORM", "config": {"output": [`+many+`]}}}},
		{"key": "after", "type": "TRANSFORM", "config": {"output": "{{ steps.each.output[0][39] }}"}}
	], "edges": [{"from": "each", "to": "after"}]}`).withInput(`["` + strings.Repeat("x", 1000) + `"]`)
	var (
		mu   sync.Mutex
		runs []int
	)
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		if info.ActivityType.Name != runPureNodeActivity || len(args) != 1 {
			return
		}
		if in, ok := args[0].(RunNodeInput); ok && in.Node.Key == "each[0]" {
			mu.Lock()
			runs = append(runs, in.OutputRoom)
			mu.Unlock()
		}
	})
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if got := h.record("after").Output; got != strings.Repeat("x", 1000) {
		t.Errorf("after read %.40v from the iteration's 40th copy, want its element", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 || runs[0] <= 0 || runs[0] >= 40_000 || runs[1] != 0 {
		t.Errorf("the iteration ran with rooms %v, want its own room (under its 40 KB output), then the payload limit's (0)", runs)
	}
}
