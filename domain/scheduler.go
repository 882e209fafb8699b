package domain

import (
	"errors"
	"fmt"
	"sort"
)

var (
	// ErrDeadlock is returned by Scheduler.Next when work is left but nothing
	// is running and nothing can become ready. A valid graph cannot get there;
	// returning an error instead of waiting forever turns a bug into a failed
	// execution rather than a hung one.
	ErrDeadlock = errors.New("scheduler deadlock: unresolved nodes but nothing running or ready")
	// ErrUnknownNode is wrapped when a caller reports on a key that is not in
	// the graph.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNodeNotRunning is wrapped when a caller reports the end of a node
	// that Next has not handed out, or that already ended. Accepting it would
	// double-count the node and corrupt the in-degree bookkeeping.
	ErrNodeNotRunning = errors.New("node is not running")
	// ErrConditionOutput is wrapped when a CONDITION node is completed with
	// an output that is not a bool, because the branch to take would be
	// unknown.
	ErrConditionOutput = errors.New("condition output must be a bool")
)

// nodeState is where one node is in the run.
type nodeState uint8

const (
	statePending   nodeState = iota // waiting for predecessors
	stateReady                      // predecessors resolved; Next will hand it out
	stateRunning                    // handed out by Next
	stateCompleted                  // ended with an output
	stateFailed                     // ended with a failure
	stateSkipped                    // never runs: no live incoming edge
)

// Scheduler decides the order in which one execution runs the nodes of its
// graph. Create one per execution with NewScheduler; it shares nothing with
// other schedulers, so concurrent executions cannot disturb each other (the
// design this replaces kept this state in a singleton). It is not safe for
// concurrent use by multiple goroutines, which Temporal workflow code never
// needs.
//
// Everything it returns is sorted by node key, and it iterates no maps, so a
// Temporal replay that feeds it the same events gets the same decisions.
type Scheduler struct {
	nodes    []Node         // sorted by key; a node's index is its id
	index    map[string]int // key -> id
	out      [][]int        // outgoing edge ids per node
	edges    []schedEdge
	inDegree []int // number of incoming edges
	resolved []int // incoming edges whose source is completed or skipped
	live     []int // incoming edges that were taken
	state    []nodeState
	running  int
	left     int // nodes not yet completed, failed or skipped
	failed   bool
}

// schedEdge is an edge by node id.
type schedEdge struct {
	from, to int
	when     *bool
}

// NewScheduler validates g and returns a scheduler for one run of it. The
// validation error is returned as is (a *ValidationError), since a graph that
// fails it could deadlock or never terminate.
func NewScheduler(g Graph) (*Scheduler, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return newScheduler(g), nil
}

// newScheduler builds a scheduler without validating g. Only tests use it
// directly, to reach states a valid graph cannot (a deadlock).
func newScheduler(g Graph) *Scheduler {
	s := &Scheduler{
		nodes: append([]Node(nil), g.Nodes...),
		index: make(map[string]int, len(g.Nodes)),
	}
	sort.SliceStable(s.nodes, func(i, j int) bool { return s.nodes[i].Key < s.nodes[j].Key })
	for i, n := range s.nodes {
		if _, dup := s.index[n.Key]; !dup {
			s.index[n.Key] = i
		}
	}
	n := len(s.nodes)
	s.out = make([][]int, n)
	s.inDegree = make([]int, n)
	s.resolved = make([]int, n)
	s.live = make([]int, n)
	s.state = make([]nodeState, n)
	s.left = n
	for _, e := range g.Edges {
		from, okF := s.index[e.From]
		to, okT := s.index[e.To]
		if !okF || !okT {
			continue
		}
		s.out[from] = append(s.out[from], len(s.edges))
		s.edges = append(s.edges, schedEdge{from: from, to: to, when: e.When})
		s.inDegree[to]++
	}
	for i := range s.nodes {
		if s.inDegree[i] == 0 {
			s.state[i] = stateReady
		}
	}
	return s
}

// Next hands out every node that became ready since the last call (all its
// predecessors resolved and at least one incoming edge live), sorted by key,
// and marks them running. Returning all of them at once lets the caller run
// independent nodes in parallel.
//
// It returns no nodes and no error when the caller must wait for running
// nodes, when the run is finished, or after a failure (a failure stops new
// work). It returns ErrDeadlock when nodes are unresolved but nothing is
// running or ready.
func (s *Scheduler) Next() ([]Node, error) {
	if s.failed {
		return nil, nil
	}
	var ready []Node
	for i := range s.nodes {
		if s.state[i] == stateReady {
			s.state[i] = stateRunning
			s.running++
			ready = append(ready, s.nodes[i])
		}
	}
	if len(ready) == 0 && s.running == 0 && s.left > 0 {
		return nil, fmt.Errorf("%w: %d node(s) unresolved: %v", ErrDeadlock, s.left, s.unresolved())
	}
	return ready, nil
}

// unresolved lists the keys of nodes that are neither done nor skipped.
func (s *Scheduler) unresolved() []string {
	var keys []string
	for i, n := range s.nodes {
		if s.state[i] == statePending || s.state[i] == stateReady || s.state[i] == stateRunning {
			keys = append(keys, n.Key)
		}
	}
	return keys
}

// running returns the id of a running node, or an error naming why not.
func (s *Scheduler) runningNode(key string) (int, error) {
	i, ok := s.index[key]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownNode, key)
	}
	if s.state[i] != stateRunning {
		return 0, fmt.Errorf("%w: %q", ErrNodeNotRunning, key)
	}
	return i, nil
}

// Completed records that a running node ended with output. For a CONDITION
// node output must be a bool, the branch taken: outgoing edges whose When
// differs from it are not followed. It returns the nodes that became skipped
// as a consequence, sorted: those whose incoming edges now all come from
// skipped nodes or untaken branches, cascading downstream.
func (s *Scheduler) Completed(key string, output any) (skipped []string, err error) {
	i, err := s.runningNode(key)
	if err != nil {
		return nil, err
	}
	var result, isCondition bool
	if s.nodes[i].Type == NodeCondition {
		b, ok := output.(bool)
		if !ok {
			return nil, fmt.Errorf("%w: node %q returned %T", ErrConditionOutput, key, output)
		}
		result, isCondition = b, true
	}
	return s.complete(i, isCondition, result), nil
}

// CompletedOnBranch records that a running node whose outcome picks a
// branch (a WAIT_FOR_EVENT: true when its event came, false when it timed
// out) ended: outgoing edges whose When differs from branch are not
// followed. It returns the nodes that became skipped, as Completed does.
func (s *Scheduler) CompletedOnBranch(key string, branch bool) (skipped []string, err error) {
	i, err := s.runningNode(key)
	if err != nil {
		return nil, err
	}
	return s.complete(i, true, branch), nil
}

// complete marks running node i completed and resolves its outgoing edges:
// all of them, or with branching those whose When is unset or result.
func (s *Scheduler) complete(i int, branching, result bool) []string {
	isCondition := branching
	s.state[i] = stateCompleted
	s.running--
	s.left--
	var newly []int
	for _, e := range s.out[i] {
		taken := !isCondition || s.edges[e].when == nil || *s.edges[e].when == result
		newly = s.resolveEdge(s.edges[e].to, taken, newly)
	}
	return s.keysOf(newly)
}

// Failed records that a running node failed. No node starts after this; nodes
// still running may still report their end.
func (s *Scheduler) Failed(key string) error {
	i, err := s.runningNode(key)
	if err != nil {
		return err
	}
	s.state[i] = stateFailed
	s.running--
	s.left--
	s.failed = true
	return nil
}

// resolveEdge records that one incoming edge of node to is resolved, live or
// not, and decides the node once all its incoming edges are: ready if any was
// live, else skipped, which resolves its own outgoing edges as dead in turn.
// Newly skipped ids are appended to skipped.
func (s *Scheduler) resolveEdge(to int, live bool, skipped []int) []int {
	work := []struct {
		to   int
		live bool
	}{{to, live}}
	for len(work) > 0 {
		w := work[len(work)-1]
		work = work[:len(work)-1]
		s.resolved[w.to]++
		if w.live {
			s.live[w.to]++
		}
		if s.resolved[w.to] < s.inDegree[w.to] || s.state[w.to] != statePending {
			continue
		}
		if s.live[w.to] > 0 {
			s.state[w.to] = stateReady
			continue
		}
		s.state[w.to] = stateSkipped
		s.left--
		skipped = append(skipped, w.to)
		for _, e := range s.out[w.to] {
			work = append(work, struct {
				to   int
				live bool
			}{s.edges[e].to, false})
		}
	}
	return skipped
}

// keysOf returns the keys of node ids, sorted.
func (s *Scheduler) keysOf(ids []int) []string {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.nodes[id].Key
	}
	sort.Strings(keys)
	return keys
}

// Unrun lists, sorted, the nodes that never started and were not skipped.
// After a failure these are the nodes the failure prevented, which an
// execution report should show.
func (s *Scheduler) Unrun() []string {
	var keys []string
	for i, n := range s.nodes {
		if s.state[i] == statePending || s.state[i] == stateReady {
			keys = append(keys, n.Key)
		}
	}
	return keys
}
