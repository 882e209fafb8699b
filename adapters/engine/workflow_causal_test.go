package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
)

// randomCausalGraph is a random DAG of n nodes (TRANSFORM, DELAY of 0 to
// 5 ms, CONDITION), each with edges from up to three earlier nodes; an
// edge leaving a CONDITION is taken on true, on false or always.
func randomCausalGraph(rng *rand.Rand, n int) (string, []domain.Edge) {
	var nodes []string
	var edges []domain.Edge
	types := make([]domain.NodeType, n)
	for i := range n {
		key := fmt.Sprintf("n%d", i)
		switch rng.IntN(3) {
		case 0:
			types[i] = domain.NodeDelay
			nodes = append(nodes, fmt.Sprintf(`{"key": %q, "type": "DELAY", "config": {"duration": "%dms"}}`, key, rng.IntN(6)))
		case 1:
			types[i] = domain.NodeCondition
			nodes = append(nodes, fmt.Sprintf(`{"key": %q, "type": "CONDITION", "config": {"left": %d, "op": ">", "right": 2}}`, key, rng.IntN(5)))
		default:
			types[i] = domain.NodeTransform
			nodes = append(nodes, fmt.Sprintf(`{"key": %q, "type": "TRANSFORM", "config": {"output": {"i": %d}}}`, key, i))
		}
		if i == 0 {
			continue
		}
		for range rng.IntN(4) {
			from := rng.IntN(i)
			e := domain.Edge{From: fmt.Sprintf("n%d", from), To: key}
			if types[from] == domain.NodeCondition {
				if w := rng.IntN(3); w < 2 {
					when := w == 0
					e.When = &when
				}
			}
			if !hasEdge(edges, e.From, e.To) {
				edges = append(edges, e)
			}
		}
	}
	raw, err := json.Marshal(edges)
	if err != nil {
		panic(err)
	}
	return `{"nodes": [` + strings.Join(nodes, ",") + `], "edges": ` + string(raw) + `}`, edges
}

func hasEdge(edges []domain.Edge, from, to string) bool {
	for _, e := range edges {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}

// TestExecutionWritesEachNodeAfterTheNodesItWaitsOn is a property over
// random DAGs of pure nodes, DELAYs and CONDITIONs: in the order the run
// writes node records to the store (the order the Postgres feed turns
// into its stream's events), for every edge u → v of a node v that ran, v's
// first write (RUNNING, or its end for a node recorded only as it ends)
// comes after u's end is written, and v's start is not before u's end.
func TestExecutionWritesEachNodeAfterTheNodesItWaitsOn(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	const graphs = 40
	checked := 0
	for g := range graphs {
		graph, edges := randomCausalGraph(rng, 3+rng.IntN(8))
		h := newHarness(t, graph)
		res := h.mustRun()
		if res.Status != domain.ExecutionCompleted {
			t.Fatalf("graph %d %s: status %s (%s)", g, graph, res.Status, res.Error)
		}
		first, ended := map[string]int{}, map[string]int{}
		recs := map[string][2]*time.Time{}
		var order []string
		for i, w := range h.store.writes {
			k := w.Record.Key
			order = append(order, fmt.Sprintf("%s:%s", k, w.Record.Status))
			if _, ok := first[k]; !ok {
				first[k] = i
				recs[k] = [2]*time.Time{w.Record.StartedAt, nil}
			}
			if w.Record.Status != domain.NodeRunning {
				ended[k] = i
				r := recs[k]
				r[1] = w.Record.CompletedAt
				recs[k] = r
			}
		}
		for _, e := range edges {
			v, ran := first[e.To]
			if !ran || h.store.statuses(h.execID)[e.To] == domain.NodeSkipped {
				continue
			}
			checked++
			u, ok := ended[e.From]
			if !ok {
				t.Fatalf("graph %d %s: %s ran but %s's end was never written; writes %v", g, graph, e.To, e.From, order)
			}
			if v < u {
				t.Errorf("graph %d: edge %s → %s: %s's write %d comes before %s's end, write %d; writes %v\n%s", g, e.From, e.To, e.To, v, e.From, u, order, graph)
			}
			started, done := recs[e.To][0], recs[e.From][1]
			if started == nil || done == nil {
				t.Fatalf("graph %d: edge %s → %s: start %v, end %v", g, e.From, e.To, started, done)
			}
			if started.Before(*done) {
				t.Errorf("graph %d: edge %s → %s: %s started at %s, %s before %s ended at %s\n%s", g, e.From, e.To, e.To,
					started.Format(time.RFC3339Nano), done.Sub(*started), e.From, done.Format(time.RFC3339Nano), graph)
			}
		}
	}
	t.Logf("%d graphs, %d edges into nodes that ran checked", graphs, checked)
	if checked == 0 {
		t.Fatal("no edge checked")
	}
}
