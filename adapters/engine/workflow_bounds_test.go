package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"

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

// TestManyParallelPureNodesShareOneWorkflowTask: 100 parallel TRANSFORM
// nodes of 20 KB each under the default limits (1.5 MiB payload, 3 MiB
// task). Each reserves the room of what it carries (withOutputRoom), about
// 21 KB, so the first workflow task holds all of them (2.1 MB) and no task
// is ended by a timer. Each once reserved the payload limit, so a task
// held one running at a time, and, as the test environment keeps one
// history length (its one workflow task spans the run), the results
// piled up past the task limit's other half after some 70 nodes and a
// timer ended the task; on a server, whose every local activity result
// starts a task, each node was a task.
func TestManyParallelPureNodesShareOneWorkflowTask(t *testing.T) {
	t.Parallel()
	const parallel = 100
	var nodes []string
	want := map[string]domain.NodeStatus{}
	for i := range parallel {
		nodes = append(nodes, fmt.Sprintf(`{"key": "t%d", "type": "TRANSFORM", "config": {"output": {"i": %d, "s": "{{ input.s }}"}}}`, i, i))
		want[fmt.Sprintf("t%d", i)] = domain.NodeCompleted
	}
	h := newHarness(t, `{"nodes": [`+strings.Join(nodes, ",")+`]}`).withInput(`{"s": "` + strings.Repeat("x", 20_000) + `"}`)
	var timers atomic.Int32
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers.Add(1) })
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	h.wantStatuses(want)
	if n := timers.Load(); n != 0 {
		t.Errorf("%d workflow tasks ended by a timer for %d pure nodes of 20 KB, want none: they fit one task together", n, parallel)
	}
}

// TestPureNodeOutgrowingItsRoomRunsAgainWithThePayloadLimit: a TRANSFORM
// node's task reserves the room of what it carries, and an output built
// past it (what it read, repeated 40 times) is not returned in that task:
// the node runs again with the payload limit reserved, and the run
// completes with the whole output, which the node after it reads.
func TestPureNodeOutgrowingItsRoomRunsAgainWithThePayloadLimit(t *testing.T) {
	t.Parallel()
	many := strings.TrimSuffix(strings.Repeat(`"{{ input.s }}", `, 40), ", ")
	h := newHarness(t, `{"nodes": [
		{"key": "big", "type": "TRANSFORM", "config": {"output": [`+many+`]}},
		{"key": "after", "type": "TRANSFORM", "config": {"output": "{{ steps.big.output[39] }}"}}
	], "edges": [{"from": "big", "to": "after"}]}`).withInput(`{"s": "` + strings.Repeat("x", 1000) + `"}`)
	var (
		mu   sync.Mutex
		runs []int
	)
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		if info.ActivityType.Name != runPureNodeActivity || len(args) != 1 {
			return
		}
		if in, ok := args[0].(RunNodeInput); ok && in.Node.Key == "big" {
			mu.Lock()
			runs = append(runs, in.OutputRoom)
			mu.Unlock()
		}
	})
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if got := h.record("after").Output; got != strings.Repeat("x", 1000) {
		t.Errorf("after read %.40v from big's 40th copy, want the input", got)
	}
	if rec := h.record("big"); rec.Status != domain.NodeCompleted {
		t.Errorf("big is %s, want COMPLETED", rec.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 || runs[0] <= 0 || runs[0] >= 40_000 || runs[1] != 0 {
		t.Errorf("big ran with rooms %v, want its own room (under its 40 KB output), then the payload limit's (0)", runs)
	}
}
