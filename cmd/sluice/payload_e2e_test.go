package main

import (
	"strings"
	"testing"
)

// TestARunPastTemporalsPayloadLimitFailsWithARecordedError: a TRANSFORM
// whose output would be about 2.5 MB, over Temporal's 2 MB payload limit,
// fails the node and the execution with recorded errors, rather than
// Temporal ending the workflow before it records anything.
func TestARunPastTemporalsPayloadLimitFailsWithARecordedError(t *testing.T) {
	base := startSluice(t, nil)
	e := newE2E(t, base)
	refs := make([]any, 5)
	for i := range refs {
		refs[i] = "{{ input.s }}"
	}
	graph := map[string]any{
		"nodes": []any{node("big", "TRANSFORM", map[string]any{"output": refs}), node("after", "TRANSFORM", map[string]any{"output": 1})},
		"edges": []any{edge("big", "after")},
	}
	ex := e.waitFor(e.start(graph, map[string]any{"s": strings.Repeat("x", 500_000)}), "COMPLETED", "FAILED", "CANCELLED")
	if ex.Status != "FAILED" || ex.Error == nil || !strings.Contains(*ex.Error, "node big failed") {
		t.Fatalf("execution ended %s (%v), want FAILED naming node big", ex.Status, ex.Error)
	}
	big := ex.node("big")
	if big.Status != "FAILED" || big.Error == nil || *big.Error == "" {
		t.Fatalf("big's record = %+v, want FAILED with its error", big)
	}
	t.Logf("big failed with: %s", *big.Error)
	if ex.node("after").Status != "SKIPPED" {
		t.Errorf("after = %s, want SKIPPED", ex.node("after").Status)
	}
}
