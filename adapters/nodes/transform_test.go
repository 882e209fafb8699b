package nodes_test

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/domain"
)

func TestTransformBuildsOutputFromTemplates(t *testing.T) {
	t.Parallel()
	tc := domain.TemplateContext{
		Input:       map[string]any{"name": "Ada", "n": float64(2)},
		Steps:       map[string]any{"fetch": map[string]any{"body": map[string]any{"items": []any{map[string]any{"id": float64(7)}}}}},
		ExecutionID: "e-1",
		WorkspaceID: "w-1",
	}
	for _, c := range []struct {
		name, config string
		want         any
	}{
		{name: "constant", config: `{"output": {"a": [1, "x", null]}}`, want: map[string]any{"a": []any{float64(1), "x", nil}}},
		{name: "null", config: `{"output": null}`, want: nil},
		{name: "whole reference keeps its type", config: `{"output": "{{ input.n }}"}`, want: float64(2)},
		{name: "interpolation", config: `{"output": "hi {{ input.name }} #{{ input.n }}"}`, want: "hi Ada #2"},
		{name: "upstream output", config: `{"output": {"id": "{{ steps.fetch.output.body.items[0].id }}"}}`, want: map[string]any{"id": float64(7)}},
		{name: "ids", config: `{"output": ["{{ execution.id }}", "{{ workspace.id }}"]}`, want: []any{"e-1", "w-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			input, out, err := run(t, nodes.Transform{}, c.config, tc)
			if err != nil {
				t.Fatal(err)
			}
			if input != nil {
				t.Errorf("input = %v, want none: the config is the input", input)
			}
			if got := roundTrip(t, out); !reflect.DeepEqual(got, c.want) {
				t.Errorf("output = %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestTransformErrorsArePermanent(t *testing.T) {
	t.Parallel()
	tc := domain.TemplateContext{Input: map[string]any{"list": []any{}}}
	for _, c := range []struct {
		name, config, kind string
	}{
		{name: "missing output", config: `{}`, kind: "invalid_config"},
		{name: "missing input path", config: `{"output": "{{ input.nope }}"}`, kind: "missing_path"},
		{name: "step never ran", config: `{"output": "{{ steps.skipped.output }}"}`, kind: "missing_path"},
		{name: "index out of range", config: `{"output": "{{ input.list[0] }}"}`, kind: "missing_path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := run(t, nodes.Transform{}, c.config, tc)
			wantPermanent(t, err, c.kind)
		})
	}
}
