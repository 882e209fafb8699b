package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/mock"

	"github.com/sluicehq/sluice/domain"
)

// TestANewRunTakesEveryChangeWithoutAMarker: a run that uses the changes
// of the current baseline (an HTTP node's host turn and policy, a FOR_EACH
// whose iterations take their template's retry policy, the change made
// after the first baseline) takes each of them and asks for none by a
// GetVersion marker, so the SDK upserts no TemporalChangeVersion search
// attribute: no visibility write on the server beyond the run's start and
// close.
func TestANewRunTakesEveryChangeWithoutAMarker(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, fmt.Sprintf(`{"nodes": [
		{"key": "each", "type": "FOR_EACH", "config": {"items": [1],
			"node": {"type": "HTTP_REQUEST", "config": {"url": "%[1]s/x"}, "retry": {"maxAttempts": 5, "initialInterval": "10ms"}}}},
		{"key": "fetch", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/y"}, "retry": {"maxAttempts": 4, "initialInterval": "10ms"}, "timeout": "20s"}
	], "edges": [{"from": "each", "to": "fetch"}]}`, srv.URL))
	var upserts atomic.Int32
	// GetVersion upserts through the untyped call, which only this
	// (deprecated) mock sees; the typed one would miss it.
	h.env.OnUpsertSearchAttributes(mock.Anything).Return(nil).Run(func(mock.Arguments) { upserts.Add(1) }) //nolint:staticcheck // see above

	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	// Three 503s before the iteration's fourth attempt: past the worker's
	// 3 attempts only under the template's policy (forEachPoliciesChange).
	if rec := h.record("each[0]"); rec.Status != domain.NodeCompleted || rec.Attempt != 4 {
		t.Errorf("iteration: %s at attempt %d, want COMPLETED at 4", rec.Status, rec.Attempt)
	}
	if rec := h.record("fetch"); rec.Status != domain.NodeCompleted || rec.Attempt != 1 {
		t.Errorf("fetch: %s at attempt %d, want COMPLETED at 1", rec.Status, rec.Attempt)
	}
	if n := upserts.Load(); n != 0 {
		t.Errorf("the run upserted search attributes %d times, want 0: a change was asked for by its own marker", n)
	}
}
