package domain_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
)

func TestPinnedVersionsAreTheSubWorkflowsRunByNumber(t *testing.T) {
	t.Parallel()
	a, b := domain.ID(uuid.New()), domain.ID(uuid.New())
	g, err := domain.DecodeGraph(fmt.Appendf(nil, `{"nodes": [
		{"key": "pinned", "type": "SUB_WORKFLOW", "config": {"definition": %[1]q, "version": 2}},
		{"key": "again", "type": "SUB_WORKFLOW", "config": {"definition": %[1]q, "version": 2}},
		{"key": "older", "type": "SUB_WORKFLOW", "config": {"definition": %[1]q, "version": 1}},
		{"key": "current", "type": "SUB_WORKFLOW", "config": {"definition": %[2]q}},
		{"key": "other", "type": "TRANSFORM", "config": {"output": {"definition": %[2]q, "version": 3}}}
	]}`, a, b))
	if err != nil {
		t.Fatal(err)
	}
	want := []domain.PinnedVersion{{Definition: a, Version: 2}, {Definition: a, Version: 1}}
	if got := g.PinnedVersions(); !slices.Equal(got, want) {
		t.Errorf("PinnedVersions() = %v, want %v (each once, none for the current version or another node type)", got, want)
	}
	if got := (domain.Graph{}).PinnedVersions(); len(got) != 0 {
		t.Errorf("an empty graph pins %v", got)
	}
}
