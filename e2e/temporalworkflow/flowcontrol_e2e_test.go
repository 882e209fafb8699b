// Package temporalworkflow holds the end-to-end tests of gating a team's
// own Temporal workflow (issue 35) that need a whole sluice and the
// example team's worker (examples/teamservice) as its own process: flow
// control applied to a TEMPORAL_WORKFLOW definition, and the docs page's
// walk-through run as written. The fault test of the same feature is in
// e2e/faults, beside the Temporal outage it reuses.
package temporalworkflow

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/examples/teamservice"
	"github.com/sluicehq/sluice/ports/porttest"
)

// gate is one sluice, the team's worker on its own queue, and a webhook
// receiver the sluice trusts.
type gate struct {
	base  string
	queue string
	hooks *harness.WebhookReceiver
}

func newGate(t *testing.T) *gate {
	t.Helper()
	hooks := harness.NewWebhookReceiver(t, func(int, *http.Request) int { return http.StatusOK })
	base := harness.StartSluice(t, map[string]string{
		"SLUICE_DISPATCH_POLL_INTERVAL": "100ms",
		"SLUICE_WEBHOOK_CA_FILE":        harness.WebhookCAFile(t, hooks.Srv),
		"SLUICE_WEBHOOK_POLL_INTERVAL":  "50ms",
	})
	queue := "team-billing-" + uuid.NewString()[:8]
	harness.StartTeamWorker(t, harness.TemporalAddress(t), queue)
	return &gate{base: base, queue: queue, hooks: hooks}
}

// tenant is a workspace of plan whose allow-list has the team's queue and
// whose gating definition starts ChargeCustomer there.
func (g *gate) tenant(t *testing.T, plan string, concurrency map[string]any) (ws, def string) {
	t.Helper()
	var w struct{ ID string }
	if code := harness.Call(t, "POST", g.base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "flow-" + plan, "plan": plan}, &w); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	harness.AllowTaskQueue(t, g.base, w.ID, g.queue, teamservice.WorkflowType)
	var d struct{ ID string }
	if code := harness.Call(t, "POST", g.base+"/api/v1/workflow/definitions", harness.TestAdminToken,
		map[string]any{"workspaceId": w.ID, "name": "charge", "graph": harness.ChargeGraph(g.queue, concurrency)}, &d); code != 201 {
		t.Fatalf("create the gating definition: %d", code)
	}
	return w.ID, d.ID
}

// enqueue starts a charge with the request's extra fields (priority,
// notBefore) and returns its queue item.
func (g *gate) enqueue(t *testing.T, ws, def string, in teamservice.ChargeInput, extra map[string]any) string {
	t.Helper()
	body := map[string]any{"workspaceId": ws, "workflowDefinitionId": def, "input": in}
	for k, v := range extra {
		body[k] = v
	}
	var started struct {
		QueueID string `json:"queueId"`
	}
	if code := harness.Call(t, "POST", g.base+"/api/v1/workflow/executions/start", harness.TestAdminToken, body, &started); code != 202 {
		t.Fatalf("enqueue: %d", code)
	}
	return started.QueueID
}

// waitingOn is what holds a queue item back now, "" when nothing does or
// it is no longer PENDING.
func (g *gate) waitingOn(t *testing.T, queueID string) string {
	t.Helper()
	var item struct {
		Status    string `json:"status"`
		WaitingOn *struct {
			Reason string `json:"reason"`
		} `json:"waitingOn"`
	}
	if harness.Call(t, "GET", g.base+"/api/v1/workflow/queue/"+queueID, harness.TestAdminToken, nil, &item) != 200 || item.WaitingOn == nil {
		return ""
	}
	return item.WaitingOn.Reason
}

// charged is a completed run of the gating definition: when it started,
// and the team workflow's receipt, which is the node's output.
type charged struct {
	startedAt time.Time
	receipt   teamservice.Receipt
}

// charge waits for the queue item's run to complete and returns it.
func (g *gate) charge(t *testing.T, ws, queueID string) charged {
	t.Helper()
	exec := harness.ExecutionOf(t, g.base, ws, queueID)
	var run struct {
		Status    string    `json:"status"`
		Error     *string   `json:"error"`
		StartedAt time.Time `json:"startedAt"`
		Nodes     []struct {
			Key    string          `json:"key"`
			Output json.RawMessage `json:"output"`
		} `json:"nodes"`
	}
	porttest.Eventually(t, time.Minute, func() error {
		harness.Call(t, "GET", g.base+"/api/v1/workflow/executions/"+exec, harness.TestAdminToken, nil, &run)
		switch run.Status {
		case "COMPLETED":
			return nil
		case "RUNNING":
			return fmt.Errorf("run %s still RUNNING", exec)
		}
		t.Fatalf("run %s ended %s: %v %+v", exec, run.Status, deref(run.Error), run.Nodes)
		return nil
	})
	c := charged{startedAt: run.StartedAt}
	if len(run.Nodes) != 1 || json.Unmarshal(run.Nodes[0].Output, &c.receipt) != nil || c.receipt.ChargeID == "" {
		t.Fatalf("run %s's node records %+v: want the one charge node with the team workflow's receipt", exec, run.Nodes)
	}
	return c
}

// TestFlowControlAppliesUnchangedToATemporalWorkflowDefinition shows issue
// 35's item 3: a definition whose one node starts the team's own workflow
// is admitted by the same flow control as any other, each rule in its own
// workspace: keys from the input, start rates, priorities, delayed, bulk
// and scheduled enqueues, the waiting reasons they show, the run's event
// stream and its completion webhook.
func TestFlowControlAppliesUnchangedToATemporalWorkflowDefinition(t *testing.T) {
	g := newGate(t)
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a concurrency key read from the input holds a second charge of one customer, not another's", func(t *testing.T) {
			ws, def := g.tenant(t, "ENTERPRISE", map[string]any{"key": "{{ input.customer }}", "limit": 1})
			first := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "ada", AmountCents: 100, HoldMs: 3000}, nil)
			harness.ExecutionOf(t, g.base, ws, first)
			second := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "ada", AmountCents: 200}, nil)
			other := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "grace", AmountCents: 300}, nil)
			if reason := g.waitingOn(t, second); reason != "KEY_LIMIT" {
				t.Fatalf("the second charge of a customer whose key is full waits on %q, want KEY_LIMIT", reason)
			}
			o, f, s := g.charge(t, ws, other), g.charge(t, ws, first), g.charge(t, ws, second)
			if !o.startedAt.Before(s.startedAt) || s.startedAt.Before(f.startedAt.Add(3*time.Second)) {
				t.Fatalf("another customer's charge started %v, the key's second %v after its first %v ended: want the other at once and the second after the first's 3 s",
					o.startedAt, s.startedAt, f.startedAt)
			}
		}},
		{"a key's start rate spaces the starts", func(t *testing.T) {
			ws, def := g.tenant(t, "ENTERPRISE", map[string]any{"key": "{{ input.customer }}", "limit": 100,
				"startRate": map[string]any{"rate": 1, "per": "second"}})
			var ids []string
			for n := range 3 {
				ids = append(ids, g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "ada", AmountCents: int64(100 + n)}, nil))
			}
			sawRate := false
			porttest.Eventually(t, 10*time.Second, porttest.Holds("a charge to wait on the start rate", func() bool {
				sawRate = g.waitingOn(t, ids[2]) == "START_RATE" || g.waitingOn(t, ids[1]) == "START_RATE"
				return sawRate
			}))
			var starts []time.Time
			for _, id := range ids {
				starts = append(starts, g.charge(t, ws, id).startedAt)
			}
			first, last := starts[0], starts[0]
			for _, s := range starts {
				first, last = minTime(first, s), maxTime(last, s)
			}
			if last.Sub(first) < 1800*time.Millisecond {
				t.Fatalf("3 charges at 1 a second started within %v, want at least ~2 s", last.Sub(first))
			}
		}},
		{"a workspace at its limit starts the most urgent waiting charge first", func(t *testing.T) {
			ws, def := g.tenant(t, "FREE", nil)
			holder := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "hold", AmountCents: 1, HoldMs: 2000}, nil)
			harness.ExecutionOf(t, g.base, ws, holder)
			late := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "late", AmountCents: 1}, map[string]any{"priority": 4})
			urgent := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "urgent", AmountCents: 1}, map[string]any{"priority": 1})
			if reason := g.waitingOn(t, late); reason != "WORKSPACE_LIMIT" {
				t.Fatalf("a charge behind a FREE workspace's one running waits on %q, want WORKSPACE_LIMIT", reason)
			}
			u, l := g.charge(t, ws, urgent), g.charge(t, ws, late)
			if !u.startedAt.Before(l.startedAt) {
				t.Fatalf("priority 1 started %v, priority 4 %v: want priority 1 first", u.startedAt, l.startedAt)
			}
		}},
		{"a delayed charge waits for its notBefore", func(t *testing.T) {
			ws, def := g.tenant(t, "PRO", nil)
			notBefore := time.Now().Add(2 * time.Second).UTC()
			id := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "ada", AmountCents: 100}, map[string]any{"notBefore": notBefore})
			if reason := g.waitingOn(t, id); reason != "NOT_BEFORE" {
				t.Fatalf("a delayed charge waits on %q, want NOT_BEFORE", reason)
			}
			if c := g.charge(t, ws, id); c.startedAt.Before(notBefore) {
				t.Fatalf("a charge not before %v started %v", notBefore, c.startedAt)
			}
		}},
		{"a bulk enqueue starts each charge", func(t *testing.T) {
			ws, def := g.tenant(t, "PRO", nil)
			var items []map[string]any
			for n := range 5 {
				items = append(items, map[string]any{"input": teamservice.ChargeInput{Customer: fmt.Sprintf("c%d", n), AmountCents: int64(100 + n)}})
			}
			var batch struct {
				Items []struct {
					QueueID string `json:"queueId"`
				} `json:"items"`
			}
			if code := harness.Call(t, "POST", g.base+"/api/v1/workflow/executions/start-batch", harness.TestAdminToken,
				map[string]any{"workspaceId": ws, "workflowDefinitionId": def, "items": items}, &batch); code != 202 {
				t.Fatalf("bulk enqueue: %d", code)
			}
			for n, it := range batch.Items {
				if r := g.charge(t, ws, it.QueueID).receipt; r.Customer != fmt.Sprintf("c%d", n) || r.AmountCents != int64(100+n) {
					t.Fatalf("bulk item %d charged %+v", n, r)
				}
			}
		}},
		{"a schedule's ticks start charges", func(t *testing.T) {
			ws, def := g.tenant(t, "ENTERPRISE", nil) // the plan whose schedules may tick every second
			var sched struct{ ID string }
			if code := harness.Call(t, "POST", g.base+"/api/v1/workflow/schedules", harness.TestAdminToken, map[string]any{
				"workspaceId": ws, "workflowDefinitionId": def, "name": "nightly", "intervalSeconds": 1,
				"input": teamservice.ChargeInput{Customer: "subscriber", AmountCents: 999},
			}, &sched); code != 201 {
				t.Fatalf("create schedule: %d", code)
			}
			t.Cleanup(func() {
				harness.Call(t, "DELETE", g.base+"/api/v1/workflow/schedules/"+sched.ID, harness.TestAdminToken, nil, nil)
			})
			var page struct {
				Items []struct {
					ID     string `json:"id"`
					Status string `json:"status"`
				} `json:"items"`
			}
			porttest.Eventually(t, time.Minute, porttest.Holds("two scheduled charges to complete", func() bool {
				harness.Call(t, "GET", g.base+"/api/v1/workflow/executions?workspaceId="+ws+"&status=COMPLETED", harness.TestAdminToken, nil, &page)
				return len(page.Items) >= 2
			}))
		}},
		{"a completed charge is told by the run's event stream and by a completion webhook", func(t *testing.T) {
			ws, def := g.tenant(t, "PRO", nil)
			harness.RegisterWebhook(t, g.base, ws, g.hooks.Srv.URL+"/hook")
			id := g.enqueue(t, ws, def, teamservice.ChargeInput{Customer: "ada", AmountCents: 100}, nil)
			g.charge(t, ws, id)
			exec := harness.ExecutionOf(t, g.base, ws, id)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "GET", g.base+"/api/v1/workflow/executions/"+exec+"/events", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+harness.TestAdminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			stream, err := io.ReadAll(resp.Body) // the stream ends after run.finished
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			compact := strings.ReplaceAll(string(stream), " ", "")
			for _, want := range []string{"event:node.started", `"type":"TEMPORAL_WORKFLOW","status":"COMPLETED"`, "event:run.finished"} {
				if !strings.Contains(compact, want) {
					t.Fatalf("the run's stream lacks %s:\n%s", want, stream)
				}
			}
			porttest.Eventually(t, 30*time.Second, porttest.Holds("the completion webhook to arrive", func() bool {
				g.hooks.Mu.Lock()
				defer g.hooks.Mu.Unlock()
				for _, b := range g.hooks.Bodies {
					if strings.Contains(string(b), exec) && strings.Contains(string(b), "execution.completed") {
						return true
					}
				}
				return false
			}))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
