package engine

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/domain"
)

// retryAfterServer answers its first refusals calls 429 with Retry-After
// of the given seconds, then 200.
func retryAfterServer(t *testing.T, refusals int32, seconds string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= refusals {
			w.Header().Set("Retry-After", seconds)
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestExecutionWaitsOutRetryAfterWithoutSpendingAttempts: more 429s with
// Retry-After than the node has attempts, each waited out (on the test
// environment's skipped timers); the node completes at attempt 1.
func TestExecutionWaitsOutRetryAfterWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	srv, calls := retryAfterServer(t, 5, "2")
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "call", "type": "HTTP_REQUEST", "config": {"url": "%s/x"}}]}`, srv.URL))
	res := h.mustRun()
	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if rec := h.record("call"); rec.Status != domain.NodeCompleted || rec.Attempt != 1 {
		t.Errorf("node: %s at attempt %d, want COMPLETED at 1", rec.Status, rec.Attempt)
	}
	if n := calls.Load(); n != 6 {
		t.Errorf("the upstream saw %d calls, want 6 (5 refused)", n)
	}
}

// TestExecutionFailsANodeAskedToWaitPastThePauseMaximum: a Retry-After of
// 10 minutes, over the default maximum of 5, fails the node at once,
// naming the bound and its variable.
func TestExecutionFailsANodeAskedToWaitPastThePauseMaximum(t *testing.T) {
	t.Parallel()
	srv, calls := retryAfterServer(t, 100, "600")
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "call", "type": "HTTP_REQUEST", "config": {"url": "%s/x"}}]}`, srv.URL))
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed {
		t.Fatalf("status = %s, want FAILED", res.Status)
	}
	rec := h.record("call")
	if rec.Status != domain.NodeFailed || !strings.Contains(rec.Error, "SLUICE_OUTBOUND_PAUSE_MAX") || !strings.Contains(rec.Error, "over the maximum of 5m0s") {
		t.Errorf("node: %s %q, want FAILED naming SLUICE_OUTBOUND_PAUSE_MAX", rec.Status, rec.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the upstream saw %d calls, want 1", n)
	}
}
