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
// of the run (SubWorkflowConfig), inside the run's admission slot; its
// output is the child's outputs.
const NodeSubWorkflow NodeType = "SUB_WORKFLOW"

// MaxSubWorkflowDepth bounds how deep sub-workflows nest: a run's
// SUB_WORKFLOW is depth 1, one inside that child depth 2, and so on. Each
// level is a Temporal child workflow with its own nodes in flight.
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
	Definition ID
	Version    int
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
// for 0. An error means the definition is not the workspace's (or gone).
type SubWorkflowLoader func(definition ID, version int) (Graph, error)

// CheckSubWorkflows checks, before definition self is saved with graph g,
// that every SUB_WORKFLOW it reaches names a definition of the workspace,
// that nesting stays within MaxSubWorkflowDepth, and that no chain of
// definitions leads back to one already on it (a cycle would recurse until
// the depth cap at every run), a reference to self included.
// Problems name the SUB_WORKFLOW of g where the chain starts.
func CheckSubWorkflows(self ID, g Graph, load SubWorkflowLoader) error {
	var ve ValidationError
	for i, n := range g.Nodes {
		if n.Type != NodeSubWorkflow {
			continue
		}
		c, err := DecodeSubWorkflowConfig(n.Config)
		if err != nil {
			continue // Validate reports it
		}
		path := "/nodes/" + strconv.Itoa(i) + "/config/definition"
		if msg := walkSubWorkflows(c, []ID{self}, 1, load); msg != "" {
			ve.add(path, "%s", msg)
		}
	}
	return ve.errOrNil()
}

// walkSubWorkflows follows one SUB_WORKFLOW c at depth along chain, and
// returns what is wrong, "" if nothing.
func walkSubWorkflows(c SubWorkflowConfig, chain []ID, depth int, load SubWorkflowLoader) string {
	for _, id := range chain {
		if id == c.Definition {
			names := make([]string, 0, len(chain)+1)
			for _, d := range append(chain, c.Definition) {
				names = append(names, d.String())
			}
			return "sub-workflows form a cycle: " + strings.Join(names, " -> ")
		}
	}
	if depth > MaxSubWorkflowDepth {
		return fmt.Sprintf("sub-workflows nest deeper than the limit of %d", MaxSubWorkflowDepth)
	}
	g, err := load(c.Definition, c.Version)
	if err != nil {
		return fmt.Sprintf("definition %s (version %d): %v", c.Definition, c.Version, err)
	}
	chain = append(chain, c.Definition)
	for _, n := range g.Nodes {
		if n.Type != NodeSubWorkflow {
			continue
		}
		next, err := DecodeSubWorkflowConfig(n.Config)
		if err != nil {
			continue
		}
		if msg := walkSubWorkflows(next, chain, depth+1, load); msg != "" {
			return msg
		}
	}
	return ""
}
