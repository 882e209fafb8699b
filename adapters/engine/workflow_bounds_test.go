package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

func TestExecutionSizesEachWorkflowTaskAgainstTheTaskLimit(t *testing.T) {
	t.Parallel()
	// Six parallel TRANSFORMs of 900 bytes each under a task limit that
	// holds two results: the workflow ends tasks (1 ms timers) rather than
	// let one carry all six, and every node still runs and is recorded.
	var nodes []string
	for i := range 6 {
		nodes = append(nodes, fmt.Sprintf(`{"key": "t%d", "type": "TRANSFORM", "config": {"output": "{{ input.s }}"}}`, i))
	}
	h := newHarness(t, `{"nodes": [`+strings.Join(nodes, ",")+`]}`).withInput(`{"s": "` + strings.Repeat("x", 900) + `"}`)
	h.wf.Limits = RunLimits{PayloadLimit: 1000, TaskLimit: 4000}
	h.acts.PayloadLimit = 1000
	var timers atomic.Int32
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers.Add(1) })
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	want := map[string]domain.NodeStatus{}
	for i := range 6 {
		want[fmt.Sprintf("t%d", i)] = domain.NodeCompleted
	}
	h.wantStatuses(want)
	// A task holds 4000 bytes: with 1,024 of overhead per share, one
	// result (1,924) and one reservation (2,024), so each task starts at
	// most two nodes and the six need at least two task boundaries.
	if n := timers.Load(); n < 2 {
		t.Errorf("%d task boundaries, want at least 2", n)
	}
}

func TestExecutionWithinTheTaskLimitNeedsNoTaskBoundary(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [
		{"key": "a", "type": "TRANSFORM", "config": {"output": 1}},
		{"key": "b", "type": "TRANSFORM", "config": {"output": 2}}
	]}`)
	var timers atomic.Int32
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers.Add(1) })
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if n := timers.Load(); n != 0 {
		t.Errorf("%d timers, want none for two small pure nodes", n)
	}
}

func TestExecutionWhoseCompletionCannotBeWrittenIsRecordedFailed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
	var refused atomic.Int32
	h.store.refuseFinish = func(status domain.ExecutionStatus) error {
		if status == domain.ExecutionCompleted {
			refused.Add(1)
			return errors.New("ERROR: unsupported Unicode escape sequence (SQLSTATE 22P05)")
		}
		return nil
	}
	res := h.mustRun()

	if n := refused.Load(); n != completionAttempts {
		t.Errorf("the completion was tried %d times, want %d", n, completionAttempts)
	}
	wantErr := "recording the execution COMPLETED failed after 10 attempts, so it is recorded FAILED without its last node records: ERROR: unsupported Unicode escape sequence (SQLSTATE 22P05)"
	if res.Status != domain.ExecutionFailed || res.Error != wantErr {
		t.Fatalf("result = %+v, want FAILED naming the error", res)
	}
	h.wantCompletion(domain.ExecutionFailed, wantErr)
}

func TestExecutionDropsOutputsNoNodeIsLeftToRead(t *testing.T) {
	t.Parallel()
	g, err := domain.DecodeGraph([]byte(`{"nodes": [
		{"key": "a", "type": "TRANSFORM", "config": {"output": 1}},
		{"key": "b", "type": "TRANSFORM", "config": {"output": 2}},
		{"key": "c", "type": "TRANSFORM", "config": {"output": ["{{ steps.a.output }}", "{{ steps.b.output }}"]}},
		{"key": "d", "type": "TRANSFORM", "config": {"output": "{{ steps.a.output }}"}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	run := &executionRun{outputs: map[string]any{"a": 1, "b": 2}, readers: map[string]int{"a": 2, "b": 1}}
	run.started(g.Nodes[2])
	if _, ok := run.outputs["a"]; !ok {
		t.Error("a's output was dropped while d is still to read it")
	}
	if _, ok := run.outputs["b"]; ok {
		t.Error("b's output is kept with no node left to read it")
	}
	run.started(g.Nodes[3])
	if len(run.outputs) != 0 {
		t.Errorf("outputs kept: %v", run.outputs)
	}
}
