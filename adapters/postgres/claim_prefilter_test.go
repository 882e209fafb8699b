package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// prefilterScene seeds, with the same ids in every database, workspaces
// the room prefilter skips and some it keeps: a FREE one (limit 1) and a
// PRO one with its own limit of 2, each with a backlog; a PRO one whose
// items are all delayed an hour; an ENTERPRISE one whose items take turns
// over two keys of limit 1; and a PRO one with room. Every definition
// has an empty graph at version 1.
func prefilterScene(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	id := func(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)) }
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, w := range []struct {
		name, plan string
		own        int
		items      int
		delayed    bool
		keys       []string
	}{
		{name: "free", plan: "FREE", items: 6},
		{name: "own", plan: "PRO", own: 2, items: 8},
		{name: "delayed", plan: "PRO", items: 4, delayed: true},
		{name: "keyed", plan: "ENTERPRISE", items: 8, keys: []string{"k1", "k2"}},
		{name: "room", plan: "PRO", items: 7},
	} {
		ws, def := id(w.name), id(w.name+"/def")
		exec(`INSERT INTO workspaces (id, name, plan) VALUES ($1, $2, $3)`, ws, w.name, w.plan)
		if w.own > 0 {
			exec(`INSERT INTO workspace_limits (workspace_id, max_running) VALUES ($1, $2)`, ws, w.own)
		}
		exec(`INSERT INTO workflow_definitions (id, workspace_id, name) VALUES ($1, $2, 'd')`, def, ws)
		exec(`INSERT INTO workflow_definition_versions (workflow_definition_id, version, graph) VALUES ($1, 1, '{"nodes":[],"edges":[]}')`, def)
		for i := range w.items {
			item := id(fmt.Sprintf("%s/%d", w.name, i))
			switch {
			case w.delayed:
				exec(`INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, available_at) VALUES ($1, $2, $3, now() + interval '1 hour')`, item, ws, def)
			case len(w.keys) > 0:
				exec(`INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, concurrency_key, concurrency_limit) VALUES ($1, $2, $3, $4, 1)`,
					item, ws, def, w.keys[i%len(w.keys)])
			default:
				exec(`INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id) VALUES ($1, $2, $3)`, item, ws, def)
			}
		}
	}
}

// roundRobin deals up to budget one slot at a time over the workspaces in
// id order, each up to its Room: the dispatcher's deal without its memory
// of who was served last, so that two stores deal alike.
func roundRobin(ws []ports.ClaimableWorkspace, budget int) map[domain.ID]int {
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b ports.ClaimableWorkspace) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	out := map[domain.ID]int{}
	for progressed := true; budget > 0 && progressed; {
		progressed = false
		for _, w := range ws {
			if budget > 0 && out[w.ID] < w.Room() {
				out[w.ID]++
				budget--
				progressed = true
			}
		}
	}
	return out
}

// TestTheClaimAdmitsTheSameItemsWithoutTheRoomPrefilter runs the same
// claims, on two databases seeded alike, by a store with the claim's
// room prefilter and one built WithoutRoomPrefilter (which locks full
// workspaces and workspaces with nothing due too, leaving them to the
// plan's verdicts): batches of 3, the oldest run ending after each, first
// with no pool, then in a pool of 6 with PRO's floor at 2. Every claim
// takes the same items. It prints how many workspaces the prefilter kept
// from being locked, and how many items were claimed.
func TestTheClaimAdmitsTheSameItemsWithoutTheRoomPrefilter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type side struct {
		pool  *pgxpool.Pool
		store *postgres.Store
	}
	sides := [2]side{}
	for i, opts := range [][]postgres.StoreOption{nil, {postgres.WithoutRoomPrefilter()}} {
		pool := pgtest.Pool(t)
		prefilterScene(t, pool)
		sides[i] = side{pool: pool, store: postgres.NewStore(pool, quiet(), opts...)}
	}
	claimed, lockedMore := 0, 0
	for round := range 24 {
		if round == 12 {
			six, two := 6, 2
			for _, s := range sides {
				if _, err := s.store.UpdatePool(ctx, &six, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := s.store.UpdatePlan(ctx, domain.PlanPro, domain.PlanChange{Floor: &two}, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		var took [2][]uuid.UUID
		var locked [2]int
		for i, s := range sides {
			res, err := s.store.Claim(ctx, ports.Fence{}, 3, dispatch.PlanClaim(roundRobin), dispatch.RejectUnrunnable)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Claimed {
				took[i] = append(took[i], uuid.UUID(c.ID))
			}
			slices.SortFunc(took[i], func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
			locked[i] = res.Workspaces
			// The oldest run, by its item's id, ends.
			var exec domain.ID
			if err := s.pool.QueryRow(ctx, `SELECT e.id FROM workflow_executions e WHERE e.status = 'RUNNING' ORDER BY e.queue_id LIMIT 1`).Scan(&exec); err == nil {
				if _, err := finish(ctx, s.store, exec, domain.ExecutionCompleted, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !slices.Equal(took[0], took[1]) {
			t.Fatalf("round %d: with the prefilter the claim took %v, without it %v", round, took[0], took[1])
		}
		claimed += len(took[0])
		lockedMore += locked[1] - locked[0]
	}
	t.Logf("24 claims of 3: %d items claimed, the same with and without the room prefilter; %d workspace visits the prefilter spared", claimed, lockedMore)
	if claimed == 0 || lockedMore == 0 {
		t.Fatalf("the scene exercises nothing: %d claimed, %d visits spared", claimed, lockedMore)
	}
}

// TestFunctionsThatTurnScansOffTurnJITOff holds the rule 00037 states: a
// function that turns a scan type off (the room prefilter) prices that
// scan at 10^10, past every jit_*_above_cost, so it also turns JIT off,
// whatever the session's setting, or every claim compiles its query.
func TestFunctionsThatTurnScansOffTurnJITOff(t *testing.T) {
	pool := pgtest.Pool(t)
	rows, err := pool.Query(context.Background(), `
		SELECT p.proname::text, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND p.proconfig IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	found := 0
	for rows.Next() {
		var name string
		var config []string
		if err := rows.Scan(&name, &config); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(config, func(c string) bool { return strings.HasPrefix(c, "enable_") && strings.HasSuffix(c, "=off") }) {
			continue
		}
		found++
		if !slices.Contains(config, "jit=off") {
			t.Errorf("%s sets %v: it turns a scan off and leaves JIT to the session", name, config)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no function turns a scan off: the room prefilter (admission_workspaces_with_room) was expected to")
	}
}
