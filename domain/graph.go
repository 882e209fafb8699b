package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// NodeType says what a node does when it runs. The set is closed: the worker
// has an implementation for each type, and validation rejects the rest so a
// graph never fails at run time for want of one.
type NodeType string

const (
	// NodeHTTPRequest calls an HTTP endpoint (HTTPRequestConfig).
	NodeHTTPRequest NodeType = "HTTP_REQUEST"
	// NodeTransform builds a JSON value from templates (TransformConfig).
	NodeTransform NodeType = "TRANSFORM"
	// NodeCondition evaluates a comparison whose boolean result picks the
	// outgoing edges to follow (ConditionConfig).
	NodeCondition NodeType = "CONDITION"
	// NodeDelay waits for a fixed duration (DelayConfig), implemented with a
	// durable Temporal timer.
	NodeDelay NodeType = "DELAY"
)

// NodeTypes lists every node type, for API enums and validation messages.
func NodeTypes() []NodeType {
	return []NodeType{NodeHTTPRequest, NodeTransform, NodeCondition, NodeDelay, NodeForEach, NodeWaitForEvent, NodeSubWorkflow, NodeTemporalWorkflow}
}

// Valid reports whether t is one of NodeTypes.
func (t NodeType) Valid() bool {
	switch t {
	case NodeHTTPRequest, NodeTransform, NodeCondition, NodeDelay, NodeForEach, NodeWaitForEvent, NodeSubWorkflow, NodeTemporalWorkflow:
		return true
	}
	return false
}

// RunByWorkflow reports whether the workflow runs nodes of type t itself
// (a timer, or iterations of other nodes) rather than through a node
// executor in an activity.
func (t NodeType) RunByWorkflow() bool {
	return t == NodeDelay || t == NodeForEach || t == NodeWaitForEvent || t == NodeSubWorkflow || t == NodeTemporalWorkflow
}

// MaxNodeKeyLength bounds node keys; keys appear in templates, URLs of the
// API and log lines, where unbounded strings are a nuisance.
const MaxNodeKeyLength = 100

// Node is one step of a workflow. Key identifies it within its graph and is
// how templates refer to its output (steps.<key>.output), so it must be
// unique and may only use letters, digits, '_' and '-'. Config is kept as raw
// JSON because its shape depends on Type; the Decode*Config functions read it.
type Node struct {
	// Key is unique within the graph.
	Key string `json:"key"`
	// Type selects the implementation and the config shape.
	Type NodeType `json:"type"`
	// Config is the type-specific configuration.
	Config json.RawMessage `json:"config,omitempty"`
	// Retry replaces, when set, the worker's retry policy for this node
	// (not on DELAY, a timer, which neither fails nor retries).
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Timeout bounds, when set, each attempt of the node in place of the
	// default (an HTTP_REQUEST's config timeout plus 10 s, else 30 s); an
	// attempt past it fails and is retried under Retry. Not on DELAY.
	Timeout Duration `json:"timeout,omitempty"`
}

// Edge orders two nodes: To runs only after From is resolved. When is only
// allowed on edges leaving a CONDITION node: the edge is followed only if the
// condition's result equals *When. An edge without When is always followed.
type Edge struct {
	// From is the key of the earlier node.
	From string `json:"from"`
	// To is the key of the later node.
	To string `json:"to"`
	// When is the CONDITION result that takes this edge; only on edges leaving
	// a CONDITION node, nil means "always".
	When *bool `json:"when,omitempty"`
}

// Graph is a workflow definition: nodes and the edges between them. It must be
// acyclic (Validate). An empty graph is valid and completes at once;
// disconnected parts are allowed and run in parallel.
type Graph struct {
	// Nodes in the order the author wrote them; order carries no meaning.
	Nodes []Node `json:"nodes"`
	// Edges in the order the author wrote them; order carries no meaning.
	Edges []Edge `json:"edges"`
	// RunTimeout is, when set, the run deadline of every execution of
	// this version: that long after its start, an execution still running
	// is cancelled and recorded CANCELLED with the reason. An enqueue may
	// set a shorter one (QueueItem.RunTimeout).
	RunTimeout Duration `json:"runTimeout,omitempty"`
	// Concurrency keys the definition's items when set (see the type).
	Concurrency *Concurrency `json:"concurrency,omitempty"`
}

// DecodeGraph reads a graph from JSON strictly: unknown or duplicate fields
// (names are case-sensitive), wrong JSON types and trailing data are
// rejected, so a typo such as "edge" for "edges" is reported instead of
// silently dropping the edges. "null", a missing "nodes" or a missing "edges"
// give empty lists. Shape problems are returned as a *ValidationError with
// paths; DecodeGraph does not Validate the graph's meaning.
func DecodeGraph(data []byte) (Graph, error) {
	g := Graph{Nodes: []Node{}, Edges: []Edge{}}
	var ve ValidationError
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return g, nil
	}
	top, topOK := objectFields(data, "", &ve, []string{"nodes", "edges", "runTimeout", "concurrency"})
	if top == nil {
		return Graph{}, &ve
	}
	if raw, present := top["nodes"]; present {
		for i, elem := range arrayField(raw, "/nodes", &ve) {
			if n, ok := decodeNode(elem, "/nodes/"+strconv.Itoa(i), &ve); ok {
				g.Nodes = append(g.Nodes, n)
			}
		}
	}
	if raw, present := top["edges"]; present {
		for i, elem := range arrayField(raw, "/edges", &ve) {
			if e, ok := decodeEdge(elem, "/edges/"+strconv.Itoa(i), &ve); ok {
				g.Edges = append(g.Edges, e)
			}
		}
	}
	if raw, present := top["runTimeout"]; present && !isNull(raw) {
		g.RunTimeout = decodeTimeout(raw, "/runTimeout", &ve)
	}
	if raw, present := top["concurrency"]; present {
		c, ok := decodeConcurrency(raw, "/concurrency", &ve)
		g.Concurrency, topOK = c, topOK && ok
	}
	if !topOK || len(ve.Problems) > 0 {
		return Graph{}, &ve
	}
	return g, nil
}

// EncodeGraph writes g as the JSON DecodeGraph reads back: nodes and edges
// are lists even when empty (never null), and each config is written as
// the bytes it was decoded from, so its numbers keep every digit.
func EncodeGraph(g Graph) ([]byte, error) {
	if g.Nodes == nil {
		g.Nodes = []Node{}
	}
	if g.Edges == nil {
		g.Edges = []Edge{}
	}
	return json.Marshal(g)
}

// arrayField decodes raw as a JSON array (null meaning empty).
func arrayField(raw []byte, path string, ve *ValidationError) []json.RawMessage {
	if isNull(raw) {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] != '[' {
		ve.add(path, "must be an array, not %s", rawKind(raw))
		return nil
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		ve.add(path, "%s", syntaxProblem(err).Error())
		return nil
	}
	return out
}

// decodeNode decodes one node strictly.
func decodeNode(raw []byte, path string, ve *ValidationError) (Node, bool) {
	f, ok := objectFields(raw, path, ve, []string{"key", "type", "config", "retry", "timeout"})
	if f == nil {
		return Node{}, false
	}
	var n Node
	if v, present := f["key"]; present {
		s, good := stringField(v, path+"/key", ve)
		n.Key, ok = s, ok && good
	}
	if v, present := f["type"]; present {
		s, good := stringField(v, path+"/type", ve)
		n.Type, ok = NodeType(s), ok && good
	}
	if v, present := f["config"]; present && !isNull(v) {
		n.Config = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
	}
	if v, present := f["retry"]; present && !isNull(v) {
		n.Retry = decodeRetryPolicy(v, n.Type, path+"/retry", ve)
		ok = ok && n.Retry != nil
	}
	if v, present := f["timeout"]; present && !isNull(v) {
		n.Timeout = decodeTimeout(v, path+"/timeout", ve)
		ok = ok && n.Timeout > 0
	}
	return n, ok
}

// decodeEdge decodes one edge strictly.
func decodeEdge(raw []byte, path string, ve *ValidationError) (Edge, bool) {
	f, ok := objectFields(raw, path, ve, []string{"from", "to", "when"})
	if f == nil {
		return Edge{}, false
	}
	var e Edge
	if v, present := f["from"]; present {
		s, good := stringField(v, path+"/from", ve)
		e.From, ok = s, ok && good
	}
	if v, present := f["to"]; present {
		s, good := stringField(v, path+"/to", ve)
		e.To, ok = s, ok && good
	}
	if v, present := f["when"]; present && !isNull(v) {
		switch string(bytes.TrimSpace(v)) {
		case "true":
			t := true
			e.When = &t
		case "false":
			f := false
			e.When = &f
		default:
			ve.add(path+"/when", "must be true or false, not %s", rawKind(v))
			ok = false
		}
	}
	return e, ok
}

// validKey reports whether key only uses the characters a template path
// segment may use, so that steps.<key>.output can always be written.
func validKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		if !isNameByte(key[i]) {
			return false
		}
	}
	return true
}

// Validate checks everything that can be checked before running the graph
// and reports all problems at once, as a *ValidationError (nil when valid):
//   - keys: empty, too long, using other characters than letters, digits,
//     '_' and '-', or duplicated;
//   - types: empty or unknown;
//   - configs: decoded with the Decode*Config function of the node's type,
//     problems reported under /nodes/<i>/config;
//   - edges: missing or unknown endpoints, self-loops, duplicates of an
//     earlier edge between the same nodes, and a `when` on an edge that does
//     not leave a CONDITION node;
//   - cycles: one problem per group of mutually reachable nodes, naming the
//     nodes of one cycle, e.g. "cycle: a -> b -> c -> a";
//
// An empty graph is valid, and so are disconnected components. A graph to
// be stored is also checked with CheckTemplateFanOut, against the budget
// its nodes will run with.
func (g Graph) Validate() error {
	var ve ValidationError
	if g.Concurrency != nil {
		g.Concurrency.validate("/concurrency", &ve)
	}
	index := map[string]int{} // key -> index of its first node
	for i, n := range g.Nodes {
		p := "/nodes/" + strconv.Itoa(i)
		switch {
		case n.Key == "":
			ve.add(p+"/key", "required")
		case len(n.Key) > MaxNodeKeyLength:
			ve.add(p+"/key", "key is longer than %d bytes", MaxNodeKeyLength)
		case !validKey(n.Key):
			ve.add(p+"/key", "key %q may only contain letters, digits, '_' and '-' (templates refer to it as steps.<key>.output)", n.Key)
		}
		if n.Key != "" {
			if first, dup := index[n.Key]; dup {
				ve.add(p+"/key", "duplicate key %q (first used at /nodes/%d)", n.Key, first)
			} else {
				index[n.Key] = i
			}
		}
		if !n.Type.Valid() {
			if n.Type == "" {
				ve.add(p+"/type", "required")
			} else {
				ve.add(p+"/type", "unknown node type %q (want one of %s)", n.Type, joinTypes())
			}
			continue
		}
		validateConfig(n.Type, n.Config, p+"/config", &ve)
		if n.Type == NodeDelay && n.Retry != nil {
			ve.add(p+"/retry", "a DELAY node is a timer: it neither fails nor retries")
		}
		if n.Type == NodeDelay && n.Timeout != 0 {
			ve.add(p+"/timeout", "a DELAY node is a timer: its config's duration is how long it takes")
		}
		if why, refused := noPolicyTypes[n.Type]; refused {
			if n.Retry != nil {
				ve.add(p+"/retry", "%s", why)
			}
			if n.Timeout != 0 {
				ve.add(p+"/timeout", "%s", why)
			}
		}
		if n.Type != NodeForEach {
			checkNoIterationRefs(n.Config, p+"/config", &ve)
		}
	}

	typeOf := func(key string) NodeType { return g.Nodes[index[key]].Type }
	type pair struct{ from, to string }
	seen := map[pair]int{}
	for i, e := range g.Edges {
		p := "/edges/" + strconv.Itoa(i)
		okEnds := true
		for _, end := range []struct{ field, key string }{{"from", e.From}, {"to", e.To}} {
			if end.key == "" {
				ve.add(p+"/"+end.field, "required")
				okEnds = false
			} else if _, known := index[end.key]; !known {
				ve.add(p+"/"+end.field, "unknown node %q", end.key)
				okEnds = false
			}
		}
		if e.From != "" && e.From == e.To {
			ve.add(p, "self-loop: %s -> %s", e.From, e.To)
			okEnds = false
		}
		if okEnds {
			if first, dup := seen[pair{e.From, e.To}]; dup {
				ve.add(p, "duplicate edge %s -> %s (first at /edges/%d)", e.From, e.To, first)
			} else {
				seen[pair{e.From, e.To}] = i
			}
		}
		if e.When != nil {
			if _, known := index[e.From]; known && typeOf(e.From) != NodeCondition && typeOf(e.From) != NodeWaitForEvent {
				ve.add(p+"/when", "\"when\" is only allowed on edges leaving a CONDITION or WAIT_FOR_EVENT node; %q is %s", e.From, typeOf(e.From))
			}
		}
	}

	checkEventNames(g, &ve)
	cycles := findCycles(g, index)
	for _, c := range cycles {
		ve.add("/edges/"+strconv.Itoa(c.closingEdge), "cycle: %s", strings.Join(c.keys, " -> "))
	}
	if len(cycles) == 0 && len(ve.Problems) == 0 {
		checkStepReferences(g, &ve)
	}
	return ve.errOrNil()
}

// CheckPolicies refuses a graph whose policies ask for more than the
// plan's caps allow, naming each field at fault: a node's
// retry/maxAttempts past caps.NodeAttempts, its timeout past
// caps.NodeTimeout, and the graph's runTimeout past caps.RunTimeout. It is
// checked when a version is stored, against the workspace's plan then; a
// stored version keeps running if the plan shrinks later.
func (g Graph) CheckPolicies(caps PolicyCaps) error {
	var ve ValidationError
	for i, n := range g.Nodes {
		p := "/nodes/" + strconv.Itoa(i)
		caps.checkNodePolicies(n.Retry, n.Timeout, p, &ve)
		if n.Type == NodeForEach {
			// A FOR_EACH's template carries each iteration's policies.
			if f, err := DecodeForEachConfig(n.Config); err == nil {
				caps.checkNodePolicies(f.Node.Retry, f.Node.Timeout, p+"/config/node", &ve)
			}
		}
		if n.Type == NodeTemporalWorkflow {
			caps.checkTemporalWorkflowPolicies(n.Config, p+"/config", &ve)
		}
	}
	caps.checkRunTimeout(g.RunTimeout.Std(), "/runTimeout", &ve)
	return ve.errOrNil()
}

// checkNodePolicies reports a node's (or a FOR_EACH template's) retry
// and timeout, at path, past the caps.
func (c PolicyCaps) checkNodePolicies(retry *RetryPolicy, timeout Duration, path string, ve *ValidationError) {
	if retry != nil && c.NodeAttempts > 0 && retry.MaxAttempts > c.NodeAttempts {
		ve.add(path+"/retry/maxAttempts", "%d attempts are over the plan's maximum of %d", retry.MaxAttempts, c.NodeAttempts)
	}
	if c.NodeTimeout > 0 && timeout.Std() > c.NodeTimeout {
		ve.add(path+"/timeout", "%s is longer than the plan's maximum of %s", timeout, c.NodeTimeout)
	}
}

// checkStepReferences reports templates that read steps.<key>.output of a
// node that is not upstream of the node using it. Such a node may not have
// run yet (or ever), so the reference would fail at run time; reporting it
// when the graph is saved names the mistake where it was made. It runs only
// on an otherwise valid graph, where upstream is well defined.
func checkStepReferences(g Graph, ve *ValidationError) {
	preds := map[string][]string{}
	for _, e := range g.Edges {
		preds[e.To] = append(preds[e.To], e.From)
	}
	upstream := func(key string) map[string]bool {
		seen := map[string]bool{}
		stack := append([]string(nil), preds[key]...)
		for len(stack) > 0 {
			k := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if !seen[k] {
				seen[k] = true
				stack = append(stack, preds[k]...)
			}
		}
		return seen
	}
	for i, n := range g.Nodes {
		if isNull(n.Config) {
			continue
		}
		var v any
		if json.Unmarshal(n.Config, &v) != nil {
			continue
		}
		var up map[string]bool
		walkStrings(v, nil, func(at *pointerPath, s string) {
			parts, err := ParseTemplate(s)
			if err != nil {
				return
			}
			for _, part := range parts {
				if part.Ref == nil || part.Ref.Root != RootSteps {
					continue
				}
				if up == nil {
					up = upstream(n.Key)
				}
				if !up[part.Ref.Step] {
					ve.add("/nodes/"+strconv.Itoa(i)+"/config"+at.String(), "%s reads node %q, which is not upstream of %q: add an edge path from it", part.Ref, part.Ref.Step, n.Key)
				}
			}
		})
	}
}

// joinTypes lists the node types for messages.
func joinTypes() string {
	names := make([]string, 0, 4)
	for _, t := range NodeTypes() {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

// validateConfig reports the problems of a node's config at path.
func validateConfig(t NodeType, raw json.RawMessage, path string, ve *ValidationError) {
	switch t {
	case NodeHTTPRequest:
		decodeHTTPRequestConfig(raw, path, ve)
	case NodeTransform:
		decodeTransformConfig(raw, path, ve)
	case NodeCondition:
		decodeConditionConfig(raw, path, ve)
	case NodeDelay:
		decodeDelayConfig(raw, path, ve)
	case NodeForEach:
		decodeForEachConfig(raw, path, ve)
	case NodeWaitForEvent:
		decodeWaitForEventConfig(raw, path, ve)
	case NodeSubWorkflow:
		decodeSubWorkflowConfig(raw, path, ve)
	case NodeTemporalWorkflow:
		decodeTemporalWorkflowConfig(raw, path, ve)
	}
}

// cycle is one cycle found in a graph: keys start and end with the same node,
// and closingEdge is the index of the edge that leads back to the start.
type cycle struct {
	keys        []string
	closingEdge int
}

// findCycles finds the strongly connected components with more than one node
// (self-loops are reported separately) among the edges whose endpoints exist,
// and returns one shortest cycle through the smallest key of each, sorted by
// that key. Sorting everything keeps messages stable between runs.
func findCycles(g Graph, index map[string]int) []cycle {
	keys := sortedKeys(index)
	succ := map[string][]string{}
	edgeAt := map[[2]string]int{}
	for i, e := range g.Edges {
		_, okF := index[e.From]
		_, okT := index[e.To]
		if !okF || !okT || e.From == e.To {
			continue
		}
		if _, dup := edgeAt[[2]string{e.From, e.To}]; dup {
			continue
		}
		edgeAt[[2]string{e.From, e.To}] = i
		succ[e.From] = append(succ[e.From], e.To)
	}
	for _, k := range keys {
		sort.Strings(succ[k])
	}

	comp := stronglyConnected(keys, succ)
	var out []cycle
	done := map[int]bool{}
	for _, start := range keys { // ascending, so start is the smallest key of its component
		c := comp[start]
		if done[c] {
			continue
		}
		done[c] = true
		// Breadth-first search from start within its component for the
		// shortest way back to start.
		prev := map[string]string{}
		queue := []string{start}
		var last string
	search:
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, v := range succ[u] {
				if comp[v] != c {
					continue
				}
				if v == start {
					last = u
					break search
				}
				if _, seen := prev[v]; !seen {
					prev[v] = u
					queue = append(queue, v)
				}
			}
		}
		if last == "" {
			continue // a component of one node: no cycle
		}
		path := []string{start}
		for u := last; u != start; u = prev[u] {
			path = append(path, u)
		}
		path = append(path, start)
		// path is start, last, ..., start backwards; reverse the middle.
		for i, j := 1, len(path)-2; i < j; i, j = i+1, j-1 {
			path[i], path[j] = path[j], path[i]
		}
		out = append(out, cycle{keys: path, closingEdge: edgeAt[[2]string{last, start}]})
	}
	return out
}

// stronglyConnected labels each key with its strongly connected component,
// using Tarjan's algorithm with an explicit stack so deep graphs cannot
// overflow the goroutine stack.
func stronglyConnected(keys []string, succ map[string][]string) map[string]int {
	indexOf := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	comp := map[string]int{}
	var stack []string
	next, ncomp := 0, 0
	type frame struct {
		node string
		edge int
	}
	for _, root := range keys {
		if _, visited := indexOf[root]; visited {
			continue
		}
		work := []frame{{node: root}}
		indexOf[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(work) > 0 {
			f := &work[len(work)-1]
			if f.edge < len(succ[f.node]) {
				v := succ[f.node][f.edge]
				f.edge++
				if _, visited := indexOf[v]; !visited {
					indexOf[v], low[v] = next, next
					next++
					stack = append(stack, v)
					onStack[v] = true
					work = append(work, frame{node: v})
				} else if onStack[v] {
					low[f.node] = min(low[f.node], indexOf[v])
				}
				continue
			}
			u := f.node
			work = work[:len(work)-1]
			if len(work) > 0 {
				parent := work[len(work)-1].node
				low[parent] = min(low[parent], low[u])
			}
			if low[u] == indexOf[u] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = ncomp
					if w == u {
						break
					}
				}
				ncomp++
			}
		}
	}
	return comp
}

// sortedKeys returns the keys of m in ascending order, the only way this
// package iterates maps where order could leak into results.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// String renders an edge as "from -> to" with its condition, for messages.
func (e Edge) String() string {
	if e.When == nil {
		return fmt.Sprintf("%s -> %s", e.From, e.To)
	}
	return fmt.Sprintf("%s -[%t]-> %s", e.From, *e.When, e.To)
}
