package domain

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The fuzz targets below run their seed corpora (testdata/fuzz/<Name>/ plus
// the f.Add calls) in every `go test`; `go test -fuzz=<Name>` explores
// further. Each one states properties that must hold for any input, so a
// finding is a real bug, not just "it did not panic".

// FuzzParseTemplate checks the template parser: errors carry a position
// inside the input, literal parts are exact slices of the input and never
// contain "{{", and rendering the parts gives a string that parses to the
// same parts.
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{
		"", "plain", "{{ input }}", "a {{ input.a.b }} b", "{{steps.fetch.output.body.items[0].id}}",
		"{{ execution.id }}-{{ workspace.id }}", "{{", "}}", "{{ }}", "{{ input.a() }}", "{{{ input }}}",
		"{{ input[99999999999] }}", "{{ steps.x }}", "{{ input . a }}", "x{{ input.0.a-b_c }}y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts, err := ParseTemplate(s)
		if err != nil {
			var se *TemplateSyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *TemplateSyntaxError", err)
			}
			if se.Pos < 0 || se.Pos > len(s) {
				t.Fatalf("error position %d outside input of length %d", se.Pos, len(s))
			}
			return
		}
		if !strings.Contains(s, "{{") {
			if s == "" && len(parts) != 0 || s != "" && (len(parts) != 1 || parts[0].Text != s || parts[0].Ref != nil) {
				t.Fatalf("plain string %q parsed as %+v", s, parts)
			}
		}
		var rendered strings.Builder
		last := -1
		for _, p := range parts {
			if p.Pos <= last {
				t.Fatalf("positions not increasing: %+v", parts)
			}
			last = p.Pos
			if p.Ref == nil {
				if p.Text == "" || strings.Contains(p.Text, "{{") || !strings.HasPrefix(s[p.Pos:], p.Text) {
					t.Fatalf("bad literal part %+v of %q", p, s)
				}
			} else if !strings.HasPrefix(s[p.Pos:], "{{") {
				t.Fatalf("reference part %+v does not start at {{ in %q", p, s)
			}
			rendered.WriteString(renderPart(p))
		}
		again, err := ParseTemplate(rendered.String())
		if err != nil {
			t.Fatalf("rendered %q of %q does not parse: %v", rendered.String(), s, err)
		}
		if !sameParts(parts, again) {
			t.Fatalf("round trip of %q via %q: %+v != %+v", s, rendered.String(), parts, again)
		}
	})
}

// sameParts compares parts ignoring positions.
func sameParts(a, b []TemplatePart) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Text != b[i].Text || (a[i].Ref == nil) != (b[i].Ref == nil) {
			return false
		}
		if a[i].Ref != nil && !reflect.DeepEqual(*a[i].Ref, *b[i].Ref) {
			return false
		}
	}
	return true
}

// FuzzResolve resolves a fuzzed template against a fuzzed JSON input. A
// template that parses may only fail to resolve with ErrMissingPath; one that
// does not parse must fail with the same syntax error; a string without
// references resolves to itself; and the result is the same whether the
// string stands alone or inside a tree.
func FuzzResolve(f *testing.F) {
	f.Add("{{ input.a }}", `{"a":1}`)
	f.Add("x{{ input.a.b }}y", `{"a":{"b":[1,"two",null]}}`)
	f.Add("{{ input[1] }}", `[true,false]`)
	f.Add("{{ input.0 }}", `["zero"]`)
	f.Add("{{ steps.s.output.items[0] }} and {{ execution.id }}", `null`)
	f.Add("{{ input.missing }}", `{}`)
	f.Add("{{ input }}", `"<html>&"`)
	f.Add("plain", `1e308`)
	f.Fuzz(func(t *testing.T, tmpl, inputJSON string) {
		var input any
		if err := json.Unmarshal([]byte(inputJSON), &input); err != nil {
			return
		}
		ctx := TemplateContext{
			Input:       input,
			Steps:       map[string]any{"s": map[string]any{"items": []any{input, "x"}}},
			ExecutionID: "e",
			WorkspaceID: "w",
		}
		got, err := Resolve(tmpl, ctx)
		_, perr := ParseTemplate(tmpl)
		switch {
		case perr != nil:
			if err == nil || err.Error() != perr.Error() {
				t.Fatalf("Resolve(%q) = %v, %v; parse error was %v", tmpl, got, err, perr)
			}
			return
		case err != nil && !errors.Is(err, ErrMissingPath):
			t.Fatalf("Resolve(%q) failed with %v, not a missing path", tmpl, err)
		case err == nil && !strings.Contains(tmpl, "{{") && got != tmpl:
			t.Fatalf("Resolve(%q) = %v, want the string itself", tmpl, got)
		}
		tree, terr := Resolve(map[string]any{"k": []any{tmpl}}, ctx)
		if (err == nil) != (terr == nil) {
			t.Fatalf("alone: %v, in a tree: %v", err, terr)
		}
		if err == nil && !reflect.DeepEqual(tree, map[string]any{"k": []any{got}}) {
			t.Fatalf("alone %#v, in a tree %#v", got, tree)
		}
	})
}

// FuzzDecodeGraph feeds arbitrary bytes through the whole graph pipeline:
// DecodeGraph, Validate and NewScheduler must never panic; a decode or
// validation failure must be a *ValidationError with problems; a valid graph
// must survive a JSON round trip and run to the end without deadlock, every
// node resolved.
func FuzzDecodeGraph(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `{"nodes":[],"edges":[]}`,
		`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":"{{ input.x }}"}}]}`,
		`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1}},{"key":"b","type":"DELAY","config":{"duration":"1s"}}],"edges":[{"from":"a","to":"b"}]}`,
		`{"nodes":[{"key":"c","type":"CONDITION","config":{"left":"{{ input.n }}","op":">","right":1}},{"key":"y","type":"TRANSFORM","config":{"output":1}},{"key":"n","type":"TRANSFORM","config":{"output":2}}],"edges":[{"from":"c","to":"y","when":true},{"from":"c","to":"n","when":false}]}`,
		`{"nodes":[{"key":"h","type":"HTTP_REQUEST","config":{"method":"POST","url":"https://x.test/{{ input.id }}","headers":{"A":"b"},"body":{"x":[1]},"timeout":1500}}]}`,
		`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1}},{"key":"b","type":"TRANSFORM","config":{"output":1}}],"edges":[{"from":"a","to":"b"},{"from":"b","to":"a"}]}`,
		`{"nodes":[{"key":"a","type":"X"},{"key":"a"}],"edges":[{"from":"a","to":"a","when":true},{"from":"q"}]}`,
		`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1}}],"nodes":[]}`,
		`{"Nodes":[]} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := DecodeGraph(data)
		if err != nil {
			requireProblems(t, err)
			return
		}
		verr := g.Validate()
		s, serr := NewScheduler(g)
		if verr != nil {
			requireProblems(t, verr)
			if s != nil || serr == nil {
				t.Fatal("NewScheduler accepted an invalid graph")
			}
			return
		}
		if serr != nil {
			t.Fatalf("NewScheduler rejected a valid graph: %v", serr)
		}

		// Round trip.
		enc, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeGraph(enc)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		if !sameGraph(g, back) {
			t.Fatalf("round trip changed the graph:\n%+v\n%+v", g, back)
		}

		// Run to the end: every node completes or is skipped.
		resolved := 0
		for rounds := 0; ; rounds++ {
			if rounds > len(g.Nodes)+1 {
				t.Fatal("scheduler made no progress")
			}
			nodes, err := s.Next()
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if len(nodes) == 0 {
				break
			}
			for i, n := range nodes {
				var out any = i
				if n.Type == NodeCondition {
					out = i%2 == 0
				}
				skipped, err := s.Completed(n.Key, out)
				if err != nil {
					t.Fatal(err)
				}
				resolved += 1 + len(skipped)
			}
		}
		if !s.finished() || resolved != len(g.Nodes) || len(s.Unrun()) != 0 {
			t.Fatalf("finished=%v resolved %d of %d, unrun %v", s.finished(), resolved, len(g.Nodes), s.Unrun())
		}
	})
}

// requireProblems fails unless err is a *ValidationError with problems.
func requireProblems(t *testing.T, err error) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) == 0 {
		t.Fatalf("error %v (%T) is not a *ValidationError with problems", err, err)
	}
}

// sameGraph compares graphs with configs compared as JSON values, since
// re-encoding may change their spelling (spacing, escapes).
func sameGraph(a, b Graph) bool {
	if len(a.Nodes) != len(b.Nodes) || !reflect.DeepEqual(a.Edges, b.Edges) {
		return false
	}
	for i := range a.Nodes {
		x, y := a.Nodes[i], b.Nodes[i]
		if x.Key != y.Key || x.Type != y.Type {
			return false
		}
		var cx, cy any
		if len(x.Config) > 0 && json.Unmarshal(x.Config, &cx) != nil || len(y.Config) > 0 && json.Unmarshal(y.Config, &cy) != nil {
			return false
		}
		if !reflect.DeepEqual(cx, cy) {
			return false
		}
	}
	return true
}

// renderPart writes a part back as template text, so that parsing the
// concatenated parts again gives the same parts (positions aside).
func renderPart(p TemplatePart) string {
	if p.Ref == nil {
		return p.Text
	}
	return "{{ " + p.Ref.String() + " }}"
}
