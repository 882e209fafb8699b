package app

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/app/queue"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// enqueueBench is the use cases of every way in over stores that keep
// what they are asked to write: a definition keyed on input.customer
// (limit 3, 5 starts a second) at its current version 2, keyed on
// input.region (limit 1) at version 1, which a retry pins.
type enqueueBench struct {
	ws, def  domain.ID
	queue    *recordingQueue
	execs    *Executions
	schedule *ScheduleFiring
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
	b.schedule = NewScheduleFiring(nil, nil, nil, DefaultScheduleFiringConfig(), nil, discardLog())
	return b
}

// checkBuilt checks what queue.NewItem gives every item: a time-ordered id
// (UUIDv7), the defaults filled, and the key resolved over the input with
// its limit and rate.
func checkBuilt(t *testing.T, way string, e ports.ItemToEnqueue, key string, c *domain.Concurrency, priority int) {
	t.Helper()
	if v := uuid.UUID(e.ID).Version(); v != 7 {
		t.Errorf("%s: the item's id is a UUID v%d, want v7 (minted in order)", way, v)
	}
	if e.ConcurrencyKey == nil || *e.ConcurrencyKey != key || e.ConcurrencyLimit != c.Limit || e.ConcurrencyRate != c.StartRate {
		t.Errorf("%s: key %v limit %d rate %v, want %q, %d, %v", way, e.ConcurrencyKey, e.ConcurrencyLimit, e.ConcurrencyRate, key, c.Limit, c.StartRate)
	}
	if e.Priority != priority || len(e.Input) == 0 {
		t.Errorf("%s: priority %d input %q, want priority %d and an input", way, e.Priority, e.Input, priority)
	}
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
	checkBuilt(t, "single", e, "c-9", byCustomer, queue.DefaultPriority)
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
		checkBuilt(t, "bulk", e, "c-"+string(rune('a'+i%26)), byCustomer, 1+i%4)
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
	checkBuilt(t, "retry", e, "eu", byRegion, queue.DefaultPriority)
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
	checkBuilt(t, "requeue", e, "c-4", byCustomer, 3)
	if e.ID == old {
		t.Error("requeue: the new item reuses the old item's id")
	}
}

// TestAScheduleTickBuildsItsItemWithTheConstructor: the firing's decision
// (no longer the Postgres adapter) builds the tick's item with
// queue.NewItem, and turns an input the key cannot read into a refusal.
func TestAScheduleTickBuildsItsItemWithTheConstructor(t *testing.T) {
	t.Parallel()
	b := newEnqueueBench(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	due := now.Add(-time.Second)
	due1 := ports.DueSchedule{Now: now, DefinitionLive: true, Concurrency: byCustomer, Schedule: domain.Schedule{
		ID: domain.ID(uuid.New()), WorkspaceID: b.ws, DefinitionID: b.def, Interval: time.Minute, Overlap: domain.OverlapQueue,
		Input: json.RawMessage(`{"customer": "c-7"}`), Priority: 4, NextFireAt: &due}}
	plan, err := b.schedule.decide(due1)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Firing.Enqueue || plan.Refused != nil {
		t.Fatalf("the due tick's plan %+v, want an item", plan)
	}
	checkBuilt(t, "schedule tick", plan.Item, "c-7", byCustomer, 4)
	if plan.Item.WorkspaceID != b.ws || plan.Item.DefinitionID != b.def || plan.Item.Actor != (domain.Actor{}) {
		t.Errorf("schedule tick: item %+v, want the schedule's workspace and definition, no actor", plan.Item)
	}

	// An input the key cannot read is the plan's refusal, naming /input.
	due1.Schedule.Input = json.RawMessage(`{"order": 1}`)
	if plan, err = b.schedule.decide(due1); err != nil {
		t.Fatal(err)
	}
	if plan.Refused == nil || len(plan.Refused.Problems) != 1 || plan.Refused.Problems[0].Path != "/input" || !plan.Firing.Enqueue {
		t.Errorf("a tick whose input lacks the key: %+v, want its refusal at /input", plan)
	}
}
