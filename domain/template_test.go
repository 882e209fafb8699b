package domain

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// testContext is a context shaped like a real run: input, one step with an
// HTTP-like output, and IDs.
func testContext(t testing.TB) TemplateContext {
	t.Helper()
	var input, fetch any
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(json.Unmarshal([]byte(`{"user":{"name":"Ada","age":36,"admin":true,"tags":["a","b"],"nick":null},"n":3,"big":1e21,"html":"<b>&"}`), &input))
	must(json.Unmarshal([]byte(`{"status":200,"body":{"items":[{"id":7,"name":"first"},{"id":8}],"total":2}}`), &fetch))
	return TemplateContext{
		Input:       input,
		Steps:       map[string]any{"fetch": fetch, "flag": false, "none": nil},
		ExecutionID: "exec-1",
		WorkspaceID: "ws-9",
	}
}

func TestParseTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []string // String() of each part
		wantPos int      // for errors
		wantMsg string
	}{
		{name: "empty string has no parts", in: "", want: nil},
		{name: "plain text", in: "hello", want: []string{"hello"}},
		{name: "closing braces alone are text", in: "a }} b", want: []string{"a }} b"}},
		{name: "single reference", in: "{{ input.a }}", want: []string{"{{ input.a }}"}},
		{name: "no spaces", in: "{{input.a}}", want: []string{"{{ input.a }}"}},
		{name: "tabs and newlines inside braces", in: "{{\tinput\n}}", want: []string{"{{ input }}"}},
		{name: "mixed", in: "Hi {{ input.user.name }}, #{{steps.fetch.output.body.items[0].id}}!",
			want: []string{"Hi ", "{{ input.user.name }}", ", #", "{{ steps.fetch.output.body.items[0].id }}", "!"}},
		{name: "numeric segment", in: "{{ input.items.0 }}", want: []string{"{{ input.items.0 }}"}},
		{name: "execution and workspace ids", in: "{{ execution.id }}/{{ workspace.id }}", want: []string{"{{ execution.id }}", "/", "{{ workspace.id }}"}},
		{name: "index right after root", in: "{{ input[2] }}", want: []string{"{{ input[2] }}"}},
		{name: "step key with dash", in: "{{ steps.fetch-user.output }}", want: []string{"{{ steps.fetch-user.output }}"}},
		{name: "extra closing brace is text", in: "{{ input }}}", want: []string{"{{ input }}", "}"}},

		{name: "unclosed", in: "abc {{ input.a", wantPos: 4, wantMsg: `"{{" is not closed`},
		{name: "empty reference", in: "x{{  }}", wantPos: 5, wantMsg: "empty reference"},
		{name: "unknown root", in: "{{ secrets.key }}", wantPos: 3, wantMsg: `unknown root "secrets"`},
		{name: "steps without output", in: "{{ steps.fetch.body }}", wantPos: 8, wantMsg: "want steps.fetch.output"},
		{name: "steps without key", in: "{{ steps }}", wantPos: 3, wantMsg: "want steps.<key>.output"},
		{name: "steps with index as key", in: "{{ steps[0].output }}", wantPos: 3, wantMsg: "want steps.<key>.output"},
		{name: "execution other than id", in: "{{ execution.status }}", wantPos: 3, wantMsg: "only execution.id"},
		{name: "workspace id with a path", in: "{{ workspace.id.x }}", wantPos: 3, wantMsg: "only workspace.id"},
		{name: "space inside path", in: "{{ input. a }}", wantPos: 9, wantMsg: "expected a name after '.'"},
		{name: "space between segments", in: "{{ input .a }}", wantPos: 8, wantMsg: "unexpected space"},
		{name: "trailing dot", in: "{{ input. }}", wantPos: 9, wantMsg: "expected a name after '.'"},
		{name: "bad index", in: "{{ input[x] }}", wantPos: 8, wantMsg: "expected an index"},
		{name: "negative index", in: "{{ input[-1] }}", wantPos: 8, wantMsg: "expected an index"},
		{name: "unclosed index", in: "{{ input[1 }}", wantPos: 8, wantMsg: "expected an index"},
		{name: "huge index", in: "{{ input[12345678901] }}", wantPos: 8, wantMsg: "too large"},
		{name: "no code: function call", in: "{{ input.a() }}", wantPos: 10, wantMsg: "unexpected '('"},
		{name: "no code: operator", in: "{{ input.a + 1 }}", wantPos: 10, wantMsg: "unexpected space"},
		{name: "no code: pipes", in: "{{ input.a|upper }}", wantPos: 10, wantMsg: "unexpected '|'"},
		{name: "triple brace", in: "{{{ input }}}", wantPos: 2, wantMsg: "expected a name"},
		{name: "error in second reference", in: "{{ input }} and {{ bad }}", wantPos: 19, wantMsg: `unknown root "bad"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parts, err := ParseTemplate(tt.in)
			if tt.wantMsg != "" {
				var se *TemplateSyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("ParseTemplate(%q) = %v, %v; want syntax error", tt.in, parts, err)
				}
				if se.Pos != tt.wantPos || !strings.Contains(se.Msg, tt.wantMsg) {
					t.Fatalf("error at %d %q; want at %d containing %q", se.Pos, se.Msg, tt.wantPos, tt.wantMsg)
				}
				if !strings.Contains(err.Error(), "position") {
					t.Fatalf("error %q does not name the position", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range parts {
				got = append(got, renderPart(p))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parts %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseTemplatePositions(t *testing.T) {
	t.Parallel()
	parts, err := ParseTemplate("ab{{ input }}cd")
	if err != nil {
		t.Fatal(err)
	}
	var pos []int
	for _, p := range parts {
		pos = append(pos, p.Pos)
	}
	if !reflect.DeepEqual(pos, []int{0, 2, 13}) {
		t.Fatalf("positions %v", pos)
	}
}

func TestResolveKeepsJSONType(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	tests := []struct {
		name string
		in   string
		want any
	}{
		{name: "number", in: "{{ input.user.age }}", want: 36.0},
		{name: "bool", in: "{{ input.user.admin }}", want: true},
		{name: "null", in: "{{ input.user.nick }}", want: nil},
		{name: "array", in: "{{ input.user.tags }}", want: []any{"a", "b"}},
		{name: "object", in: "{{ steps.fetch.output.body.items[1] }}", want: map[string]any{"id": 8.0}},
		{name: "string", in: "{{input.user.name}}", want: "Ada"},
		{name: "array index", in: "{{ steps.fetch.output.body.items[0].id }}", want: 7.0},
		{name: "numeric segment as index", in: "{{ steps.fetch.output.body.items.1.id }}", want: 8.0},
		{name: "whole input", in: "{{ input.n }}", want: 3.0},
		{name: "step output that is a bool", in: "{{ steps.flag.output }}", want: false},
		{name: "step output that is null", in: "{{ steps.none.output }}", want: nil},
		{name: "execution id", in: "{{ execution.id }}", want: "exec-1"},
		{name: "workspace id", in: "{{ workspace.id }}", want: "ws-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tt.in, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Resolve(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestResolveInterpolatesText(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "string", in: "Hello {{ input.user.name }}!", want: "Hello Ada!"},
		{name: "number", in: "age={{ input.user.age }}", want: "age=36"},
		{name: "large number in JSON form", in: "n={{ input.big }}", want: "n=1e+21"},
		{name: "bool", in: "{{ input.user.admin }}.", want: "true."},
		{name: "null", in: "nick: {{ input.user.nick }}", want: "nick: null"},
		{name: "array as compact JSON", in: "tags={{ input.user.tags }}", want: `tags=["a","b"]`},
		{name: "object as compact JSON", in: "{{ steps.fetch.output.body.items[1] }} ", want: `{"id":8} `},
		{name: "no HTML escaping", in: "x{{ input.html }}", want: "x<b>&"},
		{name: "object members not HTML escaped", in: "x{{ input }}", want: `x{"big":1e+21,"html":"<b>&","n":3,"user":{"admin":true,"age":36,"name":"Ada","nick":null,"tags":["a","b"]}}`},
		{name: "surrounding spaces make it text", in: " {{ input.n }} ", want: " 3 "},
		{name: "two references", in: "{{ execution.id }}{{ workspace.id }}", want: "exec-1ws-9"},
		{name: "plain string untouched", in: "no templates }}", want: "no templates }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tt.in, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Resolve(%q) = %#v, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestResolveWalksTrees(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	raw := json.RawMessage(`{"id":"{{ input.user.age }}","list":["{{ input.user.name }}",1,true,null,{"deep":"x{{ input.n }}"}],"{{ input.n }}":"keys are not templates"}`)
	got, err := ResolveJSON(raw, ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"id":            36.0,
		"list":          []any{"Ada", json.Number("1"), true, nil, map[string]any{"deep": "x3"}},
		"{{ input.n }}": "keys are not templates",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestResolveDoesNotAliasContextOrInput(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	value := map[string]any{"tags": "{{ input.user.tags }}", "keep": []any{"x"}}
	got, err := Resolve(value, ctx)
	if err != nil {
		t.Fatal(err)
	}
	got.(map[string]any)["tags"].([]any)[0] = "changed"
	got.(map[string]any)["keep"].([]any)[0] = "changed"
	tags := ctx.Input.(map[string]any)["user"].(map[string]any)["tags"].([]any)
	if tags[0] != "a" {
		t.Fatal("changing the result changed the context")
	}
	if value["keep"].([]any)[0] != "x" || value["tags"] != "{{ input.user.tags }}" {
		t.Fatal("Resolve changed its input")
	}
}

func TestResolveGoValues(t *testing.T) {
	t.Parallel()
	type out struct {
		Count int      `json:"count"`
		Names []string `json:"names"`
	}
	ctx := TemplateContext{Steps: map[string]any{"s": out{Count: 2, Names: []string{"x", "y"}}}, Input: map[string]int{"a": 1}}
	got, err := Resolve([]string{"{{ steps.s.output.names[1] }}", "{{ input.a }}", "{{ steps.s.output.count }}"}, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{"y", json.Number("1"), json.Number("2")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func TestResolveMissingPathNamesThePath(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	tests := []struct {
		name       string
		in         any
		wantPath   string
		wantReason string
	}{
		{name: "absent member", in: "{{ input.user.email }}", wantPath: "input.user.email", wantReason: `input.user has no member "email"`},
		{name: "index out of range", in: "{{ steps.fetch.output.body.items[5].id }}", wantPath: "steps.fetch.output.body.items[5].id", wantReason: "index 5 is out of range: steps.fetch.output.body.items has 2 elements"},
		{name: "member of an array", in: "{{ input.user.tags.first }}", wantPath: "input.user.tags.first", wantReason: "input.user.tags is an array"},
		{name: "index into an object", in: "{{ input.user[0] }}", wantPath: "input.user[0]", wantReason: "input.user is an object"},
		{name: "through null", in: "{{ input.user.nick.first }}", wantPath: "input.user.nick.first", wantReason: "input.user.nick is null"},
		{name: "through a string", in: "{{ input.user.name.first }}", wantPath: "input.user.name.first", wantReason: "input.user.name is a string"},
		{name: "through a number", in: "{{ input.n.x }}", wantPath: "input.n.x", wantReason: "input.n is a number"},
		{name: "step without output", in: "{{ steps.later.output.x }}", wantPath: "steps.later.output.x", wantReason: `step "later" has no output`},
		{name: "inside text", in: "id={{ input.missing }}", wantPath: "input.missing", wantReason: `no member "missing"`},
		{name: "inside a tree", in: map[string]any{"a": []any{"{{ input.nope }}"}}, wantPath: "input.nope", wantReason: `no member "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Resolve(tt.in, ctx)
			if !errors.Is(err, ErrMissingPath) {
				t.Fatalf("Resolve(%v) error = %v, want ErrMissingPath", tt.in, err)
			}
			var mp *MissingPathError
			if !errors.As(err, &mp) || mp.Path != tt.wantPath || !strings.Contains(mp.Reason, tt.wantReason) {
				t.Fatalf("error %#v; want path %q, reason containing %q", err, tt.wantPath, tt.wantReason)
			}
			if !strings.Contains(err.Error(), tt.wantPath) {
				t.Fatalf("message %q does not name the path", err)
			}
		})
	}
}

func TestResolveSyntaxErrorIsNotMissingPath(t *testing.T) {
	t.Parallel()
	_, err := Resolve("{{ nope.x }}", testContext(t))
	var se *TemplateSyntaxError
	if !errors.As(err, &se) || errors.Is(err, ErrMissingPath) {
		t.Fatalf("error = %v", err)
	}
}

// TestResolveJSONKeepsEveryDigit: integers past 2^53, in a config and in
// the data its templates read, come out with the digits they went in
// with, whole or interpolated. Decoded as float64 they came out rounded
// (12345678901234567000).
func TestResolveJSONKeepsEveryDigit(t *testing.T) {
	t.Parallel()
	input, err := DecodeJSON([]byte(`{"id":98765432109876543210,"ratio":1.10}`))
	if err != nil {
		t.Fatal(err)
	}
	raw := json.RawMessage(`{"literal":12345678901234567890,"whole":"{{ input.id }}","text":"id={{ input.id }} r={{ input.ratio }}","all":"{{ input }}"}`)
	got, err := ResolveJSON(raw, TemplateContext{Input: input})
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"all":{"id":98765432109876543210,"ratio":1.10},"literal":12345678901234567890,"text":"id=98765432109876543210 r=1.10","whole":98765432109876543210}`
	if string(out) != want {
		t.Fatalf("resolved to %s\nwant        %s", out, want)
	}
}

func TestDecodeJSONRefusesTrailingData(t *testing.T) {
	t.Parallel()
	if _, err := DecodeJSON([]byte(`{"a":1} {"b":2}`)); err == nil {
		t.Fatal("a second value after the first was accepted")
	}
}

func TestResolveJSONEmpty(t *testing.T) {
	t.Parallel()
	got, err := ResolveJSON(nil, TemplateContext{})
	if err != nil || got != nil {
		t.Fatalf("ResolveJSON(nil) = %v, %v", got, err)
	}
	if _, err := ResolveJSON(json.RawMessage(`{`), TemplateContext{}); err == nil {
		t.Fatal("bad JSON accepted")
	}
}
