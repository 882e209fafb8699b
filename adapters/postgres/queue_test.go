package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
	"github.com/sluicehq/sluice/ports/porttest"
)

// queueBench is one ENTERPRISE workspace with one definition on a fresh
// database, and the store that moves its queue items.
type queueBench struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	ws    domain.ID
	def   domain.ID
}

func newQueueBench(t *testing.T) *queueBench {
	t.Helper()
	pool := pgtest.Pool(t)
	b := &queueBench{pool: pool, store: postgres.NewStore(pool, quiet())}
	b.ws, b.def = createWorkspace(t, b.store, domain.PlanEnterprise)
	return b
}

// createWorkspace creates a workspace on plan with one empty-graph
// definition, through the store.
func createWorkspace(t *testing.T, store *postgres.Store, plan domain.Plan) (domain.ID, domain.ID) {
	t.Helper()
	ctx := context.Background()
	w, err := store.CreateWorkspace(ctx, domain.Workspace{ID: domain.ID(uuid.New()), Name: "ws", Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	d, err := store.CreateDefinition(ctx, domain.Definition{ID: domain.ID(uuid.New()), WorkspaceID: w.ID, Name: "d"})
	if err != nil {
		t.Fatal(err)
	}
	return w.ID, d.ID
}

// enqueue enqueues n items of def in ws through the store.
func enqueue(t *testing.T, store *postgres.Store, ws, def domain.ID, n int) []domain.ID {
	t.Helper()
	ids := make([]domain.ID, n)
	for i := range ids {
		q, _, err := store.Enqueue(context.Background(), ports.ItemToEnqueue{
			ID: domain.ID(uuid.New()), WorkspaceID: ws, DefinitionID: def, Input: json.RawMessage(`{}`), Priority: 2, Actor: domain.Actor{Admin: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = q.ID
	}
	return ids
}

// pending enqueues one item: the diagram's entry into PENDING.
func (b *queueBench) pending(t *testing.T) domain.ID {
	t.Helper()
	return enqueue(t, b.store, b.ws, b.def, 1)[0]
}

// claim claims what the tier limits admit and requires exactly want items.
func (b *queueBench) claim(t *testing.T, want int) []ports.ClaimedItem {
	t.Helper()
	res := claimAll(t, b.store)
	if len(res.Claimed) != want {
		t.Fatalf("claimed %d items, want %d", len(res.Claimed), want)
	}
	return res.Claimed
}

// claimed enqueues one item and claims it.
func (b *queueBench) claimed(t *testing.T) ports.ClaimedItem {
	t.Helper()
	b.pending(t)
	return b.claim(t, 1)[0]
}

// markDispatched marks the items' workflows started and returns how many
// the store moved to DISPATCHED.
func (b *queueBench) markDispatched(t *testing.T, items ...ports.ClaimedItem) int {
	t.Helper()
	req := make([]ports.DispatchedItem, len(items))
	for i, it := range items {
		req[i] = ports.DispatchedItem{ID: it.ID, ExecutionID: it.ExecutionID}
	}
	recs, err := b.store.MarkDispatched(context.Background(), ports.Fence{}, req)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// dispatched enqueues one item, claims it and marks it DISPATCHED.
func (b *queueBench) dispatched(t *testing.T) ports.ClaimedItem {
	t.Helper()
	item := b.claimed(t)
	if n := b.markDispatched(t, item); n != 1 {
		t.Fatalf("marked %d DISPATCHED, want 1", n)
	}
	return item
}

// apply writes transitions through ApplyTransitions and returns the ids
// written.
func (b *queueBench) apply(t *testing.T, ts ...ports.QueueTransition) []domain.ID {
	t.Helper()
	ids, err := b.store.ApplyTransitions(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// transition is the write of next, computed by the domain from item's
// state, guarded by that state; drop also drops the item's execution row,
// as every release of a claim does.
func transition(item domain.QueueItem, next domain.QueueState, drop bool) ports.QueueTransition {
	tr := ports.QueueTransition{ID: item.ID, FromStatus: item.Status, FromClaimedAt: item.ClaimedAt, To: next}
	if drop {
		tr.DropExecution = item.ExecutionID
	}
	return tr
}

// item reads the item back; ok is false when it is gone.
func (b *queueBench) item(t *testing.T, id domain.ID) (domain.QueueItem, bool) {
	t.Helper()
	q, err := b.store.GetQueueItem(context.Background(), id)
	if errors.Is(err, ports.ErrNotFound) {
		return domain.QueueItem{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return q, true
}

// execution returns the status of the execution row, "" when there is none.
func (b *queueBench) execution(t *testing.T, id domain.ID) domain.ExecutionStatus {
	t.Helper()
	e, err := b.store.GetExecutionWithoutNodes(context.Background(), id)
	if errors.Is(err, ports.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.Status
}

// rowWant is what a queue item's row must hold after a step.
type rowWant struct {
	status   domain.QueueStatus
	attempts int
	failures int
	// lastError is the exact last_error, or with lastErrorHas a part of it.
	lastError    string
	lastErrorHas bool
	// executionID is the execution the item must name; nil for none.
	executionID *domain.ID
	// execution is the status of that execution's row; "" when it must be
	// gone.
	execution domain.ExecutionStatus
}

// requireRow checks the item's row against want, and the invariants every
// state keeps: claimed_at exactly while CLAIMED, dispatched_at from
// DISPATCHED on.
func (b *queueBench) requireRow(t *testing.T, step string, id domain.ID, want rowWant) domain.QueueItem {
	t.Helper()
	q, ok := b.item(t, id)
	if !ok {
		t.Fatalf("%s: item %s is gone", step, id)
	}
	var problems []string
	if q.Status != want.status {
		problems = append(problems, fmt.Sprintf("status %s, want %s", q.Status, want.status))
	}
	if (q.ClaimedAt != nil) != (q.Status == domain.QueueClaimed) {
		problems = append(problems, fmt.Sprintf("claimed_at %v in %s; it is set exactly while CLAIMED", q.ClaimedAt, q.Status))
	}
	if q.Status == domain.QueueDispatched && q.DispatchedAt == nil {
		problems = append(problems, "DISPATCHED without dispatched_at")
	}
	if q.AttemptCount != want.attempts || q.DispatchFailures != want.failures {
		problems = append(problems, fmt.Sprintf("attempt_count %d, dispatch_failures %d; want %d, %d", q.AttemptCount, q.DispatchFailures, want.attempts, want.failures))
	}
	if want.lastErrorHas && !strings.Contains(q.LastError, want.lastError) || !want.lastErrorHas && q.LastError != want.lastError {
		problems = append(problems, fmt.Sprintf("last_error %q, want %q", q.LastError, want.lastError))
	}
	switch {
	case want.executionID == nil && q.ExecutionID != nil:
		problems = append(problems, fmt.Sprintf("execution_id %s, want none", *q.ExecutionID))
	case want.executionID != nil && (q.ExecutionID == nil || *q.ExecutionID != *want.executionID):
		problems = append(problems, fmt.Sprintf("execution_id %v, want %s", q.ExecutionID, *want.executionID))
	}
	if want.executionID != nil {
		if got := b.execution(t, *want.executionID); got != want.execution {
			problems = append(problems, fmt.Sprintf("execution row %q, want %q", got, want.execution))
		}
	}
	if err := q.Validate(); err != nil {
		problems = append(problems, "row breaks the domain's invariants: "+err.Error())
	}
	if len(problems) > 0 {
		t.Fatalf("%s: item %s:\n%s", step, id, strings.Join(problems, "\n"))
	}
	return q
}

// requireGone checks the item's row was deleted.
func (b *queueBench) requireGone(t *testing.T, step string, id domain.ID) {
	t.Helper()
	if q, ok := b.item(t, id); ok {
		t.Fatalf("%s: item %s is still there, %s", step, id, q.Status)
	}
}

// elapseBackoff makes the item claimable now, as if its backoff had run out.
func (b *queueBench) elapseBackoff(t *testing.T, id domain.ID) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(), "UPDATE workflow_execution_queue SET available_at = now() WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
}

// staleAfter is the stale-claim threshold of these tests: short, so a
// claim becomes stale by waiting instead of by rewriting its claimed_at,
// which would change the claim its dispatcher holds.
const staleAfter = time.Millisecond

// staleReason is the LastError of these tests' stale recoveries.
const staleReason = "not started: its dispatcher stopped"

// recoverStale polls until stale recovery observes the item's claim as
// stale, and returns the observed item with the release stale recovery
// gives one whose workflow never started.
func (b *queueBench) recoverStale(t *testing.T, id domain.ID) (domain.QueueItem, domain.QueueState) {
	t.Helper()
	var item domain.QueueItem
	var next domain.QueueState
	porttest.Eventually(t, 10*time.Second, func() error {
		items, err := b.store.StaleClaimed(context.Background(), staleAfter, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range items {
			if q.ID != id {
				continue
			}
			item, next = q, q.QueueState
			if err := next.ReleaseUnstarted(staleReason); err != nil {
				t.Fatal(err)
			}
			return nil
		}
		return fmt.Errorf("item %s is not a stale claim yet", id)
	})
	return item, next
}

// testBackoff is long enough that an item released after a dispatch error
// is visibly not claimable until the test lets the backoff elapse.
var testBackoff = domain.DispatchBackoff{Base: time.Minute, Max: 5 * time.Minute}

// releaseAfterError computes and writes the domain's release of a claimed
// item after a failed dispatch, at now.
func (b *queueBench) releaseAfterError(t *testing.T, item domain.QueueItem, reason string, now time.Time) []domain.ID {
	t.Helper()
	next := item.QueueState
	if err := next.ReleaseAfterDispatchError(reason, now, testBackoff); err != nil {
		t.Fatal(err)
	}
	return b.apply(t, transition(item, next, true))
}

func sameInstant(a, b time.Time) bool {
	d := a.Sub(b)
	return d < time.Microsecond && d > -time.Microsecond
}

// queueEdge is one edge of the diagram on domain.QueueStatus: from, the
// edge's label as the diagram writes it, and to (a QueueStatus, or
// "deleted"). walk drives the item there through the store alone and
// checks the row after the edge.
type queueEdge struct {
	from  domain.QueueStatus
	label string
	to    string
	// how tells several walks of one edge apart.
	how  string
	walk func(t *testing.T, b *queueBench)
}

func (e queueEdge) name() string {
	n := fmt.Sprintf("%s --%s--> %s", e.from, e.label, e.to)
	if e.how != "" {
		n += " (" + e.how + ")"
	}
	return n
}

// queueEdges walks every edge of the queue state diagram.
func queueEdges() []queueEdge {
	ctx := context.Background()
	const (
		claimLabel          = "claim [QueueMarkClaimed]"
		markDispatchedLabel = "mark dispatched [QueueMarkDispatched]"
		releaseErrLabel     = "ReleaseAfterDispatchError"
		recordOutcomeLabel  = "RecordOutcome(FAILED|CANCELLED)"
		completedLabel      = "execution COMPLETED [QueueDeleteByExecution]"
	)
	recordOutcome := func(from domain.QueueStatus, outcome domain.ExecutionStatus) queueEdge {
		return queueEdge{from: from, label: recordOutcomeLabel, to: string(outcome), walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if from == domain.QueueDispatched {
				b.markDispatched(t, item)
			}
			msg := "node a: " + string(outcome)
			if found, err := finish(ctx, b.store, item.ExecutionID, outcome, &msg); err != nil || !found {
				t.Fatalf("finishing %s: found %v, %v", outcome, found, err)
			}
			b.requireRow(t, "after the execution ended "+string(outcome), item.ID, rowWant{
				status: domain.QueueStatus(outcome), lastError: msg, executionID: &item.ExecutionID, execution: outcome,
			})
		}}
	}
	completed := func(from domain.QueueStatus) queueEdge {
		return queueEdge{from: from, label: completedLabel, to: "deleted", walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if from == domain.QueueDispatched {
				b.markDispatched(t, item)
			}
			found, err := finish(ctx, b.store, item.ExecutionID, domain.ExecutionCompleted, nil)
			if err != nil || !found {
				t.Fatalf("finishing: found %v, %v", found, err)
			}
			b.requireGone(t, "after the execution completed", item.ID)
			if got := b.execution(t, item.ExecutionID); got != domain.ExecutionCompleted {
				t.Fatalf("execution %q, want COMPLETED", got)
			}
		}}
	}
	return []queueEdge{
		{from: domain.QueuePending, label: claimLabel, to: "CLAIMED", walk: func(t *testing.T, b *queueBench) {
			id := b.pending(t)
			b.requireRow(t, "enqueued", id, rowWant{status: domain.QueuePending})
			item := b.claim(t, 1)[0]
			q := b.requireRow(t, "claimed", id, rowWant{status: domain.QueueClaimed, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
			if item.ClaimedAt == nil || !item.ClaimedAt.Equal(*q.ClaimedAt) {
				t.Fatalf("claim handed out claimed_at %v, the row holds %v; later guards compare them", item.ClaimedAt, q.ClaimedAt)
			}
			b.claim(t, 0) // a CLAIMED item is not claimed twice
		}},
		{from: domain.QueueClaimed, label: markDispatchedLabel, to: "DISPATCHED", walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if n := b.markDispatched(t, item); n != 1 {
				t.Fatalf("marked %d, want 1", n)
			}
			b.requireRow(t, "dispatched", item.ID, rowWant{status: domain.QueueDispatched, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
			if n := b.markDispatched(t, item); n != 0 {
				t.Fatalf("marking an item DISPATCHED twice moved %d rows, want 0", n)
			}
		}},
		{from: domain.QueueClaimed, label: "run admitted [QueueAdmitRun]", to: "DISPATCHED", walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			for range 2 { // the second, a replay of the first, changes nothing
				if admitted, err := b.store.AdmitRun(ctx, item.ExecutionID); err != nil || admitted != ports.AdmissionGranted {
					t.Fatalf("admitting the claimed item's run: %v, %v", admitted, err)
				}
				b.requireRow(t, "admitted", item.ID, rowWant{status: domain.QueueDispatched, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
			}
			if n := b.markDispatched(t, item); n != 0 {
				t.Fatalf("the dispatcher's marking after the admission moved %d rows, want 0", n)
			}
		}},
		{from: domain.QueueClaimed, label: releaseErrLabel, to: "PENDING", walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			now := time.Now()
			if ids := b.releaseAfterError(t, item.QueueItem, "temporal said no", now); len(ids) != 1 {
				t.Fatalf("release wrote %d rows, want 1", len(ids))
			}
			q := b.requireRow(t, "released after a dispatch error", item.ID, rowWant{
				status: domain.QueuePending, attempts: 1, failures: 1, lastError: "temporal said no",
			})
			if want := now.Add(testBackoff.Delay(1)); !sameInstant(q.AvailableAt, want) {
				t.Fatalf("available_at %s, want now + the first backoff, %s", q.AvailableAt, want)
			}
			b.claim(t, 0) // the backoff holds it back
			b.elapseBackoff(t, item.ID)
			retry := b.claim(t, 1)[0]
			if retry.ExecutionID == item.ExecutionID {
				t.Fatalf("the retry runs the released claim's execution %s, want one of its own", item.ExecutionID)
			}
			b.requireRow(t, "claimed again", item.ID, rowWant{
				status: domain.QueueClaimed, attempts: 1, failures: 1, lastError: "temporal said no", executionID: &retry.ExecutionID, execution: domain.ExecutionRunning,
			})
			if got := b.execution(t, item.ExecutionID); got != "" {
				t.Fatalf("the released claim's execution is %q, want it gone", got)
			}
		}},
		{from: domain.QueueClaimed, label: releaseErrLabel, to: "FAILED", how: "last allowed attempt", walk: func(t *testing.T, b *queueBench) {
			id := b.pending(t)
			for n := 1; n <= domain.MaxDispatchAttempts; n++ {
				item := b.claim(t, 1)[0]
				reason := fmt.Sprintf("dispatch error %d", n)
				now := time.Now()
				b.releaseAfterError(t, item.QueueItem, reason, now)
				if n < domain.MaxDispatchAttempts {
					q := b.requireRow(t, reason, id, rowWant{status: domain.QueuePending, attempts: n, failures: n, lastError: reason})
					if want := now.Add(testBackoff.Delay(n)); !sameInstant(q.AvailableAt, want) {
						t.Fatalf("after %s: available_at %s, want %s", reason, q.AvailableAt, want)
					}
					b.elapseBackoff(t, id)
					continue
				}
				b.requireRow(t, "the last allowed dispatch error", id, rowWant{
					status: domain.QueueFailed, attempts: n, failures: n, lastError: reason,
				})
			}
			b.claim(t, 0)
		}},
		{from: domain.QueueClaimed, label: "ReleaseUnstarted", to: "PENDING", walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			next := item.QueueState
			if err := next.ReleaseUnstarted("not started: temporal was unavailable"); err != nil {
				t.Fatal(err)
			}
			if ids := b.apply(t, transition(item.QueueItem, next, true)); len(ids) != 1 {
				t.Fatalf("release wrote %d rows, want 1", len(ids))
			}
			q := b.requireRow(t, "released unstarted", item.ID, rowWant{
				status: domain.QueuePending, attempts: 1, lastError: "not started: temporal was unavailable",
			})
			if !q.AvailableAt.Equal(item.AvailableAt) {
				t.Fatalf("available_at moved from %s to %s; an outage of the engine is no reason to back off", item.AvailableAt, q.AvailableAt)
			}
			if retry := b.claim(t, 1)[0]; retry.ExecutionID == item.ExecutionID {
				t.Fatalf("the retry runs the released claim's execution %s, want one of its own", item.ExecutionID)
			}
		}},
		{from: domain.QueueClaimed, label: "ReleaseUnstarted", to: "PENDING", how: "by stale recovery", walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if items, err := b.store.StaleClaimed(ctx, time.Minute, 100); err != nil || len(items) != 0 {
				t.Fatalf("a fresh claim is among the stale ones: %d, %v", len(items), err)
			}
			observed, next := b.recoverStale(t, item.ID)
			if !observed.ClaimedAt.Equal(*item.ClaimedAt) {
				t.Fatalf("stale recovery observed claimed_at %s, the claim took %s", observed.ClaimedAt, item.ClaimedAt)
			}
			if ids := b.apply(t, transition(observed, next, true)); len(ids) != 1 {
				t.Fatalf("recovery wrote %d rows, want 1", len(ids))
			}
			b.requireRow(t, "recovered", item.ID, rowWant{status: domain.QueuePending, attempts: 1, lastError: staleReason})
			b.claim(t, 1)
		}},
		{from: domain.QueuePending, label: "Fail", to: "FAILED", how: "definition deleted", walk: func(t *testing.T, b *queueBench) {
			id := b.pending(t)
			if err := b.store.DeleteDefinition(ctx, b.def); err != nil {
				t.Fatal(err)
			}
			if res := claimAll(t, b.store); res.Failed != 1 || len(res.Claimed) != 0 {
				t.Fatalf("claim = %+v; want the item failed", res)
			}
			b.requireRow(t, "failed by the claim", id, rowWant{status: domain.QueueFailed, lastError: "workflow definition not found", lastErrorHas: true})
		}},
		{from: domain.QueuePending, label: "workspace gone [QueueFailPendingOfWorkspaces]", to: "FAILED", walk: func(t *testing.T, b *queueBench) {
			id := b.pending(t)
			if _, err := b.pool.Exec(ctx, "DELETE FROM workspaces WHERE id = $1", b.ws); err != nil {
				t.Fatal(err)
			}
			if res := claimAll(t, b.store); res.Failed != 1 || len(res.Claimed) != 0 {
				t.Fatalf("claim = %+v; want the item failed", res)
			}
			b.requireRow(t, "failed by the claim", id, rowWant{status: domain.QueueFailed, lastError: "workspace not found", lastErrorHas: true})
		}},
		{from: domain.QueuePending, label: "Cancel", to: "CANCELLED", walk: func(t *testing.T, b *queueBench) {
			id := b.pending(t)
			if _, err := cancel(ctx, b.store, id); err != nil {
				t.Fatal(err)
			}
			b.requireRow(t, "cancelled", id, rowWant{status: domain.QueueCancelled})
			b.claim(t, 0)
		}},
		{from: domain.QueueClaimed, label: "Cancel", to: "CANCELLED", walk: func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if _, err := cancel(ctx, b.store, item.ID); err != nil {
				t.Fatal(err)
			}
			// The execution keeps its slot until its dispatcher settles it.
			b.requireRow(t, "cancelled", item.ID, rowWant{status: domain.QueueCancelled, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		recordOutcome(domain.QueueClaimed, domain.ExecutionFailed),
		recordOutcome(domain.QueueClaimed, domain.ExecutionCancelled),
		recordOutcome(domain.QueueDispatched, domain.ExecutionFailed),
		recordOutcome(domain.QueueDispatched, domain.ExecutionCancelled),
		completed(domain.QueueClaimed),
		completed(domain.QueueDispatched),
	}
}

// TestQueueWalksEveryEdgeOfTheStateDiagram drives one item along each edge
// of the diagram on domain.QueueStatus through the store's own methods, on
// a real database, and checks the row after the edge and that
// workspace_queue_stats still matches the base tables.
func TestQueueWalksEveryEdgeOfTheStateDiagram(t *testing.T) {
	t.Parallel()
	for _, e := range queueEdges() {
		t.Run(e.name(), func(t *testing.T) {
			t.Parallel()
			b := newQueueBench(t)
			e.walk(t, b)
			pgtest.RequireExactStats(t, b.pool, e.name())
		})
	}
}

// diagramEdge is one (from, label, to) of the documented diagram.
type diagramEdge struct{ from, label, to string }

// documentedQueueEdges reads the state diagram from the doc comment of
// domain.QueueStatus, which is the machine the code must enforce.
func documentedQueueEdges(t *testing.T) []diagramEdge {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../domain/queue.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			if s.(*ast.TypeSpec).Name.Name == "QueueStatus" {
				doc = g.Doc.Text()
			}
		}
	}
	line := regexp.MustCompile(`^\s*([A-Z, ]+?)\s+--(.+?)-->\s+(.+)$`)
	target := regexp.MustCompile(`\b(PENDING|CLAIMED|DISPATCHED|FAILED|CANCELLED|deleted)\b`)
	var edges []diagramEdge
	for l := range strings.SplitSeq(doc, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for from := range strings.SplitSeq(m[1], ",") {
			for _, to := range target.FindAllString(m[3], -1) {
				edges = append(edges, diagramEdge{strings.TrimSpace(from), m[2], to})
			}
		}
	}
	if len(edges) == 0 {
		t.Fatal("no edges found in the doc comment of domain.QueueStatus")
	}
	return edges
}

// TestQueueEdgeWalksCoverTheDocumentedDiagram keeps the walk and the
// diagram in step: every documented edge is walked, and nothing is walked
// that the diagram does not declare.
func TestQueueEdgeWalksCoverTheDocumentedDiagram(t *testing.T) {
	t.Parallel()
	documented := documentedQueueEdges(t)
	var walked []diagramEdge
	for _, e := range queueEdges() {
		walked = append(walked, diagramEdge{string(e.from), e.label, e.to})
	}
	for _, d := range documented {
		if !slices.Contains(walked, d) {
			t.Errorf("documented edge %s --%s--> %s is not walked", d.from, d.label, d.to)
		}
	}
	for _, w := range walked {
		if !slices.Contains(documented, w) {
			t.Errorf("walked edge %s --%s--> %s is not in the diagram on domain.QueueStatus", w.from, w.label, w.to)
		}
	}
	t.Logf("%d documented edges, all walked", len(documented))
}

// TestQueueGuardsRefuseStaleTransitions: every write of an edge is guarded
// by the state it was decided from, so a transition decided from a state
// the item has since left changes nothing, not even the execution row a
// release would drop.
func TestQueueGuardsRefuseStaleTransitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, b *queueBench)
	}{
		{"mark dispatched after stale recovery released the item", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			observed, next := b.recoverStale(t, item.ID)
			b.apply(t, transition(observed, next, true))
			if n := b.markDispatched(t, item); n != 0 {
				t.Fatalf("a late dispatcher marked %d items DISPATCHED, want 0", n)
			}
			b.requireRow(t, "after the late marking", item.ID, rowWant{status: domain.QueuePending, attempts: 1, lastError: staleReason})
		}},
		{"mark dispatched after the item was cancelled", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if _, err := cancel(ctx, b.store, item.ID); err != nil {
				t.Fatal(err)
			}
			if n := b.markDispatched(t, item); n != 0 {
				t.Fatalf("marked %d, want 0", n)
			}
			b.requireRow(t, "after the late marking", item.ID, rowWant{status: domain.QueueCancelled, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		{"mark dispatched with another execution", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			other := item
			other.ExecutionID = domain.ID(uuid.New())
			if n := b.markDispatched(t, other); n != 0 {
				t.Fatalf("marked %d, want 0", n)
			}
			b.requireRow(t, "after marking with a foreign execution", item.ID, rowWant{status: domain.QueueClaimed, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		{"release after a dispatch error of a claim stale recovery replaced", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			observed, next := b.recoverStale(t, item.ID)
			b.apply(t, transition(observed, next, true))
			again := b.claim(t, 1)[0]
			if ids := b.releaseAfterError(t, item.QueueItem, "late error", time.Now()); len(ids) != 0 {
				t.Fatalf("the first claim's release wrote %v, want nothing", ids)
			}
			q := b.requireRow(t, "after the late release", item.ID, rowWant{status: domain.QueueClaimed, attempts: 1, lastError: staleReason, executionID: &again.ExecutionID, execution: domain.ExecutionRunning})
			if !q.ClaimedAt.Equal(*again.ClaimedAt) {
				t.Fatalf("claimed_at %s, want the live claim's %s", q.ClaimedAt, again.ClaimedAt)
			}
		}},
		{"release after a dispatch error of an item cancelled meanwhile", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if _, err := cancel(ctx, b.store, item.ID); err != nil {
				t.Fatal(err)
			}
			if ids := b.releaseAfterError(t, item.QueueItem, "late error", time.Now()); len(ids) != 0 {
				t.Fatalf("release wrote %v, want nothing", ids)
			}
			b.requireRow(t, "after the late release", item.ID, rowWant{status: domain.QueueCancelled, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		{"release unstarted of an item marked dispatched meanwhile", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			b.markDispatched(t, item)
			next := item.QueueState
			if err := next.ReleaseUnstarted("unavailable"); err != nil {
				t.Fatal(err)
			}
			if ids := b.apply(t, transition(item.QueueItem, next, true)); len(ids) != 0 {
				t.Fatalf("release wrote %v, want nothing", ids)
			}
			b.requireRow(t, "after the late release", item.ID, rowWant{status: domain.QueueDispatched, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		{"stale recovery of a claim marked dispatched meanwhile", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			observed, next := b.recoverStale(t, item.ID)
			b.markDispatched(t, item)
			if ids := b.apply(t, transition(observed, next, true)); len(ids) != 0 {
				t.Fatalf("recovery wrote %v, want nothing", ids)
			}
			b.requireRow(t, "after the late recovery", item.ID, rowWant{status: domain.QueueDispatched, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		{"stale recovery of a claim that was released and claimed again", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			observed, next := b.recoverStale(t, item.ID)
			released := item.QueueState
			if err := released.ReleaseUnstarted("unavailable"); err != nil {
				t.Fatal(err)
			}
			b.apply(t, transition(item.QueueItem, released, true))
			again := b.claim(t, 1)[0]
			if ids := b.apply(t, transition(observed, next, true)); len(ids) != 0 {
				t.Fatalf("recovery of the old claim wrote %v, want nothing", ids)
			}
			q := b.requireRow(t, "after the late recovery", item.ID, rowWant{
				status: domain.QueueClaimed, attempts: 1, lastError: "unavailable", executionID: &again.ExecutionID, execution: domain.ExecutionRunning,
			})
			if !q.ClaimedAt.Equal(*again.ClaimedAt) {
				t.Fatalf("claimed_at %s, want the live claim's %s", q.ClaimedAt, again.ClaimedAt)
			}
		}},
		{"cancel of a DISPATCHED item", func(t *testing.T, b *queueBench) {
			item := b.dispatched(t)
			if _, err := cancel(ctx, b.store, item.ID); !errors.Is(err, domain.ErrIllegalTransition) {
				t.Fatalf("cancel: %v, want ErrIllegalTransition", err)
			}
			b.requireRow(t, "after the refused cancel", item.ID, rowWant{status: domain.QueueDispatched, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		{"cancel of a FAILED item", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			msg := "boom"
			if _, err := finish(ctx, b.store, item.ExecutionID, domain.ExecutionFailed, &msg); err != nil {
				t.Fatal(err)
			}
			if _, err := cancel(ctx, b.store, item.ID); !errors.Is(err, domain.ErrIllegalTransition) {
				t.Fatalf("cancel: %v, want ErrIllegalTransition", err)
			}
			b.requireRow(t, "after the refused cancel", item.ID, rowWant{status: domain.QueueFailed, lastError: msg, executionID: &item.ExecutionID, execution: domain.ExecutionFailed})
		}},
		{"execution outcome for an item released to PENDING", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			b.releaseAfterError(t, item.QueueItem, "start failed", time.Now())
			msg := "late outcome"
			if _, err := finish(ctx, b.store, item.ExecutionID, domain.ExecutionFailed, &msg); err != nil {
				t.Fatal(err)
			}
			b.requireRow(t, "after a late outcome", item.ID, rowWant{status: domain.QueuePending, attempts: 1, failures: 1, lastError: "start failed"})
		}},
		{"a run of a released claim neither admitted nor deleting the item at its end", func(t *testing.T, b *queueBench) {
			// The takeover released the claim; the old claimer's start,
			// already on its way, lands after that and the run completes.
			item := b.claimed(t)
			next := item.QueueState
			if err := next.ReleaseUnstarted("not started: the dispatcher that claimed it lost its lease"); err != nil {
				t.Fatal(err)
			}
			b.apply(t, transition(item.QueueItem, next, true))
			if admitted, err := b.store.AdmitRun(ctx, item.ExecutionID); err != nil || admitted != ports.AdmissionRefused {
				t.Fatalf("admitting the released claim's run: %v, %v; want it refused", admitted, err)
			}
			if found, err := finish(ctx, b.store, item.ExecutionID, domain.ExecutionCompleted, nil); err != nil || found {
				t.Fatalf("completing the released claim's run: found %v, %v; want nothing recorded", found, err)
			}
			b.requireRow(t, "after the released claim's run ended", item.ID, rowWant{status: domain.QueuePending, attempts: 1,
				lastError: "not started: the dispatcher that claimed it lost its lease"})
			b.claim(t, 1) // it runs under a claim of its own
		}},
		{"release unstarted of an item its run was admitted for meanwhile", func(t *testing.T, b *queueBench) {
			// The start landed between the takeover's question to Temporal
			// and its release: the run's admission came first.
			item := b.claimed(t)
			if admitted, err := b.store.AdmitRun(ctx, item.ExecutionID); err != nil || admitted != ports.AdmissionGranted {
				t.Fatalf("admitting: %v, %v", admitted, err)
			}
			next := item.QueueState
			if err := next.ReleaseUnstarted("unavailable"); err != nil {
				t.Fatal(err)
			}
			if ids := b.apply(t, transition(item.QueueItem, next, true)); len(ids) != 0 {
				t.Fatalf("release wrote %v, want nothing", ids)
			}
			b.requireRow(t, "after the late release", item.ID, rowWant{status: domain.QueueDispatched, executionID: &item.ExecutionID, execution: domain.ExecutionRunning})
		}},
		{"execution outcome for a CANCELLED item", func(t *testing.T, b *queueBench) {
			item := b.claimed(t)
			if _, err := cancel(ctx, b.store, item.ID); err != nil {
				t.Fatal(err)
			}
			msg := "node failed"
			if found, err := finish(ctx, b.store, item.ExecutionID, domain.ExecutionFailed, &msg); err != nil || !found {
				t.Fatalf("finishing: %v, %v", found, err)
			}
			// The execution ends and frees its slot; the cancellation stands.
			b.requireRow(t, "after the outcome", item.ID, rowWant{status: domain.QueueCancelled, executionID: &item.ExecutionID, execution: domain.ExecutionFailed})
		}},
		{"completion for a FAILED item", func(t *testing.T, b *queueBench) {
			item := b.dispatched(t)
			q, _ := b.item(t, item.ID)
			next := q.QueueState
			if err := next.RecordOutcome(domain.ExecutionFailed, "gave up"); err != nil {
				t.Fatal(err)
			}
			b.apply(t, transition(q, next, false))
			if _, err := finish(ctx, b.store, item.ExecutionID, domain.ExecutionCompleted, nil); err != nil {
				t.Fatal(err)
			}
			b.requireRow(t, "after the completion", item.ID, rowWant{status: domain.QueueFailed, lastError: "gave up", executionID: &item.ExecutionID, execution: domain.ExecutionCompleted})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newQueueBench(t)
			tt.run(t, b)
			pgtest.RequireExactStats(t, b.pool, tt.name)
		})
	}
}

// TestExecutionOutcomeNeverOverwritesACancellationItRacedWith: an item
// CLAIMED when its execution ends FAILED, while a cancellation of the item
// holds its row: the outcome is decided from the state the item is in once
// the cancellation commits, so the cancellation stands.
func TestExecutionOutcomeNeverOverwritesACancellationItRacedWith(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newQueueBench(t)
	item := b.claimed(t)

	cancel, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cancel.Rollback(ctx) }()
	if _, err := cancel.Exec(ctx, "UPDATE workflow_execution_queue SET status = 'CANCELLED', claimed_at = NULL WHERE id = $1", item.ID); err != nil {
		t.Fatal(err)
	}
	msg := "node a failed"
	finished := make(chan error, 1)
	go func() {
		_, err := finish(ctx, b.store, item.ExecutionID, domain.ExecutionFailed, &msg)
		finished <- err
	}()
	// Let the outcome reach the item's row lock before the cancellation
	// commits.
	porttest.Eventually(t, 10*time.Second, func() error {
		var waiting int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return nil
		}
		select {
		case err := <-finished:
			t.Fatalf("the outcome was written without waiting for the item's row lock (err %v)", err)
		default:
		}
		return errors.New("the outcome is not waiting for the item's row lock")
	})
	if err := cancel.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	b.requireRow(t, "after the race", item.ID, rowWant{status: domain.QueueCancelled, executionID: &item.ExecutionID, execution: domain.ExecutionFailed})
	pgtest.RequireExactStats(t, b.pool, "after the race")
}

// A cancellation answers with the item as it is stored: the reason an
// item had to wait (kept by the release, as Cancel keeps it) is still
// there when it is read back.
func TestCancelledItemReadsBackAsTheCancelAnsweredIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newQueueBench(t)
	item := b.claimed(t)
	if ids := b.releaseAfterError(t, item.QueueItem, "temporal said no", time.Now()); len(ids) != 1 {
		t.Fatalf("released %d items, want 1", len(ids))
	}
	answered, err := cancel(ctx, b.store, item.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored, ok := b.item(t, item.ID)
	if !ok {
		t.Fatal("cancelled item is gone")
	}
	if answered.Status != domain.QueueCancelled || stored.Status != domain.QueueCancelled {
		t.Errorf("status answered %s, stored %s; want CANCELLED", answered.Status, stored.Status)
	}
	if answered.LastError != "temporal said no" || stored.LastError != answered.LastError {
		t.Errorf("last error answered %q, stored %q; want both %q", answered.LastError, stored.LastError, "temporal said no")
	}
}

// A row whose state the domain does not allow is refused on load, so no
// transition is ever applied to it: reading it fails, and an update
// neither runs its closure nor writes.
func TestACorruptQueueRowIsRefusedOnLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newQueueBench(t)
	id := b.pending(t)
	if _, err := b.pool.Exec(ctx, "UPDATE workflow_execution_queue SET dispatch_failures = 2, attempt_count = 1 WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.GetQueueItem(ctx, id); err == nil {
		t.Error("a corrupt row was loaded")
	}
	called := false
	_, err := b.store.UpdateQueueItem(ctx, id, func(q *domain.QueueItem) error {
		called = true
		return q.Cancel()
	})
	if err == nil || called {
		t.Errorf("update of a corrupt row: %v, closure called %v; want an error and no call", err, called)
	}
	var status string
	if err := b.pool.QueryRow(ctx, "SELECT status FROM workflow_execution_queue WHERE id = $1", id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != string(domain.QueuePending) {
		t.Errorf("corrupt row is now %s, want it left PENDING", status)
	}
}

func TestStoreKeepsTheQueueStoreContract(t *testing.T) {
	t.Parallel()
	porttest.QueueStore(t, func(t *testing.T) porttest.QueueStoreFixture {
		b := newQueueBench(t)
		return porttest.QueueStoreFixture{
			Store: b.store,
			NewWaitingItem: func(t *testing.T) domain.ID {
				item := b.claimed(t)
				next := item.QueueState
				if err := next.ReleaseUnstarted("temporal was unavailable"); err != nil {
					t.Fatal(err)
				}
				if ids := b.apply(t, transition(item.QueueItem, next, true)); len(ids) != 1 {
					t.Fatalf("released %d items, want 1", len(ids))
				}
				return item.ID
			},
		}
	})
}
