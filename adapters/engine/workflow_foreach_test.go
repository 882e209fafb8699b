package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/domain"
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
	h.wf.Limits = Limits{ForEachItems: map[domain.Plan]int{domain.PlanFree: 2}}
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
	h.wf.Limits = Limits{NodesInFlight: map[domain.Plan]int{domain.PlanFree: limit}}
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
