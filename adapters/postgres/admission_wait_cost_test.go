package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// admissionWaitTriggers are migration 00036's triggers that fire on the
// claim's execution write (ExecutionsUpsertRunning, an INSERT … ON
// CONFLICT DO UPDATE, so both its INSERT and its UPDATE statement
// triggers fire).
var admissionWaitTriggers = []string{"workflow_executions_note_claim", "workflow_executions_note_full_update"}

// BenchmarkAdmissionWaitTriggersOnTheClaimsExecutionWrite prices what the
// admission wait's triggers add to the claim's execution write of a batch
// of 100, apart from the noise of a whole run: the claim's own statement
// (read from db/queries, as sqlc reads it), run alone on its own database
// under EXPLAIN ANALYZE in a rolled-back transaction, blocks of rounds
// alternating with the triggers enabled and disabled. It prints the medians of the
// statement's execution time each way and of each trigger's own time as
// EXPLAIN reports it.
func BenchmarkAdmissionWaitTriggersOnTheClaimsExecutionWrite(b *testing.B) {
	const batch, rounds = 100, 200
	ctx := context.Background()
	pool := pgtest.Pool(b)
	store := postgres.NewStore(pool, quiet())
	ws, err := store.CreateWorkspace(ctx, domain.Workspace{ID: domain.ID(uuid.New()), Name: "ws", Plan: domain.PlanEnterprise})
	if err != nil {
		b.Fatal(err)
	}
	def, err := store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: ws.ID, Name: "d"})
	if err != nil {
		b.Fatal(err)
	}
	items := make([]ports.EnqueueBatchItem, batch)
	for i := range items {
		items[i] = ports.EnqueueBatchItem{ID: domain.ID(uuid.New()), Input: json.RawMessage(`{}`), Priority: 2}
	}
	queued, err := store.EnqueueBatch(ctx, ports.EnqueueBatch{WorkspaceID: ws.ID, DefinitionID: def.ID, Items: items, Actor: domain.Actor{Admin: true}})
	if err != nil {
		b.Fatal(err)
	}
	statement := claimsExecutionWrite(b)

	type round struct {
		total    time.Duration
		triggers map[string]time.Duration
	}
	var with, without []round
	for range b.N {
		with, without = nil, nil
		for r := range 2 * rounds {
			// Blocks of 20 rounds alternate, so load drifts equally on
			// both and the plans the ALTERs invalidate are made again
			// once a block, not every round.
			enabled := (r/20)%2 == 0
			ids, queueIDs, wss, defs, versions, inputs := make([]uuid.UUID, batch), make([]uuid.UUID, batch), make([]uuid.UUID, batch),
				make([]uuid.UUID, batch), make([]int32, batch), make([]string, batch)
			for i := range ids {
				ids[i], queueIDs[i], wss[i], defs[i], versions[i], inputs[i] = uuid.New(), uuid.UUID(queued[i].QueueID), uuid.UUID(ws.ID), uuid.UUID(def.ID), 1, `{}`
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if !enabled {
				for _, t := range admissionWaitTriggers {
					if _, err := tx.Exec(ctx, "ALTER TABLE workflow_executions DISABLE TRIGGER "+t); err != nil {
						b.Fatal(err)
					}
				}
			}
			var plan []byte
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+statement, ids, queueIDs, wss, defs, versions, inputs).Scan(&plan); err != nil {
				b.Fatal(err)
			}
			_ = tx.Rollback(ctx)
			var explained []struct {
				ExecutionTime float64 `json:"Execution Time"`
				Triggers      []struct {
					Name string  `json:"Trigger Name"`
					Time float64 `json:"Time"`
				} `json:"Triggers"`
			}
			if err := json.Unmarshal(plan, &explained); err != nil || len(explained) != 1 {
				b.Fatalf("EXPLAIN's answer %s: %v", plan, err)
			}
			rd := round{total: ms(explained[0].ExecutionTime), triggers: map[string]time.Duration{}}
			for _, t := range explained[0].Triggers {
				rd.triggers[t.Name] = ms(t.Time)
			}
			if enabled {
				for _, t := range admissionWaitTriggers {
					if _, ok := rd.triggers[t]; !ok {
						b.Fatalf("trigger %s did not fire on the claim's execution write: %s", t, plan)
					}
				}
				with = append(with, rd)
			} else {
				without = append(without, rd)
			}
		}
	}
	median := func(rs []round, of func(round) time.Duration) time.Duration {
		ds := make([]time.Duration, len(rs))
		for i, r := range rs {
			ds[i] = of(r)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	total := func(r round) time.Duration { return r.total }
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n== the admission wait's triggers (migration 00036) on the claim's execution write of %d executions: EXPLAIN ANALYZE, %d rounds each way in alternating blocks, medians; load average %s ==\n",
		batch, rounds, loadAverage())
	fmt.Fprintf(&sb, "statement with the triggers %v, without %v: they add %v\n",
		median(with, total), median(without, total), median(with, total)-median(without, total))
	for _, t := range admissionWaitTriggers {
		fmt.Fprintf(&sb, "    %s: %v (EXPLAIN's trigger time)\n", t, median(with, func(r round) time.Duration { return r.triggers[t] }))
	}
	_, _ = os.Stdout.WriteString(sb.String())
	b.ReportMetric(float64(median(with, total)-median(without, total))/1e6, "triggers_ms/100")
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// claimsExecutionWrite is ExecutionsUpsertRunning's statement as
// db/queries holds it, its named parameters numbered as sqlc numbers them
// (in order of first appearance).
func claimsExecutionWrite(b *testing.B) string {
	raw, err := os.ReadFile("../../db/queries/executions.sql")
	if err != nil {
		b.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "-- name: ExecutionsUpsertRunning :exec\n")
	if !ok {
		b.Fatal("ExecutionsUpsertRunning is not in db/queries/executions.sql")
	}
	stmt, _, _ := strings.Cut(after, ";\n")
	var lines []string
	for l := range strings.Lines(stmt) {
		if !strings.HasPrefix(l, "--") {
			lines = append(lines, l)
		}
	}
	numbers := map[string]int{}
	return regexp.MustCompile(`@(\w+)`).ReplaceAllStringFunc(strings.Join(lines, ""), func(p string) string {
		if _, ok := numbers[p]; !ok {
			numbers[p] = len(numbers) + 1
		}
		return fmt.Sprintf("$%d", numbers[p])
	})
}

func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}
