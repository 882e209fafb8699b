package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// allNodeRecords pages through an execution's harness.Node records.
func allNodeRecords(e *harness.E2E, id string) []harness.NodeRecord {
	e.T.Helper()
	var all []harness.NodeRecord
	cursor := ""
	for {
		var page struct {
			Items      []harness.NodeRecord `json:"items"`
			NextCursor *string              `json:"nextCursor"`
		}
		u := e.Base + "/api/v1/workflow/executions/" + id + "/nodes?limit=100"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if code := harness.Call(e.T, "GET", u, harness.TestAdminToken, nil, &page); code != http.StatusOK {
			e.T.Fatalf("listing harness.Node records: %d", code)
		}
		all = append(all, page.Items...)
		if page.NextCursor == nil {
			return all
		}
		cursor = *page.NextCursor
	}
}

// endedBySluice checks, in Temporal, that the execution's workflow closed
// by returning (Sluice recorded its end), not terminated by the server or
// anyone else, and returns its history's events and bytes.
func endedBySluice(t *testing.T, id string) (events, bytes int64) {
	t.Helper()
	tc := harness.TemporalClient(t, harness.TemporalAddress(t))
	d, err := tc.DescribeWorkflowExecution(context.Background(), "execution-"+id, "")
	if err != nil {
		t.Fatal(err)
	}
	info := d.GetWorkflowExecutionInfo()
	if s := info.GetStatus(); s != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("the workflow closed %s in Temporal, want COMPLETED: the run must end by Sluice, not by the server", s)
	}
	return info.GetHistoryLength(), info.GetHistorySizeBytes()
}

// TestARetryAfterOfZeroFailsTheNodeWithinItsRounds: a host answers every
// harness.Call 429 with "Retry-After: 0", which once had a harness.Node harness.Call it ten times
// a second until Temporal terminated the run at 51,200 events. Now each
// round waits the floor and the harness.Node fails once its rounds are spent,
// naming the cause, the host and its status, well within 2 minutes; the
// host sees the first harness.Call and one per round; the run is ended by Sluice
// (its workflow closed COMPLETED in Temporal, not terminated), and the
// FREE workspace's next run completes. Run with the defaults (a floor of
// 1 s, the plan's 10 rounds under the worker's ceiling of 10), with a
// worker's ceiling of 3 under the plan's 10, and with the FREE plan's
// retryAfterRounds set to 2 through the plans API under the default
// ceiling: the node fails after the rounds of the lower bound, naming it.
func TestARetryAfterOfZeroFailsTheNodeWithinItsRounds(t *testing.T) {
	const quotaBound, ceilingBound = "the workspace's retryAfterRounds quota", "SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS"
	for _, tc := range []struct {
		name       string
		env        map[string]string
		planRounds int // set on the FREE plan when not zero
		rounds     int
		bound      string
		floor      time.Duration
	}{
		{name: "defaults", rounds: 10, bound: quotaBound, floor: time.Second},
		{name: "configured", env: map[string]string{"SLUICE_OUTBOUND_RETRY_AFTER_ROUNDS": "3", "SLUICE_OUTBOUND_PAUSE_FLOOR": "300ms"}, rounds: 3, bound: ceilingBound, floor: 300 * time.Millisecond},
		{name: "per plan", env: map[string]string{"SLUICE_OUTBOUND_PAUSE_FLOOR": "300ms"}, planRounds: 2, rounds: 2, bound: quotaBound, floor: 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h hits
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.add(r.URL.Path)
				if r.URL.Path == "/busy" {
					w.Header().Set("Retry-After", "0")
					http.Error(w, "slow down", http.StatusTooManyRequests)
					return
				}
				fmt.Fprint(w, `{"ok": true}`)
			}))
			defer srv.Close()
			var quotas *worker.QuotaSnapshot
			base := harness.StartSluiceWith(t, tc.env, fx.Populate(&quotas))
			e := harness.NewE2EWithPlan(t, base, "FREE")
			if tc.planRounds > 0 {
				if code := harness.Call(t, "PATCH", base+"/api/v1/plans/FREE", harness.TestAdminToken, map[string]any{"retryAfterRounds": tc.planRounds}, nil); code != http.StatusOK {
					t.Fatalf("updatePlan: %d", code)
				}
				ws := domain.ID(uuid.MustParse(e.Ws))
				porttest.Eventually(t, 5*time.Second, porttest.Holds("the worker's snapshot to show the plan's rounds", func() bool {
					q, ok := quotas.Current(ws, domain.PlanFree)
					return ok && q.RetryAfterRounds == tc.planRounds
				}))
			}
			graph := func(path string) map[string]any {
				return map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + path})}}
			}
			began := time.Now()
			busy := e.StartIn(graph("/busy"), nil)
			next := e.StartIn(graph("/ok"), nil)

			ex := e.WaitForStatus(busy, 2*time.Minute, "COMPLETED", "FAILED")
			took := time.Since(began)
			calls := h.of("/busy")
			events, bytes := endedBySluice(t, busy)
			t.Logf("%s: the harness.Node ended %s after %s; the host saw %d calls; history %d events, %d bytes",
				tc.name, ex.Status, took.Round(time.Millisecond), len(calls), events, bytes)
			if ex.Status != "FAILED" {
				t.Fatalf("the run ended %s, want FAILED", ex.Status)
			}
			n := ex.Node("call")
			for _, want := range []string{"Retry-After rounds exhausted", fmt.Sprintf("over the maximum of %d a node (%s)", tc.rounds, tc.bound), "127.0.0.1 answered 429"} {
				if n.Status != "FAILED" || n.Error == nil || !strings.Contains(*n.Error, want) {
					t.Errorf("node: %s %v, want FAILED naming %q", n.Status, n.Error, want)
				}
			}
			if len(calls) != tc.rounds+1 {
				t.Errorf("the host saw %d calls, want %d: the first and one per round", len(calls), tc.rounds+1)
			}
			for i := 1; i < len(calls); i++ {
				if gap := calls[i].Sub(calls[i-1]); gap < tc.floor-50*time.Millisecond {
					t.Errorf("call %d came %s after the one before, inside the floor of %s", i+1, gap, tc.floor)
				}
			}
			if ex := e.WaitForStatus(next, time.Minute, "COMPLETED", "FAILED"); ex.Status != "COMPLETED" {
				t.Errorf("the workspace's next run ended %s, want COMPLETED", ex.Status)
			}
		})
	}
}

// TestAForEachOf100ItemsOf10KBEndsRecordedBySluice: a FOR_EACH over 100
// strings of 10 KB, each iteration posting its element. Each iteration
// once carried the FOR_EACH's whole 1 MB input, and Temporal terminated
// the run at 54 MB of history after 50 requests, its records left
// RUNNING. Now the run ends by Sluice (COMPLETED or FAILED with a
// recorded cause), every record has ended, the workflow closed COMPLETED
// in Temporal (not terminated), and the history stays small.
func TestAForEachOf100ItemsOf10KBEndsRecordedBySluice(t *testing.T) {
	var posted, postedBytes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		posted.Add(1)
		postedBytes.Add(n)
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()
	base := harness.StartSluice(t, nil)
	e := harness.NewE2EWithPlan(t, base, "FREE")
	items := make([]any, 100)
	for i := range items {
		items[i] = strings.Repeat(string(rune('a'+i%26)), 10_000)
	}
	graph := map[string]any{"nodes": []any{harness.Node("each", "FOR_EACH", map[string]any{
		"items": "{{ input.items }}",
		"node": map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{
			"url": srv.URL + "/post", "method": "POST", "body": "{{ item }}"}},
	})}}
	began := time.Now()
	id := e.StartIn(graph, map[string]any{"items": items})
	ex := e.WaitForStatus(id, 3*time.Minute, "COMPLETED", "FAILED")
	took := time.Since(began)
	events, bytes := endedBySluice(t, id)
	records := allNodeRecords(e, id)
	t.Logf("the run ended %s after %s; %d requests of %d bytes in all; history %d events, %d bytes; %d harness.Node records",
		ex.Status, took.Round(time.Millisecond), posted.Load(), postedBytes.Load(), events, bytes, len(records))
	if ex.Status != "COMPLETED" {
		cause := "no recorded cause"
		if ex.Error != nil && *ex.Error != "" {
			cause = *ex.Error
		}
		t.Errorf("the run ended %s (%s), want COMPLETED: 100 posts of 10 KB fit every limit once iterations carry only their element", ex.Status, cause)
	}
	if len(records) != 101 {
		t.Errorf("%d harness.Node records, want the FOR_EACH's and its 100 iterations'", len(records))
	}
	for _, n := range records {
		if n.Status == "RUNNING" {
			t.Errorf("node %s left RUNNING", n.Key)
		}
	}
	if posted.Load() != 100 {
		t.Errorf("the host saw %d posts, want 100", posted.Load())
	}
	// 100 iterations of 10 KB each, once each, plus Sluice's own events:
	// far below the 10 MB at which Temporal starts to warn.
	if bytes > 10<<20 {
		t.Errorf("the history is %d bytes, over Temporal's warning of 10 MB", bytes)
	}
}

// TestARunTerminatedInTemporalIsRecordedPromptly: an operator (or the
// server, at one of its limits) terminates a run's workflow while its
// harness.Node is RUNNING. The close watch records the run FAILED, naming the
// termination and its reason, and ends the node's record, within seconds
// (SLUICE_CLOSE_WATCH_INTERVAL, 5 s), where the reconciler's walk waits
// for the run to be a minute old and then for its next turn; the FREE
// workspace's next run completes.
func TestARunTerminatedInTemporalIsRecordedPromptly(t *testing.T) {
	release := make(chan struct{})
	var h hits
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.add(r.URL.Path)
		if r.URL.Path == "/hold" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()
	defer close(release)
	base := harness.StartSluice(t, nil)
	e := harness.NewE2EWithPlan(t, base, "FREE")
	graph := func(path string) map[string]any {
		return map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL + path})}}
	}
	id := e.StartIn(graph("/hold"), nil)
	waitForHits(t, &h, "/hold", 1)
	const reason = "Workflow history count exceeds limit."
	if err := harness.TemporalClient(t, harness.TemporalAddress(t)).TerminateWorkflow(context.Background(), "execution-"+id, "", reason); err != nil {
		t.Fatal(err)
	}
	terminated := time.Now()
	ex := e.WaitForStatus(id, 30*time.Second, "FAILED", "COMPLETED", "CANCELLED")
	took := time.Since(terminated)
	recorded := ""
	if ex.Error != nil {
		recorded = *ex.Error
	}
	t.Logf("recorded %s %s after the termination: %q", ex.Status, took.Round(time.Millisecond), recorded)
	if ex.Status != "FAILED" || ex.Error == nil || !strings.Contains(*ex.Error, "terminated outside Sluice: "+reason) {
		t.Errorf("execution: %s %v, want FAILED naming the termination and its reason", ex.Status, ex.Error)
	}
	if n := ex.Node("call"); n.Status != "FAILED" || n.Error == nil || !strings.Contains(*n.Error, "terminated outside Sluice") {
		t.Errorf("node: %s %v, want FAILED naming the run's end", n.Status, n.Error)
	}
	if ex := e.WaitForStatus(e.StartIn(graph("/ok"), nil), time.Minute, "COMPLETED", "FAILED"); ex.Status != "COMPLETED" {
		t.Errorf("the workspace's next run ended %s, want COMPLETED", ex.Status)
	}
}

// TestTheHistoryBudgetEndsARunBeforeTemporalDoes: with a history events
// limit of 1,000, a PRO workspace's FOR_EACH of 200 HTTP iterations (about
// 7 events each) reaches the limit part way, as Temporal's server counts
// it: no further iteration starts, the run fails naming the limit, ended by
// Sluice (its workflow COMPLETED in Temporal, not terminated), with no
// record left RUNNING.
func TestTheHistoryBudgetEndsARunBeforeTemporalDoes(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Fprint(w, `{"ok": true}`)
	}))
	defer srv.Close()
	base := harness.StartSluice(t, map[string]string{"SLUICE_ENGINE_HISTORY_EVENTS_LIMIT": "1000"})
	e := harness.NewE2EWithPlan(t, base, "PRO")
	items := make([]any, 200)
	for i := range items {
		items[i] = i
	}
	graph := map[string]any{"nodes": []any{harness.Node("each", "FOR_EACH", map[string]any{
		"items": "{{ input.items }}",
		"node":  map[string]any{"type": "HTTP_REQUEST", "config": map[string]any{"url": srv.URL + "/{{ item }}"}},
	})}}
	began := time.Now()
	id := e.StartIn(graph, map[string]any{"items": items})
	ex := e.WaitForStatus(id, 2*time.Minute, "COMPLETED", "FAILED")
	events, bytes := endedBySluice(t, id)
	records := allNodeRecords(e, id)
	t.Logf("the run ended %s after %s; the host saw %d calls; history %d events, %d bytes; %d harness.Node records",
		ex.Status, time.Since(began).Round(time.Millisecond), calls.Load(), events, bytes, len(records))
	if n := ex.Node("each"); ex.Status != "FAILED" || n.Status != "FAILED" || n.Error == nil || !strings.Contains(*n.Error, "at the limit of 1000 (SLUICE_ENGINE_HISTORY_EVENTS_LIMIT") {
		t.Errorf("run %s, FOR_EACH %s %v; want both FAILED naming the events limit", ex.Status, n.Status, n.Error)
	}
	if c := calls.Load(); c >= 200 {
		t.Errorf("the host saw %d calls, want the iterations before the limit only", c)
	}
	for _, n := range records {
		if n.Status == "RUNNING" {
			t.Errorf("node %s left RUNNING", n.Key)
		}
	}
	// The count is harness.Read at the start of each workflow task; the run ends
	// with the iterations then in flight and its records.
	if events < 1000 || events > 1200 {
		t.Errorf("the history holds %d events, want the limit of 1000 and a few to end the run", events)
	}
}
