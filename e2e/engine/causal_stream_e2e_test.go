package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/e2e/harness"
)

// TestAnExecutionsStreamTellsEachNodeAfterTheNodesItWaitsOn: a DAG with a
// DELAY after two nodes (a → w1 DELAY and a → b, both → w2 DELAY → c),
// run several times and each run's stream read whole after it ends: for
// every edge u → v, v's first event (node.started, or node.finished for a
// node recorded only as it ends) comes after u's node.finished in the
// stream's sequence, and v's startedAt is not before u's completedAt. A
// client following the stream never sees a node start before its inputs
// exist.
func TestAnExecutionsStreamTellsEachNodeAfterTheNodesItWaitsOn(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	graph := map[string]any{
		"nodes": []any{
			harness.Node("a", "TRANSFORM", map[string]any{"output": map[string]any{"x": 1}}),
			harness.Node("w1", "DELAY", map[string]any{"duration": "20ms"}),
			harness.Node("b", "TRANSFORM", map[string]any{"output": map[string]any{"y": "{{ steps.a.output.x }}"}}),
			harness.Node("w2", "DELAY", map[string]any{"duration": "50ms"}),
			harness.Node("c", "TRANSFORM", map[string]any{"output": map[string]any{"z": "{{ steps.b.output.y }}"}}),
		},
		"edges": []any{harness.Edge("a", "w1"), harness.Edge("a", "b"), harness.Edge("w1", "w2"), harness.Edge("b", "w2"), harness.Edge("w2", "c")},
	}
	edges := [][2]string{{"a", "w1"}, {"a", "b"}, {"w1", "w2"}, {"b", "w2"}, {"w2", "c"}}
	const runs = 5
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for run := range runs {
		exec := e.StartIn(graph, nil)
		e.WaitFor(exec, "COMPLETED")
		var evs []sseEvent
		for ev := range openStream(ctx, t, base+"/api/v1/workflow/executions/"+exec+"/events", 0) {
			evs = append(evs, ev)
		}
		var b strings.Builder
		first, finished := map[string]sseEvent{}, map[string]sseEvent{}
		for _, ev := range evs {
			key, _ := ev.Data["key"].(string)
			fmt.Fprintf(&b, "%d:%s(%s) ", ev.ID, ev.Event, key)
			if key == "" {
				continue
			}
			if _, ok := first[key]; !ok {
				first[key] = ev
			}
			if ev.Event == "node.finished" {
				finished[key] = ev
			}
		}
		t.Logf("run %d: %s", run, b.String())
		for _, edge := range edges {
			u, v := edge[0], edge[1]
			uf, ok := finished[u]
			vf, vok := first[v]
			if !ok || !vok {
				t.Fatalf("run %d: no events for %s or %s: %s", run, u, v, b.String())
			}
			if vf.ID < uf.ID {
				t.Errorf("run %d: edge %s → %s: %s's %s is event %d, before %s's node.finished, event %d", run, u, v, v, vf.Event, vf.ID, u, uf.ID)
			}
			started, err1 := time.Parse(time.RFC3339Nano, fmt.Sprint(vf.Data["startedAt"]))
			completed, err2 := time.Parse(time.RFC3339Nano, fmt.Sprint(uf.Data["completedAt"]))
			if err1 != nil || err2 != nil {
				t.Fatalf("run %d: edge %s → %s: times %v, %v: %v %v", run, u, v, vf.Data["startedAt"], uf.Data["completedAt"], err1, err2)
			}
			if started.Before(completed) {
				t.Errorf("run %d: edge %s → %s: %s started at %s, %s before %s completed at %s", run, u, v, v, started.Format(time.RFC3339Nano), completed.Sub(started), u, completed.Format(time.RFC3339Nano))
			}
		}
	}
}
