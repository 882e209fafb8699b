package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
//	item<path>                   the element of a FOR_EACH iteration
//	index                        the index of a FOR_EACH iteration
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
	// RootItem refers to the element a FOR_EACH iteration runs on; only its
	// node template may use it.
	RootItem TemplateRoot = "item"
	// RootIndex is the 0-based index of a FOR_EACH iteration (no path);
	// only its node template may use it.
	RootIndex TemplateRoot = "index"
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
	case RootItem:
	case RootIndex:
		if len(rest) != 0 {
			return fail(segs[0].pos, "index has no path: it is a number")
		}
	case RootExecution, RootWorkspace:
		if len(rest) != 1 || rest[0].IsIndex || rest[0].Name != "id" {
			return fail(segs[0].pos, "only %s.id is available", first)
		}
	default:
		return fail(segs[0].pos, "unknown root %q (want input, steps, execution, workspace, item or index)", first)
	}
	if len(rest) > 0 {
		ref.Path = make([]PathSegment, len(rest))
		for i, sg := range rest {
			ref.Path[i] = sg.PathSegment
		}
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

// DefaultTemplateBudget is the number of bytes one node's templates may
// produce when resolved, unless the worker is configured otherwise.
const DefaultTemplateBudget = 1 << 20

// ErrTemplateBudget is wrapped when resolving a node's templates would
// produce more bytes than its TemplateBudget allows.
var ErrTemplateBudget = errors.New("template output is over budget")

// TemplateBudgetError says how large the budget was and where resolution
// stopped. It wraps ErrTemplateBudget.
type TemplateBudgetError struct {
	// Limit is the budget in bytes.
	Limit int
	// Need is how many bytes the resolution had produced, counting the piece
	// that did not fit.
	Need int
}

// Error renders the limit and what was needed.
func (e *TemplateBudgetError) Error() string {
	return fmt.Sprintf("%s: resolving needs more than %d bytes, the budget is %d bytes", ErrTemplateBudget, e.Need-1, e.Limit)
}

// Unwrap returns ErrTemplateBudget.
func (e *TemplateBudgetError) Unwrap() error { return ErrTemplateBudget }

// TemplateBudget counts the bytes template resolution produces for one node
// and refuses a piece before it is built when it would pass the limit, so a
// template that repeats a large value many times costs at most its budget.
// The bytes counted are those of every string resolution yields (literal or
// interpolated) and the compact JSON size of every value a whole-string
// reference yields. One budget is shared by all of a node's Resolve calls.
type TemplateBudget struct {
	limit int
	used  int
}

// NewTemplateBudget returns a budget of limit bytes.
func NewTemplateBudget(limit int) *TemplateBudget {
	return &TemplateBudget{limit: limit}
}

// Used is the number of bytes charged so far.
func (b *TemplateBudget) Used() int { return b.used }

// charge takes n bytes from the budget, or fails without taking any.
func (b *TemplateBudget) charge(n int) error {
	if n > b.limit-b.used {
		return &TemplateBudgetError{Limit: b.limit, Need: b.used + n}
	}
	b.used += n
	return nil
}

// remaining is what is left of the budget.
func (b *TemplateBudget) remaining() int { return b.limit - b.used }

// TemplateContext is the data references resolve against. Values are JSON
// trees as DecodeJSON decodes them (map[string]any, []any, json.Number,
// string, bool, nil; float64 is read too); other Go values are converted
// through JSON when a path walks into them.
type TemplateContext struct {
	// Input is the execution's input.
	Input any
	// Steps maps a node key to that node's output.
	Steps map[string]any
	// ExecutionID is the value of {{ execution.id }}.
	ExecutionID string
	// WorkspaceID is the value of {{ workspace.id }}.
	WorkspaceID string
	// Iteration is the FOR_EACH iteration a node template runs in, the
	// value of {{ item }} and {{ index }}; nil outside one.
	Iteration *TemplateIteration
	// Budget bounds what resolution may produce. Nil gives every Resolve
	// call a budget of its own of DefaultTemplateBudget bytes; a node
	// executor sets one budget for all of its node's templates.
	Budget *TemplateBudget
}

// pointerPath is the JSON pointer of a value inside the tree Resolve walks,
// as a chain from child to parent. The walk adds one link per level and
// renders the string only when a problem is found, so a deep tree costs
// memory linear in its size rather than one path string per level.
type pointerPath struct {
	parent *pointerPath
	name   string
	index  int
	// isName tells a member name from an array index.
	isName bool
}

// String renders the pointer, "" for the root.
func (p *pointerPath) String() string {
	var tokens []string
	for q := p; q != nil; q = q.parent {
		if q.isName {
			tokens = append(tokens, JSONPointerToken(q.name))
		} else {
			tokens = append(tokens, strconv.Itoa(q.index))
		}
	}
	var b strings.Builder
	for i := len(tokens) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(tokens[i])
	}
	return b.String()
}

// Resolve returns a copy of value with every template string resolved. Maps
// and slices are walked (member names are not templates). A string that is
// exactly one reference, with nothing around the braces, becomes the
// referenced value with its JSON type (a number stays a number, an object an
// object), so configs can pass structured data along. References inside
// longer strings are interpolated as text: strings as they are, other values
// as compact JSON ("null" for null). value is not modified. What resolution
// produces is charged to ctx.Budget; past it, Resolve fails with a
// *TemplateBudgetError before building the piece that did not fit.
func Resolve(value any, ctx TemplateContext) (any, error) {
	if ctx.Budget == nil {
		ctx.Budget = NewTemplateBudget(DefaultTemplateBudget)
	}
	return resolveAt(value, nil, ctx)
}

// resolveAt is Resolve with the JSON pointer of value, for error messages.
func resolveAt(value any, path *pointerPath, ctx TemplateContext) (any, error) {
	switch v := value.(type) {
	case nil, bool, float64, json.Number:
		return v, nil
	case string:
		out, err := resolveString(v, ctx)
		if err != nil && path != nil {
			return nil, fmt.Errorf("at %s: %w", path, err)
		}
		return out, err
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := resolveAt(e, &pointerPath{parent: path, index: i}, ctx)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range sortedKeys(v) {
			r, err := resolveAt(v[k], &pointerPath{parent: path, name: k, isName: true}, ctx)
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

// ResolveJSON decodes raw JSON (see DecodeJSON) and resolves it (see
// Resolve). Empty raw (an omitted field) resolves to nil.
func ResolveJSON(raw json.RawMessage, ctx TemplateContext) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	v, err := DecodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	return Resolve(v, ctx)
}

// DecodeJSON decodes one JSON value into the tree templates work on
// (map[string]any, []any, string, bool, nil) with every number a
// json.Number, its text as written. Inputs, configs and outputs carry ids
// and amounts past 2^53 that float64 would round, so a value decoded here
// and encoded again keeps every digit. It is the one way the engine and the
// executors read JSON they pass on.
func DecodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if err := expectEOF(dec); err != nil {
		return nil, err
	}
	return v, nil
}

// resolveString resolves the templates in one string. An interpolated
// string is sized before it is built: every reference is looked up and
// charged first, and the result is allocated once at its final size.
func resolveString(s string, ctx TemplateContext) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, ctx.Budget.charge(len(s))
	}
	parts, err := ParseTemplate(s)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 && parts[0].Ref != nil {
		v, findErr := find(*parts[0].Ref, ctx)
		if findErr != nil {
			return nil, findErr
		}
		if err = ctx.Budget.charge(jsonSize(v, ctx.Budget.remaining()+1)); err != nil {
			return nil, err
		}
		return deepCopy(v)
	}
	values := make([]any, len(parts))
	total := 0
	for i, p := range parts {
		n := len(p.Text)
		if p.Ref != nil {
			if values[i], err = find(*p.Ref, ctx); err != nil {
				return nil, err
			}
			n = textSize(values[i], ctx.Budget.remaining()+1)
		}
		if err := ctx.Budget.charge(n); err != nil {
			return nil, err
		}
		total += n
	}
	var b strings.Builder
	b.Grow(total)
	for i, p := range parts {
		if p.Ref == nil {
			b.WriteString(p.Text)
			continue
		}
		if err := writeText(&b, values[i]); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

// writeText interpolates v as TemplateText renders it.
func writeText(b *strings.Builder, v any) error {
	text, err := TemplateText(v)
	if err != nil {
		return err
	}
	b.WriteString(text)
	return nil
}

// TemplateText renders a resolved value where text is wanted: inside a
// longer string, and as a URL or header value a whole reference fills. A
// string is itself; anything else is its JSON as EncodeJSON writes it.
func TemplateText(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	raw, err := EncodeJSON(v)
	if err != nil {
		return "", fmt.Errorf("template: cannot render value as text: %w", err)
	}
	return string(raw), nil
}

// EncodeJSON writes v as compact JSON, the form a node sends: in text
// (TemplateText) and as an HTTP_REQUEST body. '<', '>' and '&' are written
// as themselves, not as encoding/json's \u003c, \u003e and \u0026: what
// receives them is a program, not an HTML page, so the escapes protect
// nothing, while they make the same value read differently as a header
// than inside a longer string, and give a service that signs or compares
// a body other bytes than the ones the author wrote.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// textSize is the number of bytes writeText produces for v, counted up to
// stop (the count may end anywhere past stop once it gets there).
func textSize(v any, stop int) int {
	if s, ok := v.(string); ok {
		return len(s)
	}
	return jsonSize(v, stop)
}

// jsonSize is the length of v as compact JSON, counted without encoding it
// and up to stop: once the count passes stop it returns, so sizing a huge
// value against a small budget costs little. String escapes are counted at
// their longest form, so the figure never falls short of the encoding.
func jsonSize(v any, stop int) int {
	switch t := v.(type) {
	case nil:
		return 4
	case bool:
		if t {
			return 4
		}
		return 5
	case float64:
		// encoding/json writes plain decimals between 1e-6 and 1e21.
		format := byte('f')
		if a := math.Abs(t); a != 0 && (a < 1e-6 || a >= 1e21) {
			format = 'e'
		}
		var buf [64]byte
		return len(strconv.AppendFloat(buf[:0], t, format, -1, 64))
	case json.Number:
		return len(t)
	case string:
		return quotedSize(t)
	case []any:
		n := 2 + max(len(t)-1, 0)
		for _, e := range t {
			if n > stop {
				return n
			}
			n += jsonSize(e, stop-n)
		}
		return n
	case map[string]any:
		n := 2 + max(len(t)-1, 0)
		for k, e := range t {
			if n > stop {
				return n
			}
			n += quotedSize(k) + 1 + jsonSize(e, stop-n)
		}
		return n
	}
	norm, err := normalizeJSON(v)
	if err != nil {
		return 0 // deepCopy reports the same value as not JSON
	}
	return jsonSize(norm, stop)
}

// quotedSize is the length of s as a JSON string, counting each byte that
// needs an escape at the six bytes of a \u escape.
func quotedSize(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5
		case c == '"' || c == '\\':
			n++
		}
	}
	return n
}

// find resolves one reference to the value it names, which may be part of
// the context: callers copy it before handing it out.
func find(ref Reference, ctx TemplateContext) (any, error) {
	var cur any
	switch ref.Root {
	case RootInput:
		cur = ctx.Input
	case RootSteps:
		out, ok := ctx.Steps[ref.Step]
		if !ok {
			return nil, &MissingPathError{Path: ref.String(), Reason: fmt.Sprintf("step %q has no output", ref.Step)}
		}
		cur = out
	case RootExecution:
		return ctx.ExecutionID, nil
	case RootWorkspace:
		return ctx.WorkspaceID, nil
	case RootItem, RootIndex:
		if ctx.Iteration == nil {
			return nil, &MissingPathError{Path: ref.String(), Reason: "item and index are only set in a FOR_EACH node's template"}
		}
		if ref.Root == RootIndex {
			return json.Number(strconv.Itoa(ctx.Iteration.Index)), nil
		}
		cur = ctx.Iteration.Item
	default:
		return nil, fmt.Errorf("template: unknown root %q", ref.Root)
	}
	for i, seg := range ref.Path {
		next, reason, err := step(cur, seg, func() string { return ref.prefix(i) })
		if err != nil {
			return nil, err
		}
		if reason != "" {
			return nil, &MissingPathError{Path: ref.String(), Reason: reason}
		}
		cur = next
	}
	return cur, nil
}

// prefix renders the reference up to, not including, path segment n:
// the part that was walked when segment n failed.
func (r Reference) prefix(n int) string {
	return Reference{Root: r.Root, Step: r.Step, Path: r.Path[:n]}.String()
}

// step applies one path segment to cur. A non-empty reason means the path is
// missing; err is for values that cannot be converted to JSON. walkedPath
// renders the path up to cur, only when a reason needs it.
func step(cur any, seg PathSegment, walkedPath func() string) (next any, reason string, err error) {
	switch v := cur.(type) {
	case map[string]any:
		if seg.IsIndex {
			return nil, fmt.Sprintf("%s is an object, not an array", walkedPath()), nil
		}
		next, ok := v[seg.Name]
		if !ok {
			return nil, fmt.Sprintf("%s has no member %q", walkedPath(), seg.Name), nil
		}
		return next, "", nil
	case []any:
		idx := seg.Index
		if !seg.IsIndex {
			n, convErr := strconv.Atoi(seg.Name)
			if convErr != nil || !isDigits(seg.Name) {
				return nil, fmt.Sprintf("%s is an array, not an object", walkedPath()), nil
			}
			idx = n
		}
		if idx < 0 || idx >= len(v) {
			return nil, fmt.Sprintf("index %d is out of range: %s has %d elements", idx, walkedPath(), len(v)), nil
		}
		return v[idx], "", nil
	case nil:
		return nil, fmt.Sprintf("%s is null", walkedPath()), nil
	case string:
		return nil, fmt.Sprintf("%s is a string", walkedPath()), nil
	case bool:
		return nil, fmt.Sprintf("%s is a boolean", walkedPath()), nil
	case float64, json.Number:
		return nil, fmt.Sprintf("%s is a number", walkedPath()), nil
	}
	norm, err := normalizeJSON(cur)
	if err != nil {
		return nil, "", err
	}
	return step(norm, seg, walkedPath)
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
	out, err := DecodeJSON(data)
	if err != nil {
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
