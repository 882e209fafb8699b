package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestTheQueueListsBulkEnqueuesInTheOrderSent: a bulk of 1,000 items of
// one priority, then a single enqueue, then a second bulk of 10, are
// listed by GET /workflow/queue (the claim's order) exactly in the order
// sent, within each batch and across them. With random item ids every
// item of a batch tied on created_at and the list was shuffled.
func TestTheQueueListsBulkEnqueuesInTheOrderSent(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.PRO)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "bulk order", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)

	var sent []uuid.UUID
	bulk := func(n int) {
		items := make([]client.EnqueueBatchItem, n)
		for i := range items {
			items[i] = client.EnqueueBatchItem{Input: harness.RawInput(map[string]any{"n": len(sent) + i})}
		}
		r, err := c.EnqueueExecutionBatchWithResponse(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID, Items: items})
		status(t, fmt.Sprintf("enqueueExecutionBatch of %d", n), r, err, http.StatusAccepted)
		for _, it := range r.JSON202.Items {
			sent = append(sent, it.QueueID)
		}
	}
	bulk(1000)
	one, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID})
	status(t, "enqueueExecution", one, err, http.StatusAccepted)
	sent = append(sent, one.JSON202.QueueID)
	bulk(10)

	var listed []uuid.UUID
	params := client.ListQueueParams{WorkspaceID: ws, Limit: harness.Ptr(200)}
	for {
		page, err := c.ListQueueWithResponse(ctx, &params)
		status(t, "listQueue", page, err, http.StatusOK)
		for _, q := range page.JSON200.Items {
			listed = append(listed, q.ID)
		}
		if page.JSON200.NextCursor == nil {
			break
		}
		params.Cursor = page.JSON200.NextCursor
	}
	if len(listed) != len(sent) {
		t.Fatalf("%d items listed, want the %d sent", len(listed), len(sent))
	}
	misplaced, first := 0, -1
	for i := range sent {
		if listed[i] != sent[i] {
			misplaced++
			if first < 0 {
				first = i
			}
		}
	}
	t.Logf("%d of %d items listed out of the order sent", misplaced, len(sent))
	if misplaced > 0 {
		t.Fatalf("%d of %d items listed out of the order sent; the first at place %d", misplaced, len(sent), first)
	}
}
