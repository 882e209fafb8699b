package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
)

// subWorkflows is a workspace's definitions for CheckSubWorkflows, with
// the loads it answered.
type subWorkflows struct {
	graphs map[ID]Graph
	loads  map[subWorkflowRef]int
}

func newSubWorkflows() *subWorkflows {
	return &subWorkflows{graphs: map[ID]Graph{}, loads: map[subWorkflowRef]int{}}
}

// add stores g as a new definition and returns its id.
func (s *subWorkflows) add(g Graph) ID {
	id := ID(uuid.New())
	s.graphs[id] = g
	return id
}

// load is a SubWorkflowLoader over the stored definitions.
func (s *subWorkflows) load(def ID, version int) (Graph, error) {
	s.loads[subWorkflowRef{definition: def, version: version}]++
	g, ok := s.graphs[def]
	if !ok {
		return Graph{}, errors.New("no such definition in this workspace")
	}
	return g, nil
}

// fanOut is a graph of n SUB_WORKFLOW nodes each running child.
func fanOut(n int, child ID) Graph {
	var g Graph
	for i := range n {
		g.Nodes = append(g.Nodes, Node{Key: fmt.Sprintf("s%d", i), Type: NodeSubWorkflow,
			Config: json.RawMessage(fmt.Sprintf(`{"definition": %q}`, child))})
	}
	return g
}

// delays is a graph of n DELAY nodes.
func delays(n int) Graph {
	var g Graph
	for i := range n {
		g.Nodes = append(g.Nodes, Node{Key: fmt.Sprintf("d%d", i), Type: NodeDelay, Config: json.RawMessage(`{"duration": "10m"}`)})
	}
	return g
}

func TestCheckSubWorkflowsCountsTheChildRunsNodesAlongTheTree(t *testing.T) {
	t.Parallel()
	s := newSubWorkflows()
	c := s.add(delays(1))
	b := s.add(fanOut(100, c))
	for _, tt := range []struct {
		name  string
		g     Graph
		limit int
		want  []Problem
	}{
		// 100 children of 1 node.
		{"a fan-out of 100 one-node children at 100", fanOut(100, c), 100, nil},
		// 100 children of 100 nodes, each running 100 children of 1.
		{"100 x 100 is 20,000 nodes", fanOut(100, b), 19_999, []Problem{{"/nodes/99/config/definition", "child runs of 20000 nodes in all"}}},
		{"100 x 100 within 20,000", fanOut(100, b), 20_000, nil},
		{"the node that passes the quota is named with the whole count", fanOut(3, b), 250, []Problem{{"/nodes/1/config/definition", "child runs of 600 nodes in all (sub-workflows of every level), over the workspace's subWorkflowNodes quota of 250"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSubWorkflows(ID(uuid.New()), tt.g, tt.limit, s.load)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckSubWorkflows: %v, want nil", err)
				}
				return
			}
			assertProblems(t, problems(t, err), tt.want)
		})
	}
}

func TestCheckSubWorkflowsLoadsEachDefinitionVersionOnce(t *testing.T) {
	t.Parallel()
	s := newSubWorkflows()
	c := s.add(delays(1))
	b := s.add(fanOut(100, c))
	// The shape that loaded the child graph 10,100 times: 100 x 100.
	if err := CheckSubWorkflows(ID(uuid.New()), fanOut(100, b), 1_000_000, s.load); err != nil {
		t.Fatal(err)
	}
	for ref, n := range s.loads {
		if n != 1 {
			t.Errorf("%s version %d loaded %d times, want once", ref.definition, ref.version, n)
		}
	}
	if len(s.loads) != 2 {
		t.Errorf("%d definition versions loaded, want 2 (b and c)", len(s.loads))
	}
}

func TestCheckSubWorkflowsRefusesCyclesDepthAndMissingDefinitions(t *testing.T) {
	t.Parallel()
	s := newSubWorkflows()
	self := ID(uuid.New())
	leaf := s.add(delays(1))
	d3 := s.add(fanOut(1, leaf))
	d2 := s.add(fanOut(1, d3))
	d1 := s.add(fanOut(1, d2))
	// a and b name each other; both are reached twice from the graph.
	a, b := ID(uuid.New()), ID(uuid.New())
	s.graphs[a] = fanOut(2, b)
	s.graphs[b] = fanOut(1, a)
	toSelf := s.add(fanOut(1, self))
	for _, tt := range []struct {
		name string
		g    Graph
		want []Problem
	}{
		{"three levels", fanOut(1, d2), nil},
		{"four levels", fanOut(1, d1), []Problem{{"/nodes/0/config/definition", "nest deeper than the limit of 3"}}},
		{"a cycle between two stored definitions", fanOut(2, a), []Problem{
			{"/nodes/0/config/definition", "form a cycle: " + self.String() + " -> " + a.String() + " -> " + b.String() + " -> " + a.String()},
			{"/nodes/1/config/definition", "form a cycle"}}},
		{"back to the definition being saved", fanOut(1, toSelf), []Problem{{"/nodes/0/config/definition", "form a cycle"}}},
		{"a missing definition", fanOut(1, ID(uuid.New())), []Problem{{"/nodes/0/config/definition", "no such definition"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSubWorkflows(self, tt.g, 1_000_000, s.load)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CheckSubWorkflows: %v, want nil", err)
				}
				return
			}
			assertProblems(t, problems(t, err), tt.want)
		})
	}
}
func TestPinnedVersionsAreTheSubWorkflowsRunByNumber(t *testing.T) {
	t.Parallel()
	a, b := ID(uuid.New()), ID(uuid.New())
	g, err := DecodeGraph(fmt.Appendf(nil, `{"nodes": [
		{"key": "pinned", "type": "SUB_WORKFLOW", "config": {"definition": %[1]q, "version": 2}},
		{"key": "again", "type": "SUB_WORKFLOW", "config": {"definition": %[1]q, "version": 2}},
		{"key": "older", "type": "SUB_WORKFLOW", "config": {"definition": %[1]q, "version": 1}},
		{"key": "current", "type": "SUB_WORKFLOW", "config": {"definition": %[2]q}},
		{"key": "other", "type": "TRANSFORM", "config": {"output": {"definition": %[2]q, "version": 3}}}
	]}`, a, b))
	if err != nil {
		t.Fatal(err)
	}
	want := []PinnedVersion{{Definition: a, Version: 2}, {Definition: a, Version: 1}}
	if got := g.PinnedVersions(); !slices.Equal(got, want) {
		t.Errorf("PinnedVersions() = %v, want %v (each once, none for the current version or another node type)", got, want)
	}
	if got := (Graph{}).PinnedVersions(); len(got) != 0 {
		t.Errorf("an empty graph pins %v", got)
	}
}
