package domain

import (
	"strings"
	"testing"
)

func TestValidateForEach(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, nodes string
		wantPath    string
		wantMsg     string
	}{
		{name: "valid", nodes: `{"key": "e", "type": "FOR_EACH", "config": {"items": "{{ input.l }}", "node": {"type": "TRANSFORM", "config": {"output": "{{ item }}-{{ index }}"}}}}`},
		{name: "items required", nodes: `{"key": "e", "type": "FOR_EACH", "config": {"node": {"type": "TRANSFORM", "config": {"output": 1}}}}`,
			wantPath: "/nodes/0/config/items", wantMsg: "required"},
		{name: "nested FOR_EACH", nodes: `{"key": "e", "type": "FOR_EACH", "config": {"items": [1], "node": {"type": "FOR_EACH", "config": {}}}}`,
			wantPath: "/nodes/0/config/node/type", wantMsg: "not \"FOR_EACH\""},
		{name: "template config checked", nodes: `{"key": "e", "type": "FOR_EACH", "config": {"items": [1], "node": {"type": "HTTP_REQUEST", "config": {"method": "BREW", "url": "https://x.test"}}}}`,
			wantPath: "/nodes/0/config/node/config/method", wantMsg: "BREW"},
		{name: "item outside a FOR_EACH", nodes: `{"key": "t", "type": "TRANSFORM", "config": {"output": "{{ item.x }}"}}`,
			wantPath: "/nodes/0/config/output", wantMsg: "only set in a FOR_EACH"},
		{name: "index in the items", nodes: `{"key": "e", "type": "FOR_EACH", "config": {"items": "{{ index }}", "node": {"type": "TRANSFORM", "config": {"output": 1}}}}`,
			wantPath: "/nodes/0/config/items", wantMsg: "only set in a FOR_EACH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := DecodeGraph([]byte(`{"nodes": [` + tc.nodes + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			err = g.Validate()
			if tc.wantPath == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantPath) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("Validate = %v, want a problem at %s mentioning %q", err, tc.wantPath, tc.wantMsg)
			}
		})
	}
}

func TestForEachItemsCapsByPlan(t *testing.T) {
	t.Parallel()
	if _, err := ForEachItems([]any{1, 2}, 2); err != nil {
		t.Errorf("2 items under a cap of 2: %v", err)
	}
	if _, err := ForEachItems([]any{1, 2, 3}, 2); err == nil || !strings.Contains(err.Error(), "FOR_EACH limit of 2") {
		t.Errorf("3 items under a cap of 2: %v, want the limit named", err)
	}
	if _, err := ForEachItems(map[string]any{}, 2); err == nil || !strings.Contains(err.Error(), "not an array") {
		t.Errorf("an object: %v, want not an array", err)
	}
}
