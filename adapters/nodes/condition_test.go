package nodes_test

import (
	"testing"

	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/domain"
)

func TestConditionOutputsTheComparison(t *testing.T) {
	t.Parallel()
	tc := domain.TemplateContext{
		Input: map[string]any{"n": float64(5), "name": "ada", "tags": []any{"a", "b"}},
		Steps: map[string]any{"fetch": map[string]any{"status": float64(200)}},
	}
	for _, c := range []struct {
		name, config string
		want         bool
	}{
		{name: "greater", config: `{"left": "{{ input.n }}", "op": ">", "right": 3}`, want: true},
		{name: "not greater", config: `{"left": "{{ input.n }}", "op": ">", "right": 5}`, want: false},
		{name: "equal to upstream", config: `{"left": "{{ steps.fetch.output.status }}", "op": "==", "right": 200}`, want: true},
		{name: "not equal", config: `{"left": "{{ input.name }}", "op": "!=", "right": "ada"}`, want: false},
		{name: "contains", config: `{"left": "{{ input.tags }}", "op": "contains", "right": "b"}`, want: true},
		{name: "exists", config: `{"left": "{{ input.name }}", "op": "exists"}`, want: true},
		{name: "missing does not exist", config: `{"left": "{{ input.nope }}", "op": "exists"}`, want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, out, err := run(t, nodes.Condition{}, c.config, tc)
			if err != nil {
				t.Fatal(err)
			}
			// The scheduler needs a bool to pick the branch.
			if got, ok := out.(bool); !ok || got != c.want {
				t.Errorf("output = %#v, want %v", out, c.want)
			}
		})
	}
}

func TestConditionErrorsArePermanent(t *testing.T) {
	t.Parallel()
	tc := domain.TemplateContext{Input: map[string]any{"n": float64(5), "s": "x"}}
	for _, c := range []struct {
		name, config, kind string
	}{
		{name: "unknown operator", config: `{"left": 1, "op": "~", "right": 1}`, kind: "invalid_config"},
		{name: "missing path", config: `{"left": "{{ input.nope }}", "op": "==", "right": 1}`, kind: "missing_path"},
		{name: "ordering different kinds", config: `{"left": "{{ input.n }}", "op": "<", "right": "{{ input.s }}"}`, kind: "invalid_comparison"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := run(t, nodes.Condition{}, c.config, tc)
			wantPermanent(t, err, c.kind)
		})
	}
}

func TestAllRegistersEveryActivityNodeType(t *testing.T) {
	t.Parallel()
	got := map[domain.NodeType]bool{}
	for _, e := range nodes.All(nodes.DefaultConfig()) {
		if got[e.Type()] {
			t.Errorf("two executors for %s", e.Type())
		}
		got[e.Type()] = true
	}
	// DELAY, FOR_EACH and the like are run by the workflow itself.
	for _, typ := range domain.NodeTypes() {
		if want := !typ.RunByWorkflow(); got[typ] != want {
			t.Errorf("executor for %s registered = %v, want %v", typ, got[typ], want)
		}
	}
}
