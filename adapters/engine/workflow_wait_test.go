package engine

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// waitGraph waits for "approval" for an hour, with a branch per outcome.
const waitGraph = `{"nodes": [
	{"key": "wait", "type": "WAIT_FOR_EVENT", "config": {"event": "approval", "timeout": "1h"}},
	{"key": "yes", "type": "TRANSFORM", "config": {"output": "{{ steps.wait.output.by }}"}},
	{"key": "no", "type": "TRANSFORM", "config": {"output": "timed out"}}
], "edges": [{"from": "wait", "to": "yes", "when": true}, {"from": "wait", "to": "no", "when": false}]}`

func TestWaitForEventTakesTheEventsPayloadAsItsOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, waitGraph)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(EventSignalName("approval"), EventSignal{Payload: json.RawMessage(`{"by": "ada"}`)})
	}, 10*time.Minute)
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if got := h.record("wait").Output; !reflect.DeepEqual(got, map[string]any{"by": "ada"}) {
		t.Errorf("wait output = %v, want the payload", got)
	}
	if got := h.record("yes").Output; got != "ada" {
		t.Errorf("yes output = %v, want ada", got)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"wait": domain.NodeCompleted, "yes": domain.NodeCompleted, "no": domain.NodeSkipped})
}

func TestWaitForEventKeepsAnEventSentBeforeTheNodeStarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [
		{"key": "pause", "type": "DELAY", "config": {"duration": "5m"}},
		{"key": "wait", "type": "WAIT_FOR_EVENT", "config": {"event": "go"}}
	], "edges": [{"from": "pause", "to": "wait"}]}`)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(EventSignalName("go"), EventSignal{Payload: json.RawMessage(`7`)})
	}, time.Minute)
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if got := h.record("wait").Output; got != float64(7) {
		t.Errorf("wait output = %v, want 7", got)
	}
}

func TestWaitForEventTimeoutTakesTheFalseBranch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, waitGraph)
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"wait": domain.NodeCompleted, "yes": domain.NodeSkipped, "no": domain.NodeCompleted})
	if rec := h.record("wait"); rec.Completed.Sub(rec.Started) < time.Hour {
		t.Errorf("wait lasted %s, want its hour", rec.Completed.Sub(rec.Started))
	}
}

func TestWaitForEventTimeoutWithoutAFalseBranchFailsTheNode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "wait", "type": "WAIT_FOR_EVENT", "config": {"event": "e", "timeout": "1m"}}]}`)
	res := h.mustRun()
	if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, `no event "e" came within 1m0s`) {
		t.Fatalf("result = %s (%s), want FAILED naming the event", res.Status, res.Error)
	}
}

func TestWaitForEventEndsWhenTheExecutionIsCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "wait", "type": "WAIT_FOR_EVENT", "config": {"event": "e"}}]}`)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Hour)
	if _, err := h.run(); err == nil {
		t.Fatal("workflow ended without error, want cancelled")
	}
	h.wantCompletion(domain.ExecutionCancelled, "execution cancelled")
	h.wantStatuses(map[string]domain.NodeStatus{"wait": domain.NodeCancelled})
}
