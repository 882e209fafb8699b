package domain

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// This file checks the scheduler against an independent model on thousands
// of random DAGs. The scheduler works incrementally (counters per node,
// updated on each event); the model recomputes everything from scratch, in
// topological order, from the set of resolved nodes. At the end, the set of
// nodes that ran is compared with plain forward reachability, a third,
// simpler formulation of the branching rule.

// randomDAG is a random graph together with a topological order of its keys.
type randomDAG struct {
	g     Graph
	topo  []string            // keys in a topological order
	preds map[string][]Edge   // incoming edges by target
	succ  map[string][]Edge   // outgoing edges by source
	types map[string]NodeType // node types by key
	roots map[string]bool     // nodes without incoming edges
}

func genDAG(r *rand.Rand) randomDAG {
	n := r.IntN(16)
	density := 0.05 + r.Float64()*0.45
	d := randomDAG{
		preds: map[string][]Edge{}, succ: map[string][]Edge{}, types: map[string]NodeType{},
		roots: map[string]bool{},
	}
	// Keys are assigned in random order so key order and topological order
	// differ.
	for _, k := range r.Perm(n) {
		key := fmt.Sprintf("k%02d", k)
		d.topo = append(d.topo, key)
		node := transform(key)
		if r.IntN(10) < 3 {
			node = condition(key)
		}
		d.types[key] = node.Type
		d.g.Nodes = append(d.g.Nodes, node)
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if r.Float64() >= density {
				continue
			}
			e := edge(d.topo[i], d.topo[j])
			if d.types[e.From] == NodeCondition {
				switch r.IntN(3) {
				case 0:
					e = when(e.From, e.To, true)
				case 1:
					e = when(e.From, e.To, false)
				}
			}
			d.g.Edges = append(d.g.Edges, e)
		}
	}
	r.Shuffle(len(d.g.Nodes), func(i, j int) { d.g.Nodes[i], d.g.Nodes[j] = d.g.Nodes[j], d.g.Nodes[i] })
	r.Shuffle(len(d.g.Edges), func(i, j int) { d.g.Edges[i], d.g.Edges[j] = d.g.Edges[j], d.g.Edges[i] })
	for _, e := range d.g.Edges {
		d.preds[e.To] = append(d.preds[e.To], e)
		d.succ[e.From] = append(d.succ[e.From], e)
	}
	for _, k := range d.topo {
		if len(d.preds[k]) == 0 {
			d.roots[k] = true
		}
	}
	return d
}

// model is the from-scratch view of a run.
type model struct {
	d         *randomDAG
	outcome   map[string]bool // result of every CONDITION, fixed up front
	completed map[string]bool
	started   map[string]bool
	failed    map[string]bool
}

// edgeState classifies an edge given what has been resolved so far.
func (m *model) edgeState(e Edge, dead map[string]bool) (resolved, live bool) {
	switch {
	case dead[e.From]:
		return true, false
	case m.completed[e.From]:
		taken := m.d.types[e.From] != NodeCondition || e.When == nil || *e.When == m.outcome[e.From]
		return true, taken
	}
	return false, false
}

// dead computes, in topological order, the nodes the branching rule skips:
// nodes with incoming edges that are all resolved and none live.
func (m *model) dead() map[string]bool {
	dead := map[string]bool{}
	for _, k := range m.d.topo {
		if m.d.roots[k] || m.started[k] {
			continue
		}
		allResolved, anyLive := true, false
		for _, e := range m.d.preds[k] {
			res, live := m.edgeState(e, dead)
			allResolved = allResolved && res
			anyLive = anyLive || live
		}
		if allResolved && !anyLive {
			dead[k] = true
		}
	}
	return dead
}

// ready lists, sorted, the nodes that have not started, are not dead, and
// whose incoming edges are all resolved: everything that could run now.
func (m *model) ready() []string {
	dead := m.dead()
	var out []string
	for _, k := range m.d.topo {
		if m.started[k] || dead[k] {
			continue
		}
		ok := true
		for _, e := range m.d.preds[k] {
			if res, _ := m.edgeState(e, dead); !res {
				ok = false
			}
		}
		if ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// reachable is forward reachability from the roots along taken edges of
// nodes that completed under the fixed outcomes.
func (m *model) reachable() map[string]bool {
	reach := map[string]bool{}
	for _, k := range m.d.topo {
		if m.d.roots[k] {
			reach[k] = true
		}
		if !reach[k] {
			continue
		}
		for _, e := range m.d.succ[k] {
			if m.d.types[k] != NodeCondition || e.When == nil || *e.When == m.outcome[k] {
				reach[e.To] = true
			}
		}
	}
	return reach
}

func sortedSet(s map[string]bool) []string {
	var out []string
	for k, v := range s {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// runRandom drives one scheduler over d with random completion order, random
// condition outcomes, occasional external skips and, if withFailure, one
// failure, checking every step against the model.
func runRandom(t *testing.T, r *rand.Rand, d randomDAG, withFailure bool) {
	t.Helper()
	s, err := NewScheduler(d.g)
	if err != nil {
		t.Fatalf("valid DAG rejected: %v\n%+v", err, d.g)
	}
	m := &model{d: &d, outcome: map[string]bool{}, completed: map[string]bool{}, started: map[string]bool{}, failed: map[string]bool{}}
	for _, k := range d.topo {
		m.outcome[k] = r.IntN(2) == 0
	}
	failAt := ""
	if withFailure && len(d.topo) > 0 {
		failAt = d.topo[r.IntN(len(d.topo))]
	}
	var running []string
	anyFailed := false
	skippedByScheduler := map[string]bool{}

	for round := 0; ; round++ {
		if round > 4*len(d.topo)+4 {
			t.Fatalf("no progress after %d rounds", round)
		}
		nodes, err := s.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		var got []string
		for _, n := range nodes {
			got = append(got, n.Key)
		}
		want := m.ready()
		if anyFailed {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: Next() = %q, model says ready %q", round, got, want)
		}
		for _, k := range got {
			if m.started[k] {
				t.Fatalf("%s started twice", k)
			}
			// Order consistent with the edges: every predecessor resolved.
			for _, e := range d.preds[k] {
				if !m.completed[e.From] && !skippedByScheduler[e.From] {
					t.Fatalf("%s started before its predecessor %s resolved", k, e.From)
				}
			}
			m.started[k] = true
			running = append(running, k)
		}
		if len(running) == 0 {
			break
		}
		// Finish a random non-empty subset of the running nodes, in random order.
		r.Shuffle(len(running), func(i, j int) { running[i], running[j] = running[j], running[i] })
		n := 1 + r.IntN(len(running))
		finish, rest := running[:n], append([]string(nil), running[n:]...)
		for _, k := range finish {
			before := m.dead()
			var newly []string
			switch {
			case k == failAt:
				if err := s.Failed(k); err != nil {
					t.Fatal(err)
				}
				m.failed[k] = true
				anyFailed = true
				continue
			case d.types[k] == NodeCondition:
				newly, err = s.Completed(k, m.outcome[k])
				m.completed[k] = true
			default:
				newly, err = s.Completed(k, k)
				m.completed[k] = true
			}
			if err != nil {
				t.Fatalf("finishing %s: %v", k, err)
			}
			after := m.dead()
			var wantNewly []string
			for dk := range after {
				if !before[dk] {
					wantNewly = append(wantNewly, dk)
				}
			}
			sort.Strings(wantNewly)
			if !reflect.DeepEqual(newly, wantNewly) {
				t.Fatalf("finishing %s skipped %q, model says %q", k, newly, wantNewly)
			}
			for _, dk := range newly {
				skippedByScheduler[dk] = true
			}
		}
		running = rest
		if s.finished() != (len(running) == 0 && (anyFailed || len(m.started)+len(skippedByScheduler) == len(d.topo))) {
			t.Fatalf("finished() = %v with %d running", s.finished(), len(running))
		}
	}

	if !s.finished() {
		t.Fatal("not finished with nothing running")
	}
	// Every node started at most once (checked above) and, without a failure,
	// exactly the reachable nodes ran and all others were skipped.
	dead := m.dead()
	if !anyFailed {
		reach := m.reachable()
		if got, want := sortedSet(m.started), sortedSet(reach); !reflect.DeepEqual(got, want) {
			t.Fatalf("ran %q, reachable %q\ngraph %+v\noutcomes %v", got, want, d.g, m.outcome)
		}
		for _, k := range d.topo {
			if !reach[k] && !dead[k] {
				t.Fatalf("unreachable %s not skipped", k)
			}
		}
		if len(s.Unrun()) != 0 {
			t.Fatalf("Unrun() = %q without a failure", s.Unrun())
		}
	} else {
		var wantUnrun []string
		for _, k := range d.topo {
			if !m.started[k] && !dead[k] {
				wantUnrun = append(wantUnrun, k)
			}
		}
		sort.Strings(wantUnrun)
		if got := s.Unrun(); !reflect.DeepEqual(got, wantUnrun) {
			t.Fatalf("Unrun() = %q, want %q", got, wantUnrun)
		}
	}
}

// TestSchedulerProperties runs 4,000 random DAGs (fixed seeds, so failures
// reproduce) through runRandom; a fifth of them inject a node failure.
func TestSchedulerProperties(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			for i := 0; i < 1000; i++ {
				d := genDAG(r)
				withFailure := r.IntN(5) == 0
				ok := t.Run(fmt.Sprintf("dag%d", i), func(t *testing.T) {
					runRandom(t, r, d, withFailure)
				})
				if !ok {
					return
				}
			}
		})
	}
}

// TestSchedulerReadySetsAreMaximal completes nodes strictly in waves: every
// wave must contain every node whose predecessors are all done, which is the
// most parallelism the graph allows; on graphs without conditions the number
// of waves is then the length of the longest path.
func TestSchedulerReadySetsAreMaximal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(42, 7))
	for i := 0; i < 500; i++ {
		d := genDAG(r)
		for j := range d.g.Nodes {
			d.g.Nodes[j] = transform(d.g.Nodes[j].Key)
			d.types[d.g.Nodes[j].Key] = NodeTransform
		}
		for j := range d.g.Edges {
			d.g.Edges[j].When = nil
		}
		s, err := NewScheduler(d.g)
		if err != nil {
			t.Fatal(err)
		}
		// depth[k] = length of the longest path ending at k.
		depth := map[string]int{}
		longest := 0
		for _, k := range d.topo {
			for _, e := range d.preds[k] {
				depth[k] = max(depth[k], depth[e.From]+1)
			}
			longest = max(longest, depth[k]+1)
		}
		waves := 0
		for {
			nodes, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) == 0 {
				break
			}
			for _, n := range nodes {
				if depth[n.Key] != waves {
					t.Fatalf("dag %d: %s (depth %d) ran in wave %d", i, n.Key, depth[n.Key], waves)
				}
			}
			for _, n := range nodes {
				if _, err := s.Completed(n.Key, nil); err != nil {
					t.Fatal(err)
				}
			}
			waves++
		}
		if waves != longest || !s.finished() {
			t.Fatalf("dag %d: %d waves, longest path %d, finished %v", i, waves, longest, s.finished())
		}
	}
}
