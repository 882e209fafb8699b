package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestIdempotentStart: the same Idempotency-Key with the same body returns
// the original queue id and writes no second row; with a different body it
// is a 409; keys are scoped per workspace.
func TestIdempotentStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a, b := w.Client(t, w.keyA.Secret), w.Client(t, w.keyB.Secret)
	key := &client.EnqueueExecutionParams{IdempotencyKey: harness.Ptr("order-42")}
	body := client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA, Input: harness.RawInput(map[string]any{"name": "Ada", "n": 1}), Priority: harness.Ptr(3)}

	first, err := a.EnqueueExecutionWithResponse(ctx, key, body)
	status(t, "startExecution", first, err, http.StatusAccepted)
	before := counts(t, w)

	again, err := a.EnqueueExecutionWithResponse(ctx, key, body)
	status(t, "startExecution replay", again, err, http.StatusAccepted)
	if again.JSON202.QueueID != first.JSON202.QueueID {
		t.Errorf("replay returned queue id %s, want %s", again.JSON202.QueueID, first.JSON202.QueueID)
	}
	// The same content with other white space and member order around the
	// input is the same body. The input itself is kept byte for byte, so its
	// numbers must be written as before (1.0 is not 1).
	raw := `{ "priority": 3, "input": {"n": 1, "name": "Ada"}, "workflowDefinitionId": "` + w.defA.String() + `",
		"workspaceId": "` + w.wsA.String() + `" }`
	reformatted, err := a.EnqueueExecutionWithBodyWithResponse(ctx, key, "application/json", strings.NewReader(raw))
	status(t, "startExecution replay, reformatted", reformatted, err, http.StatusAccepted)
	if reformatted.JSON202.QueueID != first.JSON202.QueueID {
		t.Errorf("reformatted replay returned queue id %s, want %s", reformatted.JSON202.QueueID, first.JSON202.QueueID)
	}
	// The admin replaying a key's start is the same workspace's request.
	byAdmin, err := w.Client(t, harness.AdminToken).EnqueueExecutionWithResponse(ctx, key, body)
	status(t, "startExecution replay by the admin", byAdmin, err, http.StatusAccepted)
	if byAdmin.JSON202.QueueID != first.JSON202.QueueID {
		t.Errorf("admin replay returned queue id %s, want %s", byAdmin.JSON202.QueueID, first.JSON202.QueueID)
	}
	if after := counts(t, w); after != before {
		t.Errorf("replays wrote rows: before %v, after %v", before, after)
	}

	// A different body under the same key: input, priority or definition.
	other := w.Client(t, harness.AdminToken)
	cd, err := other.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "other", Graph: greetGraph()})
	status(t, "createDefinition", cd, err, http.StatusCreated)
	before = counts(t, w)
	for name, changed := range map[string]client.EnqueueExecutionRequest{
		"input":      {WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA, Input: harness.RawInput(map[string]any{"name": "Grace", "n": 1}), Priority: harness.Ptr(3)},
		"priority":   {WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA, Input: body.Input, Priority: harness.Ptr(1)},
		"no input":   {WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA, Priority: harness.Ptr(3)},
		"definition": {WorkspaceID: w.wsA, WorkflowDefinitionID: cd.JSON201.ID, Input: body.Input, Priority: harness.Ptr(3)},
	} {
		read(a.EnqueueExecution(ctx, key, changed)).Expect(t, "same key, different "+name, http.StatusConflict, "idempotency-conflict")
	}
	if after := counts(t, w); after != before {
		t.Errorf("conflicting starts wrote rows: before %v, after %v", before, after)
	}

	// The same key in workspace B is B's own.
	inB, err := b.EnqueueExecutionWithResponse(ctx, key, client.EnqueueExecutionRequest{WorkspaceID: w.wsB, WorkflowDefinitionID: w.defB})
	status(t, "startExecution in B with A's key string", inB, err, http.StatusAccepted)
	if inB.JSON202.QueueID == first.JSON202.QueueID {
		t.Error("the same Idempotency-Key in another workspace returned A's queue item")
	}
	againB, err := b.EnqueueExecutionWithResponse(ctx, key, client.EnqueueExecutionRequest{WorkspaceID: w.wsB, WorkflowDefinitionID: w.defB})
	status(t, "startExecution replay in B", againB, err, http.StatusAccepted)
	if againB.JSON202.QueueID != inB.JSON202.QueueID {
		t.Errorf("replay in B returned %s, want %s", againB.JSON202.QueueID, inB.JSON202.QueueID)
	}

	// A's item is still there and answers for itself.
	gq, err := a.GetQueueItemWithResponse(ctx, first.JSON202.QueueID)
	status(t, "getQueueItem", gq, err, http.StatusOK)
	if gq.JSON200.Priority != 3 || gq.JSON200.WorkspaceID != w.wsA {
		t.Errorf("the original item: %s", gq.Body)
	}
	var rows int
	if err := w.Pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE key = 'order-42'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("%d idempotency records for order-42, want one per workspace", rows)
	}
}

// TestEachStartIsAudited: every start writes one activity row naming the
// key (or the admin) that made it; a replay writes none.
func TestEachStartIsAudited(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	a := w.Client(t, w.keyA.Secret)
	admin := w.Client(t, harness.AdminToken)
	var started []uuid.UUID
	for i := range 3 {
		st, err := a.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA, Input: harness.RawInput(map[string]any{"i": i})})
		status(t, "startExecution", st, err, http.StatusAccepted)
		started = append(started, st.JSON202.QueueID)
	}
	key := &client.EnqueueExecutionParams{IdempotencyKey: harness.Ptr("audit")}
	st, err := a.EnqueueExecutionWithResponse(ctx, key, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA})
	status(t, "startExecution", st, err, http.StatusAccepted)
	started = append(started, st.JSON202.QueueID)
	replay, err := a.EnqueueExecutionWithResponse(ctx, key, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA})
	status(t, "startExecution replay", replay, err, http.StatusAccepted)
	byAdmin, err := admin.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA})
	status(t, "startExecution by the admin", byAdmin, err, http.StatusAccepted)

	wantActor := map[uuid.UUID]string{byAdmin.JSON202.QueueID: "admin"}
	for _, id := range started {
		wantActor[id] = "api-key:" + w.keyA.ID.String()
	}
	for id, want := range wantActor {
		rows, err := w.Pool.Query(ctx, "SELECT actor, workspace_id FROM activity WHERE action = 'execution.enqueued' AND subject_id = $1", id)
		if err != nil {
			t.Fatal(err)
		}
		var actors []string
		for rows.Next() {
			var actor string
			var ws uuid.UUID
			if err := rows.Scan(&actor, &ws); err != nil {
				t.Fatal(err)
			}
			if ws != w.wsA {
				t.Errorf("activity of %s names workspace %s", id, ws)
			}
			actors = append(actors, actor)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(actors) != 1 || actors[0] != want {
			t.Errorf("start %s: activity actors %v, want exactly [%s]", id, actors, want)
		}
	}
}

// TestInputKeepsEveryDigit: the input travels as raw JSON from the request
// to the database and back, so an integer beyond float64's 53 bits comes
// back from GET /workflow/executions/{id} with the digits it was sent with.
func TestInputKeepsEveryDigit(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	a := w.Client(t, w.keyA.Secret)
	const digits = "12345678901234567890"
	body := `{"workspaceId": "` + w.wsA.String() + `", "workflowDefinitionId": "` + w.defA.String() + `", "input": {"big": ` + digits + `, "name": "Ada"}}`
	enq, err := a.EnqueueExecutionWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(body))
	status(t, "enqueueExecution", enq, err, http.StatusAccepted)
	w.DispatchAll(t)
	q, err := a.GetQueueItemWithResponse(ctx, enq.JSON202.QueueID)
	status(t, "getQueueItem", q, err, http.StatusOK)
	if q.JSON200.ExecutionID == nil {
		t.Fatalf("queue item %s has no execution after dispatch", enq.JSON202.QueueID)
	}
	ge, err := a.GetExecutionWithResponse(ctx, *q.JSON200.ExecutionID)
	status(t, "getExecution", ge, err, http.StatusOK)
	var input map[string]json.RawMessage
	if ge.JSON200.Input == nil {
		t.Fatalf("getExecution has no input: %s", ge.Body)
	}
	if err := json.Unmarshal(*ge.JSON200.Input, &input); err != nil {
		t.Fatalf("execution input %s: %v", *ge.JSON200.Input, err)
	}
	if got := string(input["big"]); got != digits {
		t.Fatalf("input.big came back as %s, want %s", got, digits)
	}
}
