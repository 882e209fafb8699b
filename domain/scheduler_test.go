package domain

import (
	"errors"
	"reflect"
	"testing"
)

// schedStep is one call in a scheduler scenario.
type schedStep struct {
	op      string // "next", "complete", "fail"
	key     string
	output  any
	want    []string // nodes from next, or newly skipped nodes
	wantErr error
}

func next(want ...string) schedStep { return schedStep{op: "next", want: want} }

func complete(key string, output any, skipped ...string) schedStep {
	return schedStep{op: "complete", key: key, output: output, want: skipped}
}

func fail(key string) schedStep { return schedStep{op: "fail", key: key} }

func refused(s schedStep, err error) schedStep {
	s.wantErr = err
	return s
}

func TestScheduler(t *testing.T) {
	t.Parallel()
	nodes := func(ns ...Node) []Node { return ns }
	tests := []struct {
		name         string
		g            Graph
		steps        []schedStep
		wantFinished bool
		wantUnrun    []string
	}{
		{
			name:         "empty graph finishes at once",
			g:            Graph{},
			steps:        []schedStep{next(), next()},
			wantFinished: true,
		},
		{
			name: "chain runs in order",
			g:    Graph{Nodes: nodes(transform("c"), transform("b"), transform("a")), Edges: []Edge{edge("a", "b"), edge("b", "c")}},
			steps: []schedStep{
				next("a"), next(), complete("a", 1.0),
				next("b"), complete("b", 2.0),
				next("c"), complete("c", 3.0), next(),
			},
			wantFinished: true,
		},
		{
			name: "independent nodes are ready together, sorted",
			g: Graph{Nodes: nodes(transform("d"), transform("c"), transform("b"), transform("a")),
				Edges: []Edge{edge("a", "b"), edge("a", "c"), edge("b", "d"), edge("c", "d")}},
			steps: []schedStep{
				next("a"), complete("a", nil),
				next("b", "c"), complete("c", nil),
				next(), // b still running, d waits for it
				complete("b", nil), next("d"), complete("d", nil),
			},
			wantFinished: true,
		},
		{
			name: "disconnected components run in parallel",
			g:    Graph{Nodes: nodes(transform("x"), transform("a"), transform("b")), Edges: []Edge{edge("a", "b")}},
			steps: []schedStep{
				next("a", "x"), complete("x", nil), complete("a", nil), next("b"), complete("b", nil),
			},
			wantFinished: true,
		},
		{
			name: "condition true skips the false branch and cascades",
			g: Graph{
				Nodes: nodes(condition("if"), transform("yes"), transform("no"), transform("after-no"), transform("join"), transform("always")),
				Edges: []Edge{when("if", "yes", true), when("if", "no", false), edge("no", "after-no"), edge("yes", "join"), edge("after-no", "join"), edge("if", "always")},
			},
			steps: []schedStep{
				next("if"), complete("if", true, "after-no", "no"),
				next("always", "yes"), complete("yes", "y"),
				next("join"), complete("always", nil), complete("join", nil),
			},
			wantFinished: true,
		},
		{
			name: "condition false skips the true branch",
			g: Graph{
				Nodes: nodes(condition("if"), transform("yes"), transform("no"), transform("join")),
				Edges: []Edge{when("if", "yes", true), when("if", "no", false), edge("yes", "join"), edge("no", "join")},
			},
			steps: []schedStep{
				next("if"), complete("if", false, "yes"), next("no"), complete("no", nil), next("join"), complete("join", nil),
			},
			wantFinished: true,
		},
		{
			name: "a node whose every incoming edge is dead is skipped, through two levels",
			g: Graph{
				Nodes: nodes(condition("if"), condition("if2"), transform("a"), transform("b"), transform("c")),
				Edges: []Edge{when("if", "a", true), when("if2", "a", true), edge("a", "b"), edge("b", "c")},
			},
			steps: []schedStep{
				next("if", "if2"),
				complete("if", false), // a still has a pending edge from if2
				complete("if2", false, "a", "b", "c"),
				next(),
			},
			wantFinished: true,
		},
		{
			name: "failure stops new work and reports what never ran",
			g: Graph{Nodes: nodes(transform("a"), transform("b"), transform("c"), transform("d"), transform("e")),
				Edges: []Edge{edge("a", "b"), edge("a", "c"), edge("b", "d"), edge("c", "e")}},
			steps: []schedStep{
				next("a"), complete("a", nil), next("b", "c"),
				fail("b"),
				next(),                // no new work, even though nothing else is ready yet
				complete("c", "late"), // in-flight work may still report
				next(),                // e became ready but does not start
			},
			wantFinished: true,
			wantUnrun:    []string{"d", "e"},
		},
		{
			name: "not finished while a node still runs after a failure",
			g:    Graph{Nodes: nodes(transform("a"), transform("b"))},
			steps: []schedStep{
				next("a", "b"), fail("a"), next(),
			},
			wantFinished: false,
		},
		{
			name: "refused calls",
			g:    Graph{Nodes: nodes(condition("if"), transform("a")), Edges: []Edge{when("if", "a", true)}},
			steps: []schedStep{
				refused(complete("ghost", nil), ErrUnknownNode),
				refused(fail("ghost"), ErrUnknownNode),
				refused(complete("if", true), ErrNodeNotRunning), // ready but not handed out
				next("if"),
				refused(complete("a", nil), ErrNodeNotRunning), // pending
				refused(complete("if", "yes"), ErrConditionOutput),
				refused(complete("if", nil), ErrConditionOutput),
				complete("if", true),
				refused(complete("if", true), ErrNodeNotRunning), // twice
				refused(fail("if"), ErrNodeNotRunning),
				next("a"), complete("a", nil),
			},
			wantFinished: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := NewScheduler(tt.g)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				var got []string
				var err error
				switch st.op {
				case "next":
					var ns []Node
					ns, err = s.Next()
					for _, n := range ns {
						got = append(got, n.Key)
					}
				case "complete":
					got, err = s.Completed(st.key, st.output)
				case "fail":
					err = s.Failed(st.key)
				}
				if st.wantErr != nil {
					if !errors.Is(err, st.wantErr) {
						t.Fatalf("step %d %s(%s): error %v, want %v", i, st.op, st.key, err, st.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d %s(%s): %v", i, st.op, st.key, err)
				}
				if !reflect.DeepEqual(got, st.want) {
					t.Fatalf("step %d %s(%s) = %q, want %q", i, st.op, st.key, got, st.want)
				}
			}
			if s.finished() != tt.wantFinished {
				t.Errorf("finished() = %v, want %v", s.finished(), tt.wantFinished)
			}
			if got := s.Unrun(); !reflect.DeepEqual(got, tt.wantUnrun) {
				t.Errorf("Unrun() = %q, want %q", got, tt.wantUnrun)
			}
		})
	}
}

func TestNewSchedulerValidatesTheGraph(t *testing.T) {
	t.Parallel()
	g := Graph{Nodes: []Node{transform("a"), transform("b")}, Edges: []Edge{edge("a", "b"), edge("b", "a")}}
	s, err := NewScheduler(g)
	if s != nil {
		t.Fatal("scheduler returned for a cyclic graph")
	}
	assertProblems(t, problems(t, err), []Problem{{"/edges/1", "cycle: a -> b -> a"}})
}

// TestSchedulerDeadlock reaches a deadlock the only way possible, by
// bypassing validation with a cycle: b and c wait for each other forever.
// Next must say so instead of returning nothing forever.
func TestSchedulerDeadlock(t *testing.T) {
	t.Parallel()
	g := Graph{Nodes: []Node{transform("a"), transform("b"), transform("c")}, Edges: []Edge{edge("a", "b"), edge("b", "c"), edge("c", "b")}}
	s := newScheduler(g)
	ready, err := s.Next()
	if err != nil || len(ready) != 1 || ready[0].Key != "a" {
		t.Fatalf("Next() = %v, %v", ready, err)
	}
	if ready, err := s.Next(); err != nil || len(ready) != 0 {
		t.Fatalf("while a runs: Next() = %v, %v; want wait", ready, err)
	}
	if _, err := s.Completed("a", nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Next()
	if !errors.Is(err, ErrDeadlock) {
		t.Fatalf("Next() error = %v, want ErrDeadlock", err)
	}
	if s.finished() {
		t.Fatal("deadlocked run reports Finished")
	}
	if got := s.Unrun(); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Fatalf("Unrun() = %v", got)
	}
}

// TestSchedulersAreIndependent runs two schedulers of one graph interleaved;
// neither may see the other's progress: a scheduler is one run's state.
func TestSchedulersAreIndependent(t *testing.T) {
	t.Parallel()
	g := Graph{Nodes: []Node{transform("a"), transform("b")}, Edges: []Edge{edge("a", "b")}}
	s1, _ := NewScheduler(g)
	s2, _ := NewScheduler(g)
	if r, _ := s1.Next(); len(r) != 1 {
		t.Fatal(r)
	}
	if _, err := s1.Completed("a", 1); err != nil {
		t.Fatal(err)
	}
	if r, _ := s2.Next(); len(r) != 1 || r[0].Key != "a" {
		t.Fatalf("second scheduler saw the first one's progress: %v", r)
	}
}

// finished reports whether the run is over: nothing is running, and either
// every node is resolved or a node failed.
func (s *Scheduler) finished() bool {
	return s.running == 0 && (s.left == 0 || s.failed)
}
