package domain

import (
	"encoding/json"
	"strconv"
)

// CheckTemplateFanOut refuses, as a *ValidationError, a valid graph (one
// that Validate accepts) with a TRANSFORM or HTTP_REQUEST config whose
// templates can never resolve within budget bytes, whatever the input: its
// runs could only fail, so it is refused when it is saved.
func (g Graph) CheckTemplateFanOut(budget int) error {
	var ve ValidationError
	checkTemplateFanOut(g, budget, &ve)
	return ve.errOrNil()
}

// checkTemplateFanOut reports nodes whose templates can never resolve within
// budget, whatever data a run brings. Each config's smallest possible
// resolution is counted as Resolve's budget counts it: literal text in full,
// references to data as empty, except a reference to the whole output of a
// TRANSFORM upstream, which is at least that TRANSFORM's own smallest
// resolution. Chained TRANSFORMs that each repeat the one before multiply, so
// a small definition can still demand gigabytes; this finds it at save time.
// CONDITION configs are not checked, as their exists operator turns a missing
// path into false rather than a failure. It runs only on an acyclic graph
// whose step references all point upstream.
func checkTemplateFanOut(g Graph, budget int, ve *ValidationError) {
	index := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		index[n.Key] = i
	}
	preds := make(map[string]int, len(g.Nodes))
	succ := map[string][]string{}
	for _, e := range g.Edges {
		preds[e.To]++
		succ[e.From] = append(succ[e.From], e.To)
	}
	var ready []string
	for _, n := range g.Nodes {
		if preds[n.Key] == 0 {
			ready = append(ready, n.Key)
		}
	}
	// least[key] is the smallest budget charge of a TRANSFORM's output,
	// capped just past the budget so sums cannot overflow.
	least := map[string]int{}
	over := map[int]int{} // node index -> its smallest resolution, when over budget
	for len(ready) > 0 {
		key := ready[0]
		ready = ready[1:]
		for _, next := range succ[key] {
			if preds[next]--; preds[next] == 0 {
				ready = append(ready, next)
			}
		}
		n := g.Nodes[index[key]]
		if n.Type != NodeTransform && n.Type != NodeHTTPRequest || isNull(n.Config) {
			continue
		}
		var v any
		if json.Unmarshal(n.Config, &v) != nil {
			continue
		}
		size := leastResolution(v, least, budget+1)
		if n.Type == NodeTransform {
			least[key] = size
		}
		if size > budget {
			over[index[key]] = size
		}
	}
	for i := range g.Nodes { // problems in document order
		if size, ok := over[i]; ok {
			ve.add("/nodes/"+strconv.Itoa(i)+"/config",
				"templates resolve to at least %d bytes, over the node template budget of %d bytes", size, budget)
		}
	}
}

// leastResolution is the smallest budget charge of resolving v, capped at
// limit.
func leastResolution(v any, least map[string]int, limit int) int {
	n := 0
	add := func(m int) { n = min(n+m, limit) }
	var walk func(v any)
	walk = func(v any) {
		if n >= limit {
			return
		}
		switch t := v.(type) {
		case string:
			parts, err := ParseTemplate(t)
			if err != nil {
				return
			}
			for _, p := range parts {
				if p.Ref == nil {
					add(len(p.Text))
					continue
				}
				if p.Ref.Root != RootSteps || len(p.Ref.Path) != 0 {
					continue
				}
				add(least[p.Ref.Step])
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return n
}
