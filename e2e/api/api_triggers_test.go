package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestABulkEnqueueOfAThousandItemsIsAcceptedInOneRequest: 1,000 items of
// their own input and priority go in with one request, each answered in
// the order sent; the same keyed items sent again answer their original
// items and write nothing.
func TestABulkEnqueueOfAThousandItemsIsAcceptedInOneRequest(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.PRO)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "bulk", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)

	items := make([]client.EnqueueBatchItem, 1000)
	for i := range items {
		items[i] = client.EnqueueBatchItem{Input: harness.RawInput(map[string]any{"n": i}), Priority: harness.Ptr(1 + i%4)}
		if i%10 == 0 {
			items[i].IdempotencyKey = harness.Ptr(fmt.Sprintf("key-%d", i))
		}
	}
	req := client.EnqueueExecutionBatchRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID, Items: items}
	r, err := c.EnqueueExecutionBatchWithResponse(ctx, req)
	status(t, "enqueueExecutionBatch of 1,000", r, err, http.StatusAccepted)
	if len(r.JSON202.Items) != 1000 {
		t.Fatalf("%d results for 1,000 items", len(r.JSON202.Items))
	}
	ids := make([]uuid.UUID, len(r.JSON202.Items))
	for i, it := range r.JSON202.Items {
		ids[i] = it.QueueID
		if it.Status != client.QueueStatusPENDING || it.Replayed {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
	// Each result names the item sent at its place: its input and priority.
	rows, err := s.Pool.Query(ctx, `SELECT id, (input->>'n')::int, priority FROM workflow_execution_queue WHERE workspace_id = $1`, ws)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[uuid.UUID][2]int{}
	for rows.Next() {
		var id uuid.UUID
		var n, prio int
		if err := rows.Scan(&id, &n, &prio); err != nil {
			t.Fatal(err)
		}
		stored[id] = [2]int{n, prio}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(stored) != 1000 {
		t.Fatalf("%d items stored, want 1,000", len(stored))
	}
	for i, id := range ids {
		if got := stored[id]; got != [2]int{i, 1 + i%4} {
			t.Fatalf("result %d names the item of input n=%d priority %d", i, got[0], got[1])
		}
	}
	var audited int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM activity WHERE workspace_id = $1 AND action = 'execution.enqueued'`, ws).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if audited != 1000 {
		t.Errorf("%d audit rows, want one per item", audited)
	}

	// The keyed items again: each answers its original item.
	var keyed []client.EnqueueBatchItem
	var keyedIDs []uuid.UUID
	for i, it := range items {
		if it.IdempotencyKey != nil {
			keyed, keyedIDs = append(keyed, it), append(keyedIDs, ids[i])
		}
	}
	again, err := c.EnqueueExecutionBatchWithResponse(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID, Items: keyed})
	status(t, "enqueueExecutionBatch replayed", again, err, http.StatusAccepted)
	for i, it := range again.JSON202.Items {
		if !it.Replayed || it.QueueID != keyedIDs[i] {
			t.Fatalf("replayed item %d: %+v, want the original %s", i, it, keyedIDs[i])
		}
	}
	var total int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1`, ws).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 1000 {
		t.Errorf("%d items after the replay, want 1,000", total)
	}
}

// TestABulkEnqueuePastAQuotaIsRefusedWhole: a batch that would take the
// workspace past its pending-items quota is refused with 429 naming the
// quota, and none of its items is written, though some would have fit.
func TestABulkEnqueuePastAQuotaIsRefusedWhole(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	s.SetPlanQuotas(t, domain.PlanFree, domain.QuotaOverrides{PendingItems: harness.Ptr(5)})
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.FREE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "bulk", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)
	batch := func(n int) *client.EnqueueExecutionBatchResponse {
		r, err := c.EnqueueExecutionBatchWithResponse(ctx, client.EnqueueExecutionBatchRequest{
			WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID, Items: make([]client.EnqueueBatchItem, n)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	status(t, "a batch of 3 within the quota of 5", batch(3), nil, http.StatusAccepted)
	over := batch(3)
	status(t, "a batch of 3 past the quota", over, nil, http.StatusTooManyRequests)
	if p := over.ApplicationProblemJSON429; p == nil || p.Detail == nil || !strings.Contains(*p.Detail, "pending queue items") {
		t.Errorf("the refusal does not name the quota: %s", over.Body)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d items stored, want the first batch's 3 alone", n)
	}
	status(t, "a batch of 2 filling the quota", batch(2), nil, http.StatusAccepted)
}

// TestADelayedItemWaitsPendingAndHoldsNoSlot: an item enqueued with a
// notBefore stays PENDING, unclaimed, until then, while an item enqueued
// after it into the same FREE workspace (one slot) runs at once: the
// delayed item holds no slot. It starts once its time has come.
func TestADelayedItemWaitsPendingAndHoldsNoSlot(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.FREE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "later", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)
	notBefore := time.Now().Add(3 * time.Second).UTC().Truncate(time.Millisecond)
	delayed, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{
		WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID, NotBefore: &notBefore, Priority: harness.Ptr(1)})
	status(t, "enqueue with notBefore", delayed, err, http.StatusAccepted)
	now, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID, Priority: harness.Ptr(4)})
	status(t, "enqueue now", now, err, http.StatusAccepted)

	itemStatus := func(id uuid.UUID) (string, *time.Time, time.Time) {
		var st string
		var dispatched *time.Time
		var available time.Time
		if err := s.Pool.QueryRow(ctx, `SELECT status, dispatched_at, available_at FROM workflow_execution_queue WHERE id = $1`, id).
			Scan(&st, &dispatched, &available); err != nil {
			t.Fatal(err)
		}
		return st, dispatched, available
	}
	porttest.Eventually(t, 30*time.Second, func() error {
		if _, err := s.Dispatcher.DispatchBatch(ctx); err != nil {
			t.Fatal(err)
		}
		if st, _, _ := itemStatus(now.JSON202.QueueID); st != "DISPATCHED" {
			return fmt.Errorf("the item enqueued without notBefore is %s", st)
		}
		return nil
	})
	st, _, available := itemStatus(delayed.JSON202.QueueID)
	if time.Now().Before(notBefore) && st != "PENDING" {
		t.Fatalf("the delayed item is %s before its notBefore", st)
	}
	if !available.Equal(notBefore) {
		t.Errorf("the delayed item is available at %s, want its notBefore %s", available, notBefore)
	}
	// While its time is ahead it waits on its notBefore, not on the
	// workspace's limit that the other item fills.
	shown, err := c.GetQueueItemWithResponse(ctx, delayed.JSON202.QueueID)
	status(t, "getQueueItem of the delayed item", shown, err, http.StatusOK)
	if w := shown.JSON200.WaitingOn; time.Now().Before(notBefore) &&
		(w == nil || w.Reason != client.NOTBEFORE || w.Until == nil || !w.Until.Equal(notBefore) || w.Limit != nil) {
		t.Errorf("the delayed item waits on %+v, want NOT_BEFORE until %s", w, notBefore)
	}
	// Once the first run ends, the slot is free for the delayed item when
	// its time comes, and not before.
	if _, err := s.Pool.Exec(ctx, `UPDATE workflow_executions SET status = 'COMPLETED', completed_at = now() WHERE workspace_id = $1`, ws); err != nil {
		t.Fatal(err)
	}
	porttest.Eventually(t, 30*time.Second, func() error {
		if _, err := s.Dispatcher.DispatchBatch(ctx); err != nil {
			t.Fatal(err)
		}
		st, dispatched, _ := itemStatus(delayed.JSON202.QueueID)
		if st != "DISPATCHED" {
			return fmt.Errorf("the delayed item is %s", st)
		}
		if dispatched.Before(notBefore) {
			t.Fatalf("the delayed item was dispatched at %s, before its notBefore %s", dispatched, notBefore)
		}
		return nil
	})
}

// triggerInputCases are the hostile inputs to the trigger endpoints: each
// must be refused with a 4xx problem naming the field at fault, and
// nothing written.
func TestNegativeTriggerInputs(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	read := harness.Reader(t)
	ws, c := quotaWorkspace(t, s, client.PRO)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "hostile", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)
	defID := def.JSON201.ID
	farAway := time.Now().Add(31 * 24 * time.Hour)
	batchOf := func(items []client.EnqueueBatchItem) client.EnqueueExecutionBatchRequest {
		return client.EnqueueExecutionBatchRequest{WorkspaceID: ws, WorkflowDefinitionID: defID, Items: items}
	}
	cases := []struct {
		name   string
		call   func() (*http.Response, error)
		status int
		field  string
	}{
		{"enqueue with notBefore past the horizon", func() (*http.Response, error) {
			return c.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: defID, NotBefore: &farAway})
		}, http.StatusBadRequest, "/notBefore"},
		{"a batch of 1,001 items", func() (*http.Response, error) {
			return c.EnqueueExecutionBatch(ctx, batchOf(make([]client.EnqueueBatchItem, 1001)))
		}, http.StatusBadRequest, "/items"},
		{"an empty batch", func() (*http.Response, error) {
			return c.EnqueueExecutionBatch(ctx, batchOf([]client.EnqueueBatchItem{}))
		}, http.StatusBadRequest, "/items"},
		{"a batch item with notBefore past the horizon", func() (*http.Response, error) {
			return c.EnqueueExecutionBatch(ctx, batchOf([]client.EnqueueBatchItem{{}, {}, {NotBefore: &farAway}}))
		}, http.StatusBadRequest, "/items/2/notBefore"},
		{"a batch repeating a key", func() (*http.Response, error) {
			return c.EnqueueExecutionBatch(ctx, batchOf([]client.EnqueueBatchItem{{IdempotencyKey: harness.Ptr("k")}, {IdempotencyKey: harness.Ptr("k")}}))
		}, http.StatusBadRequest, "/items/1/idempotencyKey"},
		{"a batch item of priority 9", func() (*http.Response, error) {
			return c.EnqueueExecutionBatch(ctx, batchOf([]client.EnqueueBatchItem{{Priority: harness.Ptr(9)}}))
		}, http.StatusBadRequest, "/items/0/priority"},
	}
	for _, tc := range cases {
		a := read(tc.call())
		a.Expect(t, tc.name, tc.status, "invalid-request")
		if !slices.Contains(a.FieldPaths(), tc.field) {
			t.Errorf("%s: the problem names %v, want %s", tc.name, a.FieldPaths(), tc.field)
		}
	}
	// A key used before with other content refuses the whole batch.
	first, err := c.EnqueueExecutionWithResponse(ctx, &client.EnqueueExecutionParams{IdempotencyKey: harness.Ptr("used")},
		client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: defID, Input: harness.RawInput(map[string]any{"a": 1})})
	status(t, "enqueue with a key", first, err, http.StatusAccepted)
	read(c.EnqueueExecutionBatch(ctx, batchOf([]client.EnqueueBatchItem{{}, {IdempotencyKey: harness.Ptr("used"), Input: harness.RawInput(map[string]any{"a": 2})}}))).
		Expect(t, "a batch reusing a key for other content", http.StatusConflict, "idempotency-conflict")
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d items stored after the refusals, want the one keyed enqueue", n)
	}

}
