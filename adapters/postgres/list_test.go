package postgres_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// seedPriorities inserts one PENDING item of def per priority, the first
// oldest, and returns their ids in insertion order.
func seedPriorities(t *testing.T, pool *pgxpool.Pool, ws, def domain.ID, priorities []int) []domain.ID {
	t.Helper()
	base := time.Now().Add(-time.Hour)
	ids := make([]domain.ID, len(priorities))
	for i, p := range priorities {
		ids[i] = domain.ID(uuid.New())
		if _, err := pool.Exec(context.Background(),
			`INSERT INTO workflow_execution_queue (id, workspace_id, workflow_definition_id, priority, created_at, available_at) VALUES ($1, $2, $3, $4, $5, $5)`,
			ids[i], ws, def, p, base.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// listQueue pages through a workspace's queue, limit items a page.
func listQueue(t *testing.T, store *postgres.Store, ws domain.ID, status *domain.QueueStatus, limit int) []domain.ID {
	t.Helper()
	var out []domain.ID
	var after *ports.QueueCursor
	for range 100 {
		page, err := store.ListQueue(context.Background(), ws, status, limit, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range page {
			out = append(out, q.ID)
		}
		if len(page) < limit {
			return out
		}
		last := page[len(page)-1]
		after = &ports.QueueCursor{Priority: last.Priority, CreatedAt: last.CreatedAt, ID: last.ID}
	}
	t.Fatal("the queue list never ends")
	return nil
}

func TestQueueListIsTheClaimOrderPagedByIt(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ids := seedPriorities(t, b.pool, b.ws, b.def, []int{3, 1, 2, 1, 4, 2, 3})
	other, otherDef := createWorkspace(t, b.store, domain.PlanEnterprise)
	seedPriorities(t, b.pool, other, otherDef, []int{1, 1})

	// Priority 1 first, then age within a priority.
	want := []domain.ID{ids[1], ids[3], ids[2], ids[5], ids[0], ids[6], ids[4]}
	for _, limit := range []int{1, 2, 3, 50} {
		if got := listQueue(t, b.store, b.ws, nil, limit); !slices.Equal(got, want) {
			t.Errorf("pages of %d list %v, want %v", limit, got, want)
		}
	}

	// The first PENDING item listed is the one the dispatcher claims next.
	pending := domain.QueuePending
	for step := range want {
		first, err := b.store.ListQueue(context.Background(), b.ws, &pending, 1, nil)
		if err != nil || len(first) != 1 {
			t.Fatalf("step %d: listing PENDING: %v %v", step, first, err)
		}
		res, err := b.store.Claim(context.Background(), ports.Fence{}, 1,
			dispatch.PlanClaim(func([]ports.ClaimableWorkspace, int) map[domain.ID]int { return map[domain.ID]int{b.ws: 1} }), dispatch.RejectUnrunnable)
		if err != nil || len(res.Claimed) != 1 {
			t.Fatalf("step %d: claim: %+v %v", step, res, err)
		}
		if res.Claimed[0].ID != first[0].ID || first[0].ID != want[step] {
			t.Errorf("step %d: listed %s first, the dispatcher claimed %s, want %s", step, first[0].ID, res.Claimed[0].ID, want[step])
		}
	}
	claimed := domain.QueueClaimed
	if got := listQueue(t, b.store, b.ws, &claimed, 2); !slices.Equal(got, want) {
		t.Errorf("CLAIMED in pages of 2: %v, want %v", got, want)
	}
	if got := listQueue(t, b.store, b.ws, &pending, 2); len(got) != 0 {
		t.Errorf("PENDING after claiming all: %v", got)
	}
}

func TestExecutionsNameTheirQueueItemAndFilterByItAndByDefinition(t *testing.T) {
	t.Parallel()
	b := newQueueBench(t)
	ctx := context.Background()
	def2, err := b.store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: b.ws, Name: "d2"})
	if err != nil {
		t.Fatal(err)
	}
	first := enqueue(t, b.store, b.ws, b.def, 2)
	second := enqueue(t, b.store, b.ws, def2.ID, 1)
	claimed := b.claim(t, 3)

	for _, c := range claimed {
		got, err := b.store.ListExecutions(ctx, b.ws, ports.ExecutionFilter{QueueID: &c.ID}, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != c.ExecutionID || got[0].QueueID == nil || *got[0].QueueID != c.ID {
			t.Errorf("executions of queue item %s: %+v, want only %s", c.ID, got, c.ExecutionID)
		}
	}
	for def, want := range map[domain.ID][]domain.ID{b.def: first, def2.ID: second} {
		got, err := b.store.ListExecutions(ctx, b.ws, ports.ExecutionFilter{DefinitionID: &def}, 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		var items []domain.ID
		for _, e := range got {
			if e.DefinitionID != def || e.QueueID == nil {
				t.Errorf("definition %s lists %+v", def, e)
				continue
			}
			items = append(items, *e.QueueID)
		}
		slices.SortFunc(items, func(a, b domain.ID) int { return strings.Compare(a.String(), b.String()) })
		slices.SortFunc(want, func(a, b domain.ID) int { return strings.Compare(a.String(), b.String()) })
		if !slices.Equal(items, want) {
			t.Errorf("definition %s lists the executions of items %v, want %v", def, items, want)
		}
	}
	// The filters narrow within the workspace: another workspace sees none.
	other, _ := createWorkspace(t, b.store, domain.PlanEnterprise)
	for name, f := range map[string]ports.ExecutionFilter{"definition": {DefinitionID: &b.def}, "queue item": {QueueID: &first[0]}} {
		got, err := b.store.ListExecutions(ctx, other, f, 10, nil)
		if err != nil || len(got) != 0 {
			t.Errorf("another workspace filtered by %s: %+v %v", name, got, err)
		}
	}
}

// generatedQuery reads the text of an sqlc query as the store sends it,
// from the generated code.
func generatedQuery(t *testing.T, file, name string) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "dbsqlc/"+file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if v.Names[0].Name == name {
				text, err := strconv.Unquote(v.Values[0].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				_, text, _ = strings.Cut(text, "\n") // the "-- name:" line
				return text
			}
		}
	}
	t.Fatalf("no query %s in dbsqlc/%s", name, file)
	return ""
}

// TestListsAreServedByTheirIndexes explains each list as the store sends
// it, with sequential scans (and, for a list, sorts) priced out of the
// planner's reach: if the plan still sorts, or names another index, no
// index serves that order, and a large workspace would sort its whole
// history per page. A queue id is a unique key: one row, sorted for free.
func TestListsAreServedByTheirIndexes(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	queueList := generatedQuery(t, "queue.sql.go", "queueList")
	executionList := generatedQuery(t, "executions.sql.go", "executionList")
	ws, id, now := uuid.New(), uuid.New(), time.Now()
	cases := []struct {
		name, query, index string
		args               []any
		// oneRow: the index finds at most one row, which needs no order.
		oneRow bool
	}{
		{name: "queue", query: queueList, index: "workflow_execution_queue_list_idx", args: []any{ws, nil, nil, nil, nil, 50}},
		{name: "queue after a cursor", query: queueList, index: "workflow_execution_queue_list_idx", args: []any{ws, nil, id, int16(2), now, 50}},
		// PENDING items are the claim's own partial index, in the same order.
		{name: "PENDING after a cursor", query: queueList, index: "workflow_execution_queue_pending_idx", args: []any{ws, "PENDING", id, int16(2), now, 50}},
		{name: "FAILED after a cursor", query: queueList, index: "workflow_execution_queue_status_list_idx", args: []any{ws, "FAILED", id, int16(2), now, 50}},
		{name: "executions of a definition", query: executionList, index: "workflow_executions_definition_idx", args: []any{ws, nil, id, nil, nil, nil, nil, 50}},
		{name: "the execution of a queue item", query: executionList, index: "workflow_executions_queue_idx", args: []any{ws, nil, nil, id, nil, nil, nil, 50}, oneRow: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var plan []string
			err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(context.Background(), "SET LOCAL enable_seqscan = off"); err != nil {
					return err
				}
				if !c.oneRow {
					if _, err := tx.Exec(context.Background(), "SET LOCAL enable_sort = off"); err != nil {
						return err
					}
				}
				rows, err := tx.Query(context.Background(), "EXPLAIN "+c.query, c.args...)
				if err != nil {
					return err
				}
				plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			if !strings.Contains(text, " "+c.index+" ") || (!c.oneRow && strings.Contains(text, "Sort")) {
				t.Errorf("plan does not read %s in order:\n%s", c.index, text)
			}
		})
	}
}
