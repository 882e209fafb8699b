package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// transform returns a valid TRANSFORM node.
func transform(key string) Node {
	return Node{Key: key, Type: NodeTransform, Config: json.RawMessage(`{"output":1}`)}
}

// condition returns a valid CONDITION node.
func condition(key string) Node {
	return Node{Key: key, Type: NodeCondition, Config: json.RawMessage(`{"left":"{{ input.x }}","op":"exists"}`)}
}

func edge(from, to string) Edge { return Edge{From: from, To: to} }

func when(from, to string, w bool) Edge { return Edge{From: from, To: to, When: &w} }

// problems returns the problems of err, failing unless it is a *ValidationError.
func problems(t *testing.T, err error) []Problem {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	return ve.Problems
}

// assertProblems checks that got has exactly the wanted paths, each message
// containing the wanted text.
func assertProblems(t *testing.T, got []Problem, want []Problem) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n got: %v\nwant: %v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i].Path != want[i].Path || !strings.Contains(got[i].Message, want[i].Message) {
			t.Errorf("problem %d = %q: %q; want %q containing %q", i, got[i].Path, got[i].Message, want[i].Path, want[i].Message)
		}
	}
}

func TestDecodeGraph(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want Graph
		errs []Problem
	}{
		{
			name: "full graph",
			in: `{"nodes":[{"key":"c","type":"CONDITION","config":{"left":1,"op":"exists"}},{"key":"b","type":"TRANSFORM","config":{"output":2}}],
			      "edges":[{"from":"c","to":"b","when":true}]}`,
			want: Graph{
				Nodes: []Node{
					{Key: "c", Type: NodeCondition, Config: json.RawMessage(`{"left":1,"op":"exists"}`)},
					{Key: "b", Type: NodeTransform, Config: json.RawMessage(`{"output":2}`)},
				},
				Edges: []Edge{{From: "c", To: "b", When: ptr(true)}},
			},
		},
		{name: "null is the empty graph", in: `null`, want: Graph{Nodes: []Node{}, Edges: []Edge{}}},
		{name: "empty object is the empty graph", in: ` {} `, want: Graph{Nodes: []Node{}, Edges: []Edge{}}},
		{name: "null lists", in: `{"nodes":null,"edges":null}`, want: Graph{Nodes: []Node{}, Edges: []Edge{}}},
		{name: "null config and when are absent", in: `{"nodes":[{"key":"a","type":"DELAY","config":null}],"edges":[{"from":"a","to":"b","when":null}]}`,
			want: Graph{Nodes: []Node{{Key: "a", Type: NodeDelay}}, Edges: []Edge{{From: "a", To: "b"}}}},
		{name: "unknown top-level field", in: `{"nodes":[],"edge":[]}`, errs: []Problem{{"/edge", `unknown field "edge"`}}},
		{name: "field names are case-sensitive", in: `{"Nodes":[]}`, errs: []Problem{{"/Nodes", `unknown field "Nodes"`}}},
		{name: "unknown node and edge fields", in: `{"nodes":[{"key":"a","type":"DELAY","cfg":{}}],"edges":[{"from":"a","to":"a","if":true}]}`,
			errs: []Problem{{"/nodes/0/cfg", "unknown field"}, {"/edges/0/if", "unknown field"}}},
		{name: "duplicate field", in: `{"nodes":[],"nodes":[]}`, errs: []Problem{{"", `duplicate field "nodes"`}}},
		{name: "trailing data", in: `{"nodes":[]} {}`, errs: []Problem{{"", "after the JSON value"}}},
		{name: "trailing garbage", in: `{"nodes":[]}x`, errs: []Problem{{"", "after the JSON value"}}},
		{name: "not an object", in: `[1]`, errs: []Problem{{"", "must be a JSON object, not an array"}}},
		{name: "empty input", in: ``, errs: []Problem{{"", "unexpected end"}}},
		{name: "syntax error", in: `{"nodes":[}`, errs: []Problem{{"", "invalid JSON"}}},
		{name: "wrong types", in: `{"nodes":[{"key":1,"type":null}],"edges":[{"from":"a","to":["b"],"when":"yes"}]}`,
			errs: []Problem{{"/nodes/0/key", "must be a string, not a number"}, {"/nodes/0/type", "must be a string, not null"},
				{"/edges/0/to", "must be a string, not an array"}, {"/edges/0/when", "must be true or false"}}},
		{name: "nodes not an array", in: `{"nodes":{}}`, errs: []Problem{{"/nodes", "must be an array, not an object"}}},
		{name: "node not an object", in: `{"nodes":["a"]}`, errs: []Problem{{"/nodes/0", "must be a JSON object, not a string"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := DecodeGraph([]byte(tt.in))
			if tt.errs != nil {
				assertProblems(t, problems(t, err), tt.errs)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, tt.want) {
				t.Fatalf("got %#v\nwant %#v", g, tt.want)
			}
		})
	}
}

func TestGraphJSONRoundTrip(t *testing.T) {
	t.Parallel()
	g := Graph{Nodes: []Node{condition("c"), transform("t")}, Edges: []Edge{when("c", "t", false)}}
	data, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeGraph(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, g) {
		t.Fatalf("round trip: %s gave %#v", data, back)
	}
}

func TestAGraphWithAKeysStartRateReadsBackWhatEncodeGraphWrites(t *testing.T) {
	t.Parallel()
	in := `{"nodes":[{"key":"t","type":"TRANSFORM","config":{"output":1}}],"edges":[],` +
		`"concurrency":{"key":"{{ input.customer }}","limit":3,"startRate":{"rate":2,"per":"second","burst":4}}}`
	g, err := DecodeGraph([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	data, err := EncodeGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeGraph(data)
	if err != nil {
		t.Fatalf("a run could not read back its graph %s: %v", data, err)
	}
	if !reflect.DeepEqual(back, g) {
		t.Fatalf("round trip: %s gave %#v", data, back)
	}
}

func TestValidateAcceptsValidGraphs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		g    Graph
	}{
		{name: "empty", g: Graph{}},
		{name: "single node", g: Graph{Nodes: []Node{transform("a")}}},
		{name: "disconnected components", g: Graph{Nodes: []Node{transform("a"), transform("b"), transform("c"), transform("d")}, Edges: []Edge{edge("a", "b"), edge("c", "d")}}},
		{name: "diamond", g: Graph{Nodes: []Node{transform("a"), transform("b"), transform("c"), transform("d")}, Edges: []Edge{edge("a", "b"), edge("a", "c"), edge("b", "d"), edge("c", "d")}}},
		{name: "condition with both branches and an unconditional edge", g: Graph{
			Nodes: []Node{condition("if"), transform("yes"), transform("no"), transform("always")},
			Edges: []Edge{when("if", "yes", true), when("if", "no", false), edge("if", "always")},
		}},
		{name: "keys with digits, dash and underscore", g: Graph{Nodes: []Node{transform("fetch-user_2"), transform("0")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.g.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestValidateReportsEveryProblemWithPaths(t *testing.T) {
	t.Parallel()
	g := Graph{
		Nodes: []Node{
			transform("a"),
			{Key: "", Type: NodeTransform, Config: json.RawMessage(`{"output":1}`)},
			transform("a"),
			{Key: "x", Type: "SCRIPT"},
			{Key: "h", Type: NodeHTTPRequest, Config: json.RawMessage(`{"method":"get","url":""}`)},
			{Key: "has.dot", Type: NodeDelay, Config: json.RawMessage(`{"duration":"1s"}`)},
			{Key: "d", Type: NodeDelay},
		},
		Edges: []Edge{
			edge("a", "ghost"),
			edge("a", "a"),
			when("a", "h", true),
			edge("", "h"),
			edge("a", "h"),
		},
	}
	want := []Problem{
		{"/nodes/1/key", "required"},
		{"/nodes/2/key", `duplicate key "a" (first used at /nodes/0)`},
		{"/nodes/3/type", `unknown node type "SCRIPT"`},
		{"/nodes/4/config/method", `unknown method "get"`},
		{"/nodes/4/config/url", "required"},
		{"/nodes/5/key", `key "has.dot" may only contain`},
		{"/nodes/6/config", "config is required"},
		{"/edges/0/to", `unknown node "ghost"`},
		{"/edges/1", "self-loop: a -> a"},
		{"/edges/2/when", `only allowed on edges leaving a CONDITION or WAIT_FOR_EVENT node; "a" is TRANSFORM`},
		{"/edges/3/from", "required"},
		{"/edges/4", "duplicate edge a -> h (first at /edges/2)"},
	}
	assertProblems(t, problems(t, g.Validate()), want)
}

func TestValidateNamesCycles(t *testing.T) {
	t.Parallel()
	nodes := func(keys ...string) []Node {
		var ns []Node
		for _, k := range keys {
			ns = append(ns, transform(k))
		}
		return ns
	}
	tests := []struct {
		name string
		g    Graph
		want []Problem
	}{
		{
			name: "two nodes",
			g:    Graph{Nodes: nodes("a", "b"), Edges: []Edge{edge("a", "b"), edge("b", "a")}},
			want: []Problem{{"/edges/1", "cycle: a -> b -> a"}},
		},
		{
			name: "three nodes behind an entry",
			g:    Graph{Nodes: nodes("start", "c", "b", "a"), Edges: []Edge{edge("start", "b"), edge("c", "a"), edge("a", "b"), edge("b", "c")}},
			want: []Problem{{"/edges/1", "cycle: a -> b -> c -> a"}},
		},
		{
			name: "shortest cycle through the smallest key",
			g: Graph{Nodes: nodes("a", "b", "c", "d"), Edges: []Edge{
				edge("a", "b"), edge("b", "c"), edge("c", "d"), edge("d", "a"), edge("b", "a"),
			}},
			want: []Problem{{"/edges/4", "cycle: a -> b -> a"}},
		},
		{
			name: "independent cycles are each reported",
			g: Graph{Nodes: nodes("a", "b", "x", "y", "z"), Edges: []Edge{
				edge("a", "b"), edge("b", "a"), edge("x", "y"), edge("y", "z"), edge("z", "x"), edge("b", "x"),
			}},
			want: []Problem{{"/edges/1", "cycle: a -> b -> a"}, {"/edges/4", "cycle: x -> y -> z -> x"}},
		},
		{
			name: "cycle plus other problems",
			g:    Graph{Nodes: nodes("a", "b"), Edges: []Edge{edge("a", "b"), edge("b", "a"), edge("b", "nope")}},
			want: []Problem{{"/edges/2/to", `unknown node "nope"`}, {"/edges/1", "cycle: a -> b -> a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertProblems(t, problems(t, tt.g.Validate()), tt.want)
		})
	}
}

func TestValidateLongCycleDoesNotRecurse(t *testing.T) {
	t.Parallel()
	const n = 20000
	g := Graph{}
	for i := 0; i < n; i++ {
		g.Nodes = append(g.Nodes, transform(keyOf(i)))
		g.Edges = append(g.Edges, edge(keyOf(i), keyOf((i+1)%n)))
	}
	ps := problems(t, g.Validate())
	if len(ps) != 1 || !strings.HasPrefix(ps[0].Message, "cycle: n00000 -> n00001 -> ") || !strings.HasSuffix(ps[0].Message, "n19999 -> n00000") {
		t.Fatalf("got %d problems, first %.80q", len(ps), ps[0].Message)
	}
}

func TestValidationErrorMessage(t *testing.T) {
	t.Parallel()
	err := &ValidationError{Problems: []Problem{{"/nodes/0/key", "required"}, {"", "whole thing"}}}
	if got, want := err.Error(), "invalid: /nodes/0/key: required; whole thing"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestNodeTypes(t *testing.T) {
	t.Parallel()
	for _, nt := range NodeTypes() {
		if !nt.Valid() {
			t.Errorf("%s not valid", nt)
		}
	}
	if NodeType("transform").Valid() {
		t.Error("node types are case-sensitive")
	}
}

// keyOf returns a fixed-width key, so keys sort like their numbers.
func keyOf(i int) string { return fmt.Sprintf("n%05d", i) }

func TestValidateRejectsStepReferencesToNodesNotUpstream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		graph string
		want  []string // problem paths
	}{
		{
			name: "reference to an ancestor two edges up is fine",
			graph: `{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1}},
				{"key":"b","type":"TRANSFORM","config":{"output":2}},
				{"key":"c","type":"TRANSFORM","config":{"output":"{{ steps.a.output }}"}}],
				"edges":[{"from":"a","to":"b"},{"from":"b","to":"c"}]}`,
		},
		{
			name: "reference to a sibling branch",
			graph: `{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1}},
				{"key":"b","type":"TRANSFORM","config":{"output":{"x":"{{ steps.c.output }}"}}},
				{"key":"c","type":"TRANSFORM","config":{"output":3}}],
				"edges":[{"from":"a","to":"b"},{"from":"a","to":"c"}]}`,
			want: []string{"/nodes/1/config/output/x"},
		},
		{
			name: "reference to a downstream node and to itself",
			graph: `{"nodes":[{"key":"a","type":"HTTP_REQUEST","config":{"url":"http://x/{{ steps.b.output.id }}/{{ steps.a.output }}"}},
				{"key":"b","type":"TRANSFORM","config":{"output":1}}],
				"edges":[{"from":"a","to":"b"}]}`,
			want: []string{"/nodes/0/config/url", "/nodes/0/config/url"},
		},
		{
			name:  "reference to a node that does not exist",
			graph: `{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":"{{ steps.ghost.output }}"}}]}`,
			want:  []string{"/nodes/0/config/output"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := DecodeGraph([]byte(tt.graph))
			if err != nil {
				t.Fatal(err)
			}
			err = g.Validate()
			var got []string
			var ve *ValidationError
			if errors.As(err, &ve) {
				for _, p := range ve.Problems {
					got = append(got, p.Path)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("problems at %v, want %v (%v)", got, tt.want, err)
			}
		})
	}
}

func TestCheckTemplateFanOutRefusesWhatCanNeverFit(t *testing.T) {
	t.Parallel()
	// 600 KB of literal text fits once; a node repeating it twice cannot.
	literal := strings.Repeat("x", 600<<10)
	seed := Node{Key: "seed", Type: NodeTransform, Config: json.RawMessage(fmt.Sprintf(`{"output": %q}`, literal))}
	twice := Node{Key: "twice", Type: NodeTransform, Config: json.RawMessage(`{"output": ["{{ steps.seed.output }}", "and {{ steps.seed.output }}"]}`)}
	send := Node{Key: "send", Type: NodeHTTPRequest, Config: json.RawMessage(`{"url": "http://example.test", "body": {"a": "{{ steps.seed.output }}", "b": "{{ steps.seed.output }}"}}`)}
	fits := Node{Key: "fits", Type: NodeTransform, Config: json.RawMessage(`{"output": ["{{ steps.seed.output }}", "{{ steps.seed.output.part }}", "{{ input.big }}"]}`)}
	g := Graph{Nodes: []Node{seed, twice, send, fits}, Edges: []Edge{edge("seed", "twice"), edge("seed", "send"), edge("seed", "fits")}}
	if err := g.Validate(); err != nil {
		t.Fatalf("the graph is valid apart from its fan-out: %v", err)
	}
	assertProblems(t, problems(t, g.CheckTemplateFanOut(DefaultTemplateBudget)), []Problem{
		{Path: "/nodes/1/config", Message: "over the node template budget of 1048576 bytes"},
		{Path: "/nodes/2/config", Message: "over the node template budget"},
	})
}
