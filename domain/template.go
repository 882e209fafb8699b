package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Template syntax.
//
// A template string is text with references in double braces:
//
//	"Hello {{ input.user.name }}, order {{ steps.fetch.output.body.items[0].id }}"
//
// A reference is a root followed by a path:
//
//	input<path>                  the execution's input
//	steps.<key>.output<path>     the output of node <key>
//	execution.id                 the execution's ID
//	workspace.id                 the workspace's ID
//
// A path is a sequence of ".name" and "[N]" segments. A name uses letters,
// digits, '_' and '-'; on an array an all-digit name is an index, so
// "items.0" and "items[0]" mean the same. "[N]" only applies to arrays.
// Spaces are allowed just inside the braces, nowhere else. There is no
// escape: "{{" always opens a reference. A literal "{{" can be passed in
// through the input and referenced. Nothing else is evaluated, ever.

// TemplateRoot names where a reference looks up its value.
type TemplateRoot string

const (
	// RootInput refers to the execution's input.
	RootInput TemplateRoot = "input"
	// RootSteps refers to the output of an earlier node.
	RootSteps TemplateRoot = "steps"
	// RootExecution refers to the execution itself (only execution.id).
	RootExecution TemplateRoot = "execution"
	// RootWorkspace refers to the execution's workspace (only workspace.id).
	RootWorkspace TemplateRoot = "workspace"
)

// PathSegment is one step of a reference path: a ".name" (Name set) or an
// "[N]" array index (IsIndex set, Index = N).
type PathSegment struct {
	// Name is the member name of a ".name" segment.
	Name string
	// Index is the array index of an "[N]" segment.
	Index int
	// IsIndex distinguishes "[N]" from ".name".
	IsIndex bool
}

// String renders the segment as written: ".name" or "[N]".
func (s PathSegment) String() string {
	if s.IsIndex {
		return "[" + strconv.Itoa(s.Index) + "]"
	}
	return "." + s.Name
}

// Reference is one parsed "{{ ... }}". It is data, not code: resolving it is
// a lookup in TemplateContext.
type Reference struct {
	// Root is where the lookup starts.
	Root TemplateRoot
	// Step is the node key for RootSteps, else "".
	Step string
	// Path follows the root: after "input", after "steps.<key>.output", or
	// the single ".id" of execution and workspace.
	Path []PathSegment
}

// String renders the reference in canonical form, e.g.
// "steps.fetch.output.items[0].id". Errors use it to name paths.
func (r Reference) String() string {
	var b strings.Builder
	b.WriteString(string(r.Root))
	if r.Root == RootSteps {
		b.WriteString("." + r.Step + ".output")
	}
	for _, s := range r.Path {
		b.WriteString(s.String())
	}
	return b.String()
}

// TemplatePart is one piece of a parsed template string: literal text, or a
// reference (Ref non-nil).
type TemplatePart struct {
	// Text is the literal text when Ref is nil.
	Text string
	// Ref is the reference of a "{{ ... }}" part.
	Ref *Reference
	// Pos is the byte offset of the part in the parsed string.
	Pos int
}

// String renders the part so that parsing the concatenated parts again gives
// the same parts (positions aside).
func (p TemplatePart) String() string {
	if p.Ref == nil {
		return p.Text
	}
	return "{{ " + p.Ref.String() + " }}"
}

// TemplateSyntaxError reports a malformed template with the byte position of
// the problem, so an editor can point at it.
type TemplateSyntaxError struct {
	// Pos is the 0-based byte offset in the template string.
	Pos int
	// Msg describes the problem.
	Msg string
}

// Error renders the error with its position.
func (e *TemplateSyntaxError) Error() string {
	return fmt.Sprintf("template syntax error at position %d: %s", e.Pos, e.Msg)
}

// maxIndexDigits bounds "[N]" so the index always fits in an int.
const maxIndexDigits = 9

// isNameByte reports whether c may appear in a path name or a node key.
func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// ParseTemplate splits s into literal text and references, checking the
// syntax of every reference, including its root. Saving a graph runs it over
// every config string, so mistakes are caught before anything runs; it is also
// the fuzz target for the template language. A string without "{{" is one
// literal part (none for ""). Errors are *TemplateSyntaxError.
func ParseTemplate(s string) ([]TemplatePart, error) {
	var parts []TemplatePart
	pos := 0
	for pos < len(s) {
		open := strings.Index(s[pos:], "{{")
		if open < 0 {
			parts = append(parts, TemplatePart{Text: s[pos:], Pos: pos})
			break
		}
		open += pos
		if open > pos {
			parts = append(parts, TemplatePart{Text: s[pos:open], Pos: pos})
		}
		closing := strings.Index(s[open+2:], "}}")
		if closing < 0 {
			return nil, &TemplateSyntaxError{Pos: open, Msg: `"{{" is not closed by "}}"`}
		}
		closing += open + 2
		ref, err := parseReference(s, open+2, closing)
		if err != nil {
			return nil, err
		}
		parts = append(parts, TemplatePart{Ref: ref, Pos: open})
		pos = closing + 2
	}
	return parts, nil
}

// parseReference parses s[start:end], the inside of "{{ }}".
func parseReference(s string, start, end int) (*Reference, error) {
	for start < end && isSpace(s[start]) {
		start++
	}
	for end > start && isSpace(s[end-1]) {
		end--
	}
	if start == end {
		return nil, &TemplateSyntaxError{Pos: start, Msg: "empty reference"}
	}
	fail := func(at int, format string, args ...any) (*Reference, error) {
		return nil, &TemplateSyntaxError{Pos: at, Msg: fmt.Sprintf(format, args...)}
	}

	// Lex the path into segments, remembering where each starts.
	type seg struct {
		PathSegment
		pos int
	}
	var segs []seg
	i := start
	name := func() (string, bool) {
		j := i
		for j < end && isNameByte(s[j]) {
			j++
		}
		if j == i {
			return "", false
		}
		n := s[i:j]
		i = j
		return n, true
	}
	first, ok := name()
	if !ok {
		return fail(i, "expected a name, found %q", s[i])
	}
	segs = append(segs, seg{PathSegment{Name: first}, start})
	for i < end {
		at := i
		switch s[i] {
		case '.':
			i++
			n, ok := name()
			if !ok {
				if i < end {
					return fail(i, "expected a name after '.', found %q", s[i])
				}
				return fail(i, "expected a name after '.'")
			}
			segs = append(segs, seg{PathSegment{Name: n}, at})
		case '[':
			i++
			j := i
			for j < end && '0' <= s[j] && s[j] <= '9' {
				j++
			}
			if j == i || j >= end || s[j] != ']' {
				return fail(at, "expected an index like [0]")
			}
			if j-i > maxIndexDigits {
				return fail(at, "index %s is too large", s[i:j])
			}
			n, _ := strconv.Atoi(s[i:j])
			segs = append(segs, seg{PathSegment{Index: n, IsIndex: true}, at})
			i = j + 1
		default:
			if isSpace(s[i]) {
				return fail(i, "unexpected space inside a reference")
			}
			return fail(i, "unexpected %q", s[i])
		}
	}

	// Interpret the root.
	ref := &Reference{Root: TemplateRoot(first)}
	rest := segs[1:]
	switch ref.Root {
	case RootInput:
	case RootSteps:
		if len(rest) == 0 || rest[0].IsIndex {
			return fail(segs[0].pos, "want steps.<key>.output")
		}
		ref.Step = rest[0].Name
		if len(rest) < 2 || rest[1].IsIndex || rest[1].Name != "output" {
			return fail(rest[0].pos, "want steps.%s.output", ref.Step)
		}
		rest = rest[2:]
	case RootExecution, RootWorkspace:
		if len(rest) != 1 || rest[0].IsIndex || rest[0].Name != "id" {
			return fail(segs[0].pos, "only %s.id is available", first)
		}
	default:
		return fail(segs[0].pos, "unknown root %q (want input, steps, execution or workspace)", first)
	}
	for _, sg := range rest {
		ref.Path = append(ref.Path, sg.PathSegment)
	}
	return ref, nil
}

// isSpace reports the white space allowed just inside braces.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// ErrMissingPath is wrapped when a reference names data that is not there: an
// absent member, an index out of range, a step without output, or a path
// through a scalar. CONDITION's exists operator relies on telling this case
// from other errors.
var ErrMissingPath = errors.New("missing path")

// MissingPathError names the reference that could not be resolved and why.
// It wraps ErrMissingPath.
type MissingPathError struct {
	// Path is the full reference, e.g. "steps.fetch.output.body.items[3]".
	Path string
	// Reason says which segment failed.
	Reason string
}

// Error renders "missing path <path>: <reason>".
func (e *MissingPathError) Error() string {
	return fmt.Sprintf("%s %s: %s", ErrMissingPath, e.Path, e.Reason)
}

// Unwrap returns ErrMissingPath.
func (e *MissingPathError) Unwrap() error { return ErrMissingPath }

// TemplateContext is the data references resolve against. Values are JSON
// trees as encoding/json decodes them into any (map[string]any, []any,
// float64, string, bool, nil); other Go values are converted through JSON
// when a path walks into them.
type TemplateContext struct {
	// Input is the execution's input.
	Input any
	// Steps maps a node key to that node's output.
	Steps map[string]any
	// ExecutionID is the value of {{ execution.id }}.
	ExecutionID string
	// WorkspaceID is the value of {{ workspace.id }}.
	WorkspaceID string
}

// Resolve returns a copy of value with every template string resolved. Maps
// and slices are walked (member names are not templates). A string that is
// exactly one reference, with nothing around the braces, becomes the
// referenced value with its JSON type (a number stays a number, an object an
// object), so configs can pass structured data along. References inside
// longer strings are interpolated as text: strings as they are, other values
// as compact JSON ("null" for null). value is not modified.
func Resolve(value any, ctx TemplateContext) (any, error) {
	return resolveAt(value, "", ctx)
}

// resolveAt is Resolve with the JSON pointer of value, for error messages.
func resolveAt(value any, path string, ctx TemplateContext) (any, error) {
	switch v := value.(type) {
	case nil, bool, float64, json.Number:
		return v, nil
	case string:
		out, err := resolveString(v, ctx)
		if err != nil && path != "" {
			return nil, fmt.Errorf("at %s: %w", path, err)
		}
		return out, err
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := resolveAt(e, path+"/"+strconv.Itoa(i), ctx)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range sortedKeys(v) {
			r, err := resolveAt(v[k], path+"/"+JSONPointerToken(k), ctx)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	norm, err := normalizeJSON(value)
	if err != nil {
		return nil, err
	}
	return resolveAt(norm, path, ctx)
}

// ResolveJSON decodes raw JSON and resolves it (see Resolve). Empty raw
// (an omitted field) resolves to nil.
func ResolveJSON(raw json.RawMessage, ctx TemplateContext) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	return Resolve(v, ctx)
}

// resolveString resolves the templates in one string.
func resolveString(s string, ctx TemplateContext) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	parts, err := ParseTemplate(s)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 && parts[0].Ref != nil {
		return lookup(*parts[0].Ref, ctx)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Ref == nil {
			b.WriteString(p.Text)
			continue
		}
		v, err := lookup(*p.Ref, ctx)
		if err != nil {
			return nil, err
		}
		if err := writeText(&b, v); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

// writeText interpolates v: a string as is, anything else as compact JSON
// without HTML escaping (the text is not HTML).
func writeText(b *strings.Builder, v any) error {
	if s, ok := v.(string); ok {
		b.WriteString(s)
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("template: cannot render value as text: %w", err)
	}
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return nil
}

// lookup resolves one reference to a deep copy of the value it names, so the
// caller can change the result without changing the context.
func lookup(ref Reference, ctx TemplateContext) (any, error) {
	var cur any
	walked := string(ref.Root)
	switch ref.Root {
	case RootInput:
		cur = ctx.Input
	case RootSteps:
		out, ok := ctx.Steps[ref.Step]
		walked = "steps." + ref.Step + ".output"
		if !ok {
			return nil, &MissingPathError{Path: ref.String(), Reason: fmt.Sprintf("step %q has no output", ref.Step)}
		}
		cur = out
	case RootExecution:
		return ctx.ExecutionID, nil
	case RootWorkspace:
		return ctx.WorkspaceID, nil
	default:
		return nil, fmt.Errorf("template: unknown root %q", ref.Root)
	}
	for _, seg := range ref.Path {
		next, reason, err := step(cur, seg, walked)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			return nil, &MissingPathError{Path: ref.String(), Reason: reason}
		}
		cur = next
		walked += seg.String()
	}
	return deepCopy(cur)
}

// step applies one path segment to cur. A non-empty reason means the path is
// missing; err is for values that cannot be converted to JSON.
func step(cur any, seg PathSegment, walked string) (next any, reason string, err error) {
	switch v := cur.(type) {
	case map[string]any:
		if seg.IsIndex {
			return nil, fmt.Sprintf("%s is an object, not an array", walked), nil
		}
		next, ok := v[seg.Name]
		if !ok {
			return nil, fmt.Sprintf("%s has no member %q", walked, seg.Name), nil
		}
		return next, "", nil
	case []any:
		idx := seg.Index
		if !seg.IsIndex {
			n, convErr := strconv.Atoi(seg.Name)
			if convErr != nil || !isDigits(seg.Name) {
				return nil, fmt.Sprintf("%s is an array, not an object", walked), nil
			}
			idx = n
		}
		if idx < 0 || idx >= len(v) {
			return nil, fmt.Sprintf("index %d is out of range: %s has %d elements", idx, walked, len(v)), nil
		}
		return v[idx], "", nil
	case nil:
		return nil, fmt.Sprintf("%s is null", walked), nil
	case string:
		return nil, fmt.Sprintf("%s is a string", walked), nil
	case bool:
		return nil, fmt.Sprintf("%s is a boolean", walked), nil
	case float64, json.Number:
		return nil, fmt.Sprintf("%s is a number", walked), nil
	}
	norm, err := normalizeJSON(cur)
	if err != nil {
		return nil, "", err
	}
	return step(norm, seg, walked)
}

// isDigits reports whether s is non-empty and all ASCII digits.
func isDigits(s string) bool {
	if s == "" || len(s) > maxIndexDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// normalizeJSON converts a Go value that is not a plain JSON tree (a struct,
// a typed map or slice, an int) into one, through encoding/json.
func normalizeJSON(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("template: value of type %T is not JSON: %w", v, err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("template: value of type %T is not JSON: %w", v, err)
	}
	return out, nil
}

// deepCopy copies a JSON tree so results never alias the context.
func deepCopy(v any) (any, error) {
	switch t := v.(type) {
	case nil, bool, float64, json.Number, string:
		return t, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := deepCopy(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := deepCopy(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	return normalizeJSON(v)
}
