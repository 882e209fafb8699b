package engine

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/e2e/harness"
)

// TestARunPastTemporalsPayloadLimitFailsWithARecordedError: a TRANSFORM
// whose output would be about 2.5 MB, over Temporal's 2 MB payload limit,
// fails the node and the execution with recorded errors, rather than
// Temporal ending the workflow before it records anything.
func TestARunPastTemporalsPayloadLimitFailsWithARecordedError(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	refs := make([]any, 5)
	for i := range refs {
		refs[i] = "{{ input.s }}"
	}
	graph := map[string]any{
		"nodes": []any{harness.Node("big", "TRANSFORM", map[string]any{"output": refs}), harness.Node("after", "TRANSFORM", map[string]any{"output": 1})},
		"edges": []any{harness.Edge("big", "after")},
	}
	ex := e.WaitFor(e.Start(graph, map[string]any{"s": strings.Repeat("x", 500_000)}), "COMPLETED", "FAILED", "CANCELLED")
	if ex.Status != "FAILED" || ex.Error == nil || !strings.Contains(*ex.Error, "node big failed") {
		t.Fatalf("execution ended %s (%v), want FAILED naming node big", ex.Status, ex.Error)
	}
	big := ex.Node("big")
	if big.Status != "FAILED" || big.Error == nil || *big.Error == "" {
		t.Fatalf("big's record = %+v, want FAILED with its error", big)
	}
	t.Logf("big failed with: %s", *big.Error)
	if ex.Node("after").Status != "SKIPPED" {
		t.Errorf("after = %s, want SKIPPED", ex.Node("after").Status)
	}
}
