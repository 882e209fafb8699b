package usecases

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/app/internal/apptest"
	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// enqueueBench is the API's use cases of every way in over stores that keep
// what they are asked to write: a definition keyed on input.customer
// (limit 3, 5 starts a second) at its current version 2, keyed on
// input.region (limit 1) at version 1, which a retry pins.
type enqueueBench struct {
	ws, def domain.ID
	queue   *recordingQueue
	execs   *Executions
}

type recordingQueue struct {
	ports.QueueStore
	items   []ports.ItemToEnqueue
	batches []ports.EnqueueBatch
	stored  domain.QueueItem
}

func (q *recordingQueue) Enqueue(_ context.Context, e ports.ItemToEnqueue) (domain.QueueItem, bool, error) {
	q.items = append(q.items, e)
	return domain.QueueItem{ID: e.ID}, false, nil
}

func (q *recordingQueue) EnqueueBatch(_ context.Context, b ports.EnqueueBatch) ([]ports.EnqueueResult, error) {
	q.batches = append(q.batches, b)
	return make([]ports.EnqueueResult, len(b.Items)), nil
}

func (q *recordingQueue) GetQueueItem(context.Context, domain.ID) (domain.QueueItem, error) {
	return q.stored, nil
}

type keyedDefinitions struct {
	ports.DefinitionStore
	ws      domain.ID
	current *domain.Concurrency
	v1      *domain.Concurrency
}

func (d keyedDefinitions) DefinitionWorkspace(context.Context, domain.ID) (domain.ID, error) {
	return d.ws, nil
}

func (d keyedDefinitions) DefinitionConcurrency(_ context.Context, _ domain.ID, version int) (*domain.Concurrency, error) {
	if version == 1 {
		return d.v1, nil
	}
	return d.current, nil
}

type failedExecution struct {
	ports.ExecutionReader
	e domain.Execution
}

func (f failedExecution) ExecutionWorkspace(context.Context, domain.ID) (domain.ID, error) {
	return f.e.WorkspaceID, nil
}

func (f failedExecution) GetExecutionWithoutNodes(context.Context, domain.ID) (domain.Execution, error) {
	return f.e, nil
}

var (
	byCustomer = &domain.Concurrency{Key: "{{ input.customer }}", Limit: 3, StartRate: &domain.StartRate{Rate: 5, Per: domain.PerSecond, Burst: 5}}
	byRegion   = &domain.Concurrency{Key: "{{ input.region }}", Limit: 1}
)

func newEnqueueBench(t *testing.T) *enqueueBench {
	t.Helper()
	b := &enqueueBench{ws: domain.ID(uuid.New()), def: domain.ID(uuid.New()), queue: &recordingQueue{}}
	defs := keyedDefinitions{ws: b.ws, current: byCustomer, v1: byRegion}
	failed := domain.Execution{ID: domain.ID(uuid.New()), WorkspaceID: b.ws, DefinitionID: b.def, Version: 1,
		Status: domain.ExecutionFailed, Input: json.RawMessage(`{"customer": "c-1", "region": "eu"}`)}
	b.execs = NewExecutions(b.queue, failedExecution{e: failed}, defs, nil, nil, domain.DefaultProcessQuotas())
	return b
}

// TestASingleEnqueueBuildsItsItemWithTheConstructor: a client's enqueue
// stores the item queue.NewItem built: v7 id, default priority, key.
func TestASingleEnqueueBuildsItsItemWithTheConstructor(t *testing.T) {
	t.Parallel()
	b := newEnqueueBench(t)
	if _, _, err := b.execs.Enqueue(context.Background(), domain.Actor{Admin: true}, EnqueueRequest{WorkspaceID: b.ws, DefinitionID: b.def,
		Input: json.RawMessage(`{"customer": "c-9"}`), IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	e := b.queue.items[0]
	apptest.CheckBuilt(t, "single", e, "c-9", byCustomer, queue.DefaultPriority)
	if len(e.RequestHash) == 0 || e.RetryOf != nil || e.PinnedVersion != 0 {
		t.Errorf("single: hash %x retry of %v pinned %d", e.RequestHash, e.RetryOf, e.PinnedVersion)
	}
}

// TestABulkEnqueueBuildsItsItemsWithTheConstructorInIncreasingIDs: every
// item of a batch is built by queue.NewItem, their ids increasing in the
// order sent.
func TestABulkEnqueueBuildsItsItemsWithTheConstructorInIncreasingIDs(t *testing.T) {
	t.Parallel()
	b := newEnqueueBench(t)
	items := make([]EnqueueBatchItem, 50)
	for i := range items {
		items[i] = EnqueueBatchItem{Input: json.RawMessage(`{"customer": "c-` + string(rune('a'+i%26)) + `"}`), Priority: 1 + i%4}
	}
	if _, err := b.execs.EnqueueBatch(context.Background(), domain.Actor{Admin: true}, EnqueueBatchRequest{WorkspaceID: b.ws, DefinitionID: b.def, Items: items}); err != nil {
		t.Fatal(err)
	}
	batch := b.queue.batches[0]
	if batch.ConcurrencyRate != byCustomer.StartRate {
		t.Errorf("the batch's key rate %v, want the definition's %v", batch.ConcurrencyRate, byCustomer.StartRate)
	}
	for i, it := range batch.Items {
		e := ports.ItemToEnqueue{ID: it.ID, Input: it.Input, Priority: it.Priority, ConcurrencyKey: it.ConcurrencyKey,
			ConcurrencyLimit: it.ConcurrencyLimit, ConcurrencyRate: batch.ConcurrencyRate}
		apptest.CheckBuilt(t, "bulk", e, "c-"+string(rune('a'+i%26)), byCustomer, 1+i%4)
		if i > 0 && string(it.ID[:]) <= string(batch.Items[i-1].ID[:]) {
			t.Fatalf("item %d's id %s does not follow item %d's %s: the batch would not keep the order sent", i, it.ID, i-1, batch.Items[i-1].ID)
		}
	}
}

// TestARetryBuildsItsItemWithTheConstructorOnThePinnedVersionsKey: a
// retry's item is built by queue.NewItem with the key of the version it
// pins, not the current one.
func TestARetryBuildsItsItemWithTheConstructorOnThePinnedVersionsKey(t *testing.T) {
	t.Parallel()
	b := newEnqueueBench(t)
	failed, _ := b.execs.executions.GetExecutionWithoutNodes(context.Background(), domain.NilID)
	if _, err := b.execs.Retry(context.Background(), domain.Actor{Admin: true}, failed.ID); err != nil {
		t.Fatal(err)
	}
	e := b.queue.items[0]
	apptest.CheckBuilt(t, "retry", e, "eu", byRegion, queue.DefaultPriority)
	if e.RetryOf == nil || *e.RetryOf != failed.ID || e.PinnedVersion != 1 {
		t.Errorf("retry: retry of %v pinned %d, want %s at version 1", e.RetryOf, e.PinnedVersion, failed.ID)
	}
}

// TestARequeueBuildsItsItemWithTheConstructor: a requeue's item is a new
// one built by queue.NewItem, keeping the old item's priority.
func TestARequeueBuildsItsItemWithTheConstructor(t *testing.T) {
	t.Parallel()
	b := newEnqueueBench(t)
	old := domain.ID(uuid.New())
	b.queue.stored = domain.QueueItem{ID: old, WorkspaceID: b.ws, DefinitionID: b.def, QueueState: domain.QueueState{Status: domain.QueueFailed},
		Input: json.RawMessage(`{"customer": "c-4"}`), Priority: 3, RunTimeout: 0}
	if _, err := b.execs.Requeue(context.Background(), domain.Actor{Admin: true}, old); err != nil {
		t.Fatal(err)
	}
	e := b.queue.items[0]
	apptest.CheckBuilt(t, "requeue", e, "c-4", byCustomer, 3)
	if e.ID == old {
		t.Error("requeue: the new item reuses the old item's id")
	}
}
