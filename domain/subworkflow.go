package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// NodeSubWorkflow runs another definition of the same workspace as a child
// of the run (SubWorkflowConfig), inside the run's admission slot and
// inside the node in flight the SUB_WORKFLOW holds; its output is the
// child's outputs.
const NodeSubWorkflow NodeType = "SUB_WORKFLOW"

// MaxSubWorkflowDepth bounds how deep sub-workflows nest: a run's
// SUB_WORKFLOW is depth 1, one inside that child depth 2, and so on. Each
// level is a Temporal child workflow, running inside the one node in
// flight its SUB_WORKFLOW holds of its parent's.
const MaxSubWorkflowDepth = 3

// SubWorkflowConfig configures a SUB_WORKFLOW node.
type SubWorkflowConfig struct {
	// Definition is the id of a definition of the same workspace.
	Definition ID `json:"definition"`
	// Version pins a version; 0 (omitted) runs the definition's current
	// version as it is when the node starts.
	Version int `json:"version,omitempty"`
	// Input is the child's input, any JSON with templates; {} when omitted.
	Input json.RawMessage `json:"input,omitempty"`
}

// DecodeSubWorkflowConfig reads and checks a SUB_WORKFLOW config strictly;
// see DecodeHTTPRequestConfig for the error form.
func DecodeSubWorkflowConfig(raw json.RawMessage) (SubWorkflowConfig, error) {
	return decodeStrict(raw, decodeSubWorkflowConfig)
}

// decodeSubWorkflowConfig decodes and checks, reporting problems under path.
func decodeSubWorkflowConfig(raw json.RawMessage, path string, ve *ValidationError) SubWorkflowConfig {
	f := configFields(raw, path, ve, []string{"definition", "version", "input"})
	if f == nil {
		return SubWorkflowConfig{}
	}
	var c SubWorkflowConfig
	if v, ok := present(f, "definition"); !ok {
		ve.add(path+"/definition", "required (the id of a definition of this workspace)")
	} else if s, ok := stringField(v, path+"/definition", ve); ok {
		id, err := ParseID(s)
		if err != nil {
			ve.add(path+"/definition", "must be a definition id (a UUID), not %q", s)
		} else {
			c.Definition = id
		}
	}
	if v, ok := present(f, "version"); ok {
		n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		if err != nil || n < 1 {
			ve.add(path+"/version", "must be a version number from 1, not %s", bytes.TrimSpace(v))
		} else {
			c.Version = n
		}
	}
	if v, ok := present(f, "input"); ok {
		checkTemplates(v, path+"/input", ve)
		c.Input = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
	}
	return c
}

// PinnedVersion is a definition version that a SUB_WORKFLOW runs by
// number.
type PinnedVersion struct {
	// Definition is the child definition's id.
	Definition ID
	// Version is the version number it runs.
	Version int
}

// PinnedVersions lists, each once and in node order, the versions g's
// SUB_WORKFLOW nodes pin by number: what must stay stored while g is, or
// the runs of g would fail to load their child. A node following the
// current version pins none; a config that does not decode (refused at
// save) pins none.
func (g Graph) PinnedVersions() []PinnedVersion {
	var out []PinnedVersion
	for _, n := range g.Nodes {
		if n.Type != NodeSubWorkflow {
			continue
		}
		c, err := DecodeSubWorkflowConfig(n.Config)
		if err != nil || c.Version == 0 {
			continue
		}
		p := PinnedVersion{Definition: c.Definition, Version: c.Version}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// SubWorkflowLoader returns the graph a SUB_WORKFLOW of the workspace
// being checked would run: definition at version, or at its current one
// for 0. An error means the definition is not the workspace's (or gone),
// or that the check ran out of time; its text is the problem reported.
type SubWorkflowLoader func(definition ID, version int) (Graph, error)

// CheckSubWorkflows checks, before definition self is saved with graph g,
// that every SUB_WORKFLOW it reaches names a definition of the workspace,
// that nesting stays within MaxSubWorkflowDepth, that no chain of
// definitions leads back to one already on it (a cycle would recurse until
// the depth cap at every run), a reference to self included, and that the
// nodes of the child runs one run of g starts, every level together
// (SubWorkflowNodes' static product of fan-out along the tree), stay
// within limit, the workspace's subWorkflowNodes quota.
//
// Each (definition, version) is loaded and walked once, however many
// SUB_WORKFLOWs name it: a tree of 100 children of 100 grandchildren
// loads two graphs, not 10,100. Versions 0 resolve to the current ones as
// they are now; a run counts again, as each child starts, what it runs.
// Problems name the SUB_WORKFLOW of g where the chain starts.
func CheckSubWorkflows(self ID, g Graph, limit int, load SubWorkflowLoader) error {
	t := subWorkflowTree{load: load, memo: map[subWorkflowRef]subWorkflowCost{}, path: []ID{self}}
	var ve ValidationError
	total, passedAt := 0, ""
	for i, n := range g.Nodes {
		c, ok := subWorkflowOf(n)
		if !ok {
			continue
		}
		path := "/nodes/" + strconv.Itoa(i) + "/config/definition"
		cost := t.child(c)
		switch {
		case cost.problem != "":
			ve.add(path, "%s", cost.problem)
		case cost.height > MaxSubWorkflowDepth:
			ve.add(path, "sub-workflows nest deeper than the limit of %d", MaxSubWorkflowDepth)
		default:
			if total = saturatingAdd(total, cost.nodes); total > limit && passedAt == "" {
				passedAt = path
			}
		}
	}
	if passedAt != "" {
		ve.add(passedAt, "a run would start child runs of %d nodes in all (sub-workflows of every level), over the workspace's subWorkflowNodes quota of %d from this SUB_WORKFLOW on", total, limit)
	}
	return ve.errOrNil()
}

// subWorkflowOf is n's SUB_WORKFLOW config, if n is one with a valid
// config (Validate reports an invalid one).
func subWorkflowOf(n Node) (SubWorkflowConfig, bool) {
	if n.Type != NodeSubWorkflow {
		return SubWorkflowConfig{}, false
	}
	c, err := DecodeSubWorkflowConfig(n.Config)
	return c, err == nil
}

// subWorkflowRef is one definition at one version (0: its current one).
type subWorkflowRef struct {
	definition ID
	version    int
}

// subWorkflowCost is what one SUB_WORKFLOW running a subWorkflowRef costs
// a run: nodes are its child run's nodes plus those of every run below
// (saturating at maxSubWorkflowNodes), height the levels of child runs it
// makes (1 for a child with no SUB_WORKFLOW of its own); problem is what
// is wrong in its tree, "" if nothing.
type subWorkflowCost struct {
	nodes, height int
	problem       string
}

// maxSubWorkflowNodes is where the count saturates: above every quota
// (PlanQuotas.SubWorkflowNodes is at most 1,000,000) and far below
// overflow, which a tree deeper than MaxSubWorkflowDepth could reach (its
// depth is judged once the walk is done).
const maxSubWorkflowNodes = 1 << 40

// saturatingAdd is a+b, at most maxSubWorkflowNodes.
func saturatingAdd(a, b int) int {
	return min(a+b, maxSubWorkflowNodes)
}

// subWorkflowTree walks the definitions a graph's SUB_WORKFLOWs reach,
// depth first, remembering each subWorkflowRef's cost. path is the chain
// of definitions being walked, for cycles. A cost remembered is the same
// from any path: a tree that reaches a definition on one path reaches it
// on every path, so a cycle through it is found the first time.
type subWorkflowTree struct {
	load SubWorkflowLoader
	memo map[subWorkflowRef]subWorkflowCost
	path []ID
}

// child is the cost of one SUB_WORKFLOW c.
func (t *subWorkflowTree) child(c SubWorkflowConfig) subWorkflowCost {
	if slices.Contains(t.path, c.Definition) {
		names := make([]string, 0, len(t.path)+1)
		for _, d := range append(slices.Clone(t.path), c.Definition) {
			names = append(names, d.String())
		}
		return subWorkflowCost{problem: "sub-workflows form a cycle: " + strings.Join(names, " -> ")}
	}
	ref := subWorkflowRef{definition: c.Definition, version: c.Version}
	if cost, ok := t.memo[ref]; ok {
		return cost
	}
	cost := t.walk(ref)
	t.memo[ref] = cost
	return cost
}

// walk loads ref's graph and adds up its SUB_WORKFLOWs' costs, stopping
// at the first problem.
func (t *subWorkflowTree) walk(ref subWorkflowRef) subWorkflowCost {
	g, err := t.load(ref.definition, ref.version)
	if err != nil {
		return subWorkflowCost{problem: fmt.Sprintf("definition %s (version %d): %v", ref.definition, ref.version, err)}
	}
	cost := subWorkflowCost{nodes: len(g.Nodes), height: 1}
	t.path = append(t.path, ref.definition)
	defer func() { t.path = t.path[:len(t.path)-1] }()
	for _, n := range g.Nodes {
		c, ok := subWorkflowOf(n)
		if !ok {
			continue
		}
		below := t.child(c)
		if below.problem != "" {
			return subWorkflowCost{problem: below.problem}
		}
		cost.nodes = saturatingAdd(cost.nodes, below.nodes)
		cost.height = max(cost.height, 1+below.height)
	}
	return cost
}
