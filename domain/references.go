package domain

import (
	"encoding/json"
	"sort"
	"strconv"
)

// TemplateReads is the data a node's templates can read, known statically
// from its config: paths of the execution input and, per upstream node,
// paths of its output. A node needs nothing else, so the engine hands it
// only these parts (see PickPaths) and a run's history grows with what its
// nodes use, not with the square of the node count.
type TemplateReads struct {
	// Input holds the input paths read; an empty path reads the whole input.
	Input [][]PathSegment
	// Steps maps an upstream node key to the paths of its output read.
	Steps map[string][][]PathSegment
}

// StepKeys returns the keys of Steps, sorted, so callers that iterate them
// in workflow code stay deterministic.
func (r TemplateReads) StepKeys() []string {
	keys := make([]string, 0, len(r.Steps))
	for k := range r.Steps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ReadsOf lists what n's templates read. Every string of the config is
// parsed as a template, as Resolve does; a string that does not parse reads
// nothing (validation refuses such graphs at save time, and resolving it
// fails the node).
func ReadsOf(n Node) TemplateReads {
	reads := TemplateReads{Steps: map[string][][]PathSegment{}}
	if isNull(n.Config) {
		return reads
	}
	var v any
	if json.Unmarshal(n.Config, &v) != nil {
		return reads
	}
	walkStrings(v, nil, func(_ *pointerPath, s string) {
		parts, err := ParseTemplate(s)
		if err != nil {
			return
		}
		for _, p := range parts {
			switch {
			case p.Ref == nil:
			case p.Ref.Root == RootInput:
				reads.Input = append(reads.Input, p.Ref.Path)
			case p.Ref.Root == RootSteps:
				reads.Steps[p.Ref.Step] = append(reads.Steps[p.Ref.Step], p.Ref.Path)
			}
		}
	})
	return reads
}

// PickPaths returns the part of the JSON tree v that the paths walk
// through, with everything else left out: objects keep only the members on
// some path, arrays keep their length with null in the elements no path
// reaches. Whatever a path finds at its end (or where it stops, being
// missing) is kept whole, so resolving any of the paths against the result
// gives the same value, or the same MissingPathError, as against v. An
// empty path keeps all of v; no paths keep nothing (nil).
func PickPaths(v any, paths [][]PathSegment) any {
	if len(paths) == 0 {
		return nil
	}
	for _, p := range paths {
		if len(p) == 0 {
			return v
		}
	}
	switch t := v.(type) {
	case map[string]any:
		rest := map[string][][]PathSegment{}
		for _, p := range paths {
			if !p[0].IsIndex {
				rest[p[0].Name] = append(rest[p[0].Name], p[1:])
			}
		}
		out := make(map[string]any, len(rest))
		for name, sub := range rest {
			if child, ok := t[name]; ok {
				out[name] = PickPaths(child, sub)
			}
		}
		return out
	case []any:
		rest := map[int][][]PathSegment{}
		for _, p := range paths {
			idx := p[0].Index
			if !p[0].IsIndex {
				n, err := strconv.Atoi(p[0].Name)
				if err != nil || !isDigits(p[0].Name) {
					continue
				}
				idx = n
			}
			if idx >= 0 && idx < len(t) {
				rest[idx] = append(rest[idx], p[1:])
			}
		}
		out := make([]any, len(t))
		for idx, sub := range rest {
			out[idx] = PickPaths(t[idx], sub)
		}
		return out
	default:
		// A scalar or null: what a path finds, or where it stops.
		return v
	}
}
