package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// NodeForEach runs one node template once per element of an array
// (ForEachConfig) and outputs the results as an array in input order.
const NodeForEach NodeType = "FOR_EACH"

// DefaultForEachItems is the cap on the elements one FOR_EACH runs over,
// per plan: FREE 100, PRO 1000, ENTERPRISE 5000, as migration 00017
// seeds the plans' forEachItems. A worker uses these only for an
// execution whose workspace's quota it has not read; each element is one
// recorded node run.
func DefaultForEachItems() map[Plan]int {
	return map[Plan]int{PlanFree: 100, PlanPro: 1000, PlanEnterprise: 5000}
}

// ForEachConfig configures a FOR_EACH node.
type ForEachConfig struct {
	// Items is a template resolving to a JSON array, usually one reference
	// such as "{{ steps.list.output.body.items }}"; a literal array works too.
	Items json.RawMessage `json:"items"`
	// Node is the template each iteration runs, with {{ item }} and
	// {{ index }} available to its config.
	Node ForEachNode `json:"node"`
}

// ForEachNode is the node template of a FOR_EACH: a type, a config and
// policies as a node has, without a key (each iteration is recorded as
// <key>[<index>]).
type ForEachNode struct {
	// Type is one of ForEachNodeTypes.
	Type NodeType `json:"type"`
	// Config is the type's config; its templates may read item and index.
	Config json.RawMessage `json:"config"`
	// Retry is each iteration's retry policy, as Node.Retry is a node's,
	// capped by the plan as a node's is; nil runs on the worker's.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Timeout bounds each attempt of each iteration, as Node.Timeout does
	// a node's; 0 keeps the default.
	Timeout Duration `json:"timeout,omitempty"`
}

// Iteration is the node that iteration index of the FOR_EACH keyed key
// runs: the template's type, config and policies, under the record key
// IterationKey(key, index).
func (t ForEachNode) Iteration(key string, index int) Node {
	return Node{Key: IterationKey(key, index), Type: t.Type, Config: t.Config, Retry: t.Retry, Timeout: t.Timeout}
}

// ForEachNodeTypes are the types a FOR_EACH may run per element: the ones
// that run as one activity. A FOR_EACH inside a FOR_EACH would multiply the
// caps; waits and sub-workflows per element are not supported.
func ForEachNodeTypes() []NodeType {
	return []NodeType{NodeHTTPRequest, NodeTransform, NodeCondition}
}

// IterationKey is the record key of iteration index of FOR_EACH node key:
// "<key>[<index>]", which no node key can be ('[' is not allowed in keys).
func IterationKey(key string, index int) string {
	return key + "[" + strconv.Itoa(index) + "]"
}

// DecodeForEachConfig reads and checks a FOR_EACH config strictly; see
// DecodeHTTPRequestConfig for the error form.
func DecodeForEachConfig(raw json.RawMessage) (ForEachConfig, error) {
	return decodeStrict(raw, decodeForEachConfig)
}

// decodeForEachConfig decodes and checks, reporting problems under path.
func decodeForEachConfig(raw json.RawMessage, path string, ve *ValidationError) ForEachConfig {
	f := configFields(raw, path, ve, []string{"items", "node"})
	if f == nil {
		return ForEachConfig{}
	}
	var c ForEachConfig
	if v, ok := present(f, "items"); !ok {
		ve.add(path+"/items", "required (an array, or a template resolving to one)")
	} else {
		c.Items = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
		checkTemplates(v, path+"/items", ve)
		checkNoIterationRefs(v, path+"/items", ve)
	}
	v, ok := present(f, "node")
	if !ok {
		ve.add(path+"/node", "required (the node template: type and config)")
		return c
	}
	nf, _ := objectFields(v, path+"/node", ve, []string{"type", "config", "retry", "timeout"})
	if nf == nil {
		return c
	}
	t, ok := present(nf, "type")
	if !ok {
		ve.add(path+"/node/type", "required")
		return c
	}
	s, ok := stringField(t, path+"/node/type", ve)
	if !ok {
		return c
	}
	c.Node.Type = NodeType(s)
	allowed := false
	for _, a := range ForEachNodeTypes() {
		allowed = allowed || a == c.Node.Type
	}
	if !allowed {
		ve.add(path+"/node/type", "a FOR_EACH runs HTTP_REQUEST, TRANSFORM or CONDITION per element, not %q", s)
		return c
	}
	cfg := nf["config"]
	c.Node.Config = append(json.RawMessage(nil), bytes.TrimSpace(cfg)...)
	validateConfig(c.Node.Type, cfg, path+"/node/config", ve)
	if v, ok := present(nf, "retry"); ok {
		c.Node.Retry = decodeRetryPolicy(v, c.Node.Type, path+"/node/retry", ve)
	}
	if v, ok := present(nf, "timeout"); ok {
		c.Node.Timeout = decodeTimeout(v, path+"/node/timeout", ve)
	}
	return c
}

// checkNoIterationRefs reports references to item or index in raw, which
// only a FOR_EACH's node template may use.
func checkNoIterationRefs(raw []byte, path string, ve *ValidationError) {
	if isNull(raw) {
		return
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return // checkTemplates reports it
	}
	walkStrings(v, nil, func(at *pointerPath, s string) {
		parts, err := ParseTemplate(s)
		if err != nil {
			return
		}
		for _, p := range parts {
			if p.Ref != nil && (p.Ref.Root == RootItem || p.Ref.Root == RootIndex) {
				ve.add(path+at.String(), "{{ %s }} is only set in a FOR_EACH node's template (config.node.config)", p.Ref)
				return
			}
		}
	})
}

// ForEachItems checks the resolved items of a FOR_EACH against the
// workspace's cap in force: an array of at most limit elements.
func ForEachItems(v any, limit int) ([]any, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("config.items resolved to %s, not an array", kindOf(v))
	}
	if len(items) > limit {
		return nil, fmt.Errorf("config.items has %d elements, over the workspace's FOR_EACH limit of %d (its forEachItems quota)", len(items), limit)
	}
	return items, nil
}

// TemplateIteration is what {{ item }} and {{ index }} resolve to in one
// FOR_EACH iteration.
type TemplateIteration struct {
	// Item is the element, a JSON tree as DecodeJSON decodes it.
	Item any
	// Index is the element's 0-based position in the array.
	Index int
}
