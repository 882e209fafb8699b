package domain

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestReadsOfListsInputAndStepPaths(t *testing.T) {
	t.Parallel()
	n := Node{Key: "use", Type: NodeTransform, Config: json.RawMessage(`{"output": {
		"a": "{{ input.user.name }}", "b": "id {{ steps.fetch.output.body.items[0].id }}",
		"c": ["{{ steps.fetch.output.status }}", "{{ execution.id }}"], "d": "{{ steps.other.output }}", "e": "plain"}}`)}
	reads := ReadsOf(n)
	if len(reads.Input) != 1 || renderPath(reads.Input[0]) != ".user.name" {
		t.Errorf("input paths = %v, want [.user.name]", reads.Input)
	}
	if got := reads.StepKeys(); !reflect.DeepEqual(got, []string{"fetch", "other"}) {
		t.Errorf("step keys = %v", got)
	}
	if len(reads.Steps["fetch"]) != 2 || len(reads.Steps["other"]) != 1 || len(reads.Steps["other"][0]) != 0 {
		t.Errorf("step paths = %v", reads.Steps)
	}
}

func renderPath(p []PathSegment) string {
	s := ""
	for _, seg := range p {
		s += seg.String()
	}
	return s
}

// TestPickPathsResolvesLikeTheWholeTree checks the rule PickPaths promises:
// every reference resolves against the picked part exactly as against the
// whole, found or missing, while the rest is left out.
func TestPickPathsResolvesLikeTheWholeTree(t *testing.T) {
	t.Parallel()
	var input any
	if err := json.Unmarshal([]byte(`{"user":{"name":"Ada","tags":["a","b","c"],"nick":null,"bio":"long text"},
		"items":[{"id":1,"blob":"x"},{"id":2,"blob":"y"}],"n":3,"unused":{"big":"payload"}}`), &input); err != nil {
		t.Fatal(err)
	}
	templates := []string{
		"{{ input.user.name }}", "{{ input.user.tags[2] }}", "{{ input.items.1.id }}", "{{ input.user.nick }}",
		"{{ input.user.nick.x }}", "{{ input.user.missing }}", "{{ input.items[5] }}", "{{ input.n.x }}",
		"{{ input.user[0] }}", "{{ input.items.x }}", "{{ input.user.tags }}",
	}
	var paths [][]PathSegment
	for _, tpl := range templates {
		parts, err := ParseTemplate(tpl)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, parts[0].Ref.Path)
	}
	picked := PickPaths(input, paths)
	for _, tpl := range templates {
		want, wantErr := Resolve(tpl, TemplateContext{Input: input})
		got, gotErr := Resolve(tpl, TemplateContext{Input: picked})
		if !reflect.DeepEqual(got, want) || (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Errorf("%s: picked gives %v, %v; whole gives %v, %v", tpl, got, gotErr, want, wantErr)
		}
	}
	raw, _ := json.Marshal(picked)
	want := `{"items":[null,{"id":2}],"n":3,"user":{"name":"Ada","nick":null,"tags":["a","b","c"]}}`
	if string(raw) != want {
		t.Errorf("picked = %s, want %s", raw, want)
	}
}

func TestPickPathsEmptyPathKeepsAllAndNoPathsKeepNothing(t *testing.T) {
	t.Parallel()
	v := map[string]any{"a": 1.0}
	if got := PickPaths(v, [][]PathSegment{{{Name: "b"}}, {}}); !reflect.DeepEqual(got, v) {
		t.Errorf("with an empty path: %v", got)
	}
	if got := PickPaths(v, nil); got != nil {
		t.Errorf("with no paths: %v", got)
	}
}
