package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/domain"
)

// TestRetentionKeepsTheChildVersionsAStoredParentPins: a replaced version
// that a stored version's SUB_WORKFLOW runs by number outlives its
// retention period, and a deleted child definition that one pins too,
// until the parent that pins them is gone; the replaced version nothing
// pins goes, as before.
func TestRetentionKeepsTheChildVersionsAStoredParentPins(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()
	graph := func(raw string) domain.Graph {
		t.Helper()
		g, err := domain.DecodeGraph([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	leaf := graph(`{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
	define := func(g domain.Graph, versions int) domain.ID {
		t.Helper()
		d, err := b.store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: b.ws, Name: "d", Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		for range versions - 1 {
			if _, err := b.store.AddDefinitionVersion(ctx, d.ID, g); err != nil {
				t.Fatal(err)
			}
		}
		return d.ID
	}
	child, unpinned := define(leaf, 2), define(leaf, 2)
	parent := define(graph(fmt.Sprintf(`{"nodes": [{"key": "c", "type": "SUB_WORKFLOW", "config": {"definition": %q, "version": 1}}]}`, child)), 1)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE workflow_definition_versions SET created_at = now() - interval '400 days' WHERE workflow_definition_id = ANY($1)`, []domain.ID{child, unpinned, parent})
	stored := func(def domain.ID, version int) bool {
		t.Helper()
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_definition_versions WHERE workflow_definition_id = $1 AND version = $2`, def, version).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	retain := func(kind domain.RetainedKind) {
		t.Helper()
		if _, err := b.store.DeleteExpired(ctx, kind, domain.PlanEnterprise, time.Now().Add(time.Hour), 1000); err != nil {
			t.Fatal(err)
		}
	}

	retain(domain.RetainedDefinitionVersions)
	if !stored(child, 1) {
		t.Error("retention deleted the child's version 1, which the parent's SUB_WORKFLOW pins")
	}
	if stored(unpinned, 1) {
		t.Error("retention kept a replaced version nothing pins")
	}

	exec(`UPDATE workflow_definitions SET deleted_at = now() - interval '400 days' WHERE id = $1`, child)
	retain(domain.RetainedDeletedDefinitions)
	if !stored(child, 1) {
		t.Fatal("retention deleted a deleted child definition whose version a stored parent pins")
	}
	exec(`UPDATE workflow_definitions SET deleted_at = now() - interval '400 days' WHERE id = $1`, parent)
	retain(domain.RetainedDeletedDefinitions) // the parent, and its pins with it
	retain(domain.RetainedDeletedDefinitions) // then the child
	if stored(parent, 1) || stored(child, 1) {
		t.Errorf("after the parent was deleted: parent stored %v, child stored %v; want both gone", stored(parent, 1), stored(child, 1))
	}
}
