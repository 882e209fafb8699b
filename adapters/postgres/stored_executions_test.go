package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestAnEnqueueRacingAClaimCountsWhatTheClaimStored: a claim turns a
// PENDING item into a stored execution in one transaction. An enqueue that
// waited on that claim's lock on the workspace's counters must count the
// execution the claim stored as well as the item it took, or it passes
// the storedExecutions quota by one (seen from outside: a bulk of 3 into a
// quota of 3, then a bulk of 1 answered 202 while the dispatcher claimed).
// The claim is played by a transaction that writes what the claim writes
// (the execution, the item CLAIMED), held open until the enqueue waits on
// it.
func TestAnEnqueueRacingAClaimCountsWhatTheClaimStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.NewStore(pool, quiet())
	ws, def := createWorkspaceAtV1(t, pool, domain.PlanFree)
	if _, err := pool.Exec(ctx, `INSERT INTO workspace_limits (workspace_id, stored_executions) VALUES ($1, 3)`, ws); err != nil {
		t.Fatal(err)
	}
	enqueue := func(id domain.ID) error {
		_, _, err := store.Enqueue(ctx, ports.ItemToEnqueue{ID: id, WorkspaceID: ws, DefinitionID: def, Input: []byte(`{}`), Priority: 2, Actor: domain.Actor{Admin: true}})
		return err
	}
	first := domain.ID(uuid.New())
	for _, id := range []domain.ID{first, domain.ID(uuid.New()), domain.ID(uuid.New())} {
		if err := enqueue(id); err != nil {
			t.Fatal(err)
		}
	}

	claim, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = claim.Rollback(ctx) }()
	exec := uuid.New()
	if _, err := claim.Exec(ctx, `INSERT INTO workflow_executions (id, queue_id, workspace_id, workflow_definition_id, workflow_version, status)
		VALUES ($1, $2, $3, $4, 1, 'RUNNING')`, exec, first, ws, def); err != nil {
		t.Fatal(err)
	}
	if _, err := claim.Exec(ctx, `UPDATE workflow_execution_queue SET status = 'CLAIMED', claimed_at = now(), execution_id = $1 WHERE id = $2`, exec, first); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- enqueue(domain.ID(uuid.New())) }()
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the enqueue to wait on the claim's lock", func() bool {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	}))
	if err := claim.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-done
	var quota *domain.QuotaError
	if !errors.As(err, &quota) || quota.Quota != "stored executions" {
		t.Fatalf("a fourth enqueue beside 2 PENDING items and the execution the claim stored: %v, want refused at the stored executions quota of 3", err)
	}
}
