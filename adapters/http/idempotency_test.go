package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
)

// TestIdempotentStart: the same Idempotency-Key with the same body returns
// the original queue id and writes no second row; with a different body it
// is a 409; keys are scoped per workspace.
func TestIdempotentStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := reader(t)
	a, b := w.client(t, w.keyA.Secret), w.client(t, w.keyB.Secret)
	key := &client.StartExecutionParams{IdempotencyKey: ptr("order-42")}
	body := client.StartExecutionRequest{WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA, Input: &map[string]any{"name": "Ada", "n": 1}, Priority: ptr(3)}

	first, err := a.StartExecutionWithResponse(ctx, key, body)
	status(t, "startExecution", first, err, http.StatusAccepted)
	before := counts(t, w)

	again, err := a.StartExecutionWithResponse(ctx, key, body)
	status(t, "startExecution replay", again, err, http.StatusAccepted)
	if again.JSON202.QueueId != first.JSON202.QueueId {
		t.Errorf("replay returned queue id %s, want %s", again.JSON202.QueueId, first.JSON202.QueueId)
	}
	// The same content formatted differently is the same body.
	raw := `{ "priority": 3, "input": {"n": 1.0, "name": "Ada"}, "workflowDefinitionId": "` + w.defA.String() + `",
		"workspaceId": "` + w.wsA.String() + `" }`
	reformatted, err := a.StartExecutionWithBodyWithResponse(ctx, key, "application/json", strings.NewReader(raw))
	status(t, "startExecution replay, reformatted", reformatted, err, http.StatusAccepted)
	if reformatted.JSON202.QueueId != first.JSON202.QueueId {
		t.Errorf("reformatted replay returned queue id %s, want %s", reformatted.JSON202.QueueId, first.JSON202.QueueId)
	}
	// The admin replaying a key's start is the same workspace's request.
	byAdmin, err := w.client(t, adminToken).StartExecutionWithResponse(ctx, key, body)
	status(t, "startExecution replay by the admin", byAdmin, err, http.StatusAccepted)
	if byAdmin.JSON202.QueueId != first.JSON202.QueueId {
		t.Errorf("admin replay returned queue id %s, want %s", byAdmin.JSON202.QueueId, first.JSON202.QueueId)
	}
	if after := counts(t, w); after != before {
		t.Errorf("replays wrote rows: before %v, after %v", before, after)
	}

	// A different body under the same key: input, priority or definition.
	other := w.client(t, adminToken)
	cd, err := other.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceId: w.wsA, Name: "other", Graph: greetGraph()})
	status(t, "createDefinition", cd, err, http.StatusCreated)
	before = counts(t, w)
	for name, changed := range map[string]client.StartExecutionRequest{
		"input":      {WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA, Input: &map[string]any{"name": "Grace", "n": 1}, Priority: ptr(3)},
		"priority":   {WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA, Input: body.Input, Priority: ptr(1)},
		"no input":   {WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA, Priority: ptr(3)},
		"definition": {WorkspaceId: w.wsA, WorkflowDefinitionId: cd.JSON201.Id, Input: body.Input, Priority: ptr(3)},
	} {
		read(a.StartExecution(ctx, key, changed)).expect(t, "same key, different "+name, http.StatusConflict, "idempotency-conflict")
	}
	if after := counts(t, w); after != before {
		t.Errorf("conflicting starts wrote rows: before %v, after %v", before, after)
	}

	// The same key in workspace B is B's own.
	inB, err := b.StartExecutionWithResponse(ctx, key, client.StartExecutionRequest{WorkspaceId: w.wsB, WorkflowDefinitionId: w.defB})
	status(t, "startExecution in B with A's key string", inB, err, http.StatusAccepted)
	if inB.JSON202.QueueId == first.JSON202.QueueId {
		t.Error("the same Idempotency-Key in another workspace returned A's queue item")
	}
	againB, err := b.StartExecutionWithResponse(ctx, key, client.StartExecutionRequest{WorkspaceId: w.wsB, WorkflowDefinitionId: w.defB})
	status(t, "startExecution replay in B", againB, err, http.StatusAccepted)
	if againB.JSON202.QueueId != inB.JSON202.QueueId {
		t.Errorf("replay in B returned %s, want %s", againB.JSON202.QueueId, inB.JSON202.QueueId)
	}

	// A's item is still there and answers for itself.
	gq, err := a.GetQueueItemWithResponse(ctx, first.JSON202.QueueId)
	status(t, "getQueueItem", gq, err, http.StatusOK)
	if gq.JSON200.Priority != 3 || gq.JSON200.WorkspaceId != w.wsA {
		t.Errorf("the original item: %s", gq.Body)
	}
	var rows int
	if err := w.pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE key = 'order-42'").Scan(&rows); err != nil {
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
	a := w.client(t, w.keyA.Secret)
	admin := w.client(t, adminToken)
	var started []uuid.UUID
	for i := range 3 {
		st, err := a.StartExecutionWithResponse(ctx, nil, client.StartExecutionRequest{WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA, Input: &map[string]any{"i": i}})
		status(t, "startExecution", st, err, http.StatusAccepted)
		started = append(started, st.JSON202.QueueId)
	}
	key := &client.StartExecutionParams{IdempotencyKey: ptr("audit")}
	st, err := a.StartExecutionWithResponse(ctx, key, client.StartExecutionRequest{WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA})
	status(t, "startExecution", st, err, http.StatusAccepted)
	started = append(started, st.JSON202.QueueId)
	replay, err := a.StartExecutionWithResponse(ctx, key, client.StartExecutionRequest{WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA})
	status(t, "startExecution replay", replay, err, http.StatusAccepted)
	byAdmin, err := admin.StartExecutionWithResponse(ctx, nil, client.StartExecutionRequest{WorkspaceId: w.wsA, WorkflowDefinitionId: w.defA})
	status(t, "startExecution by the admin", byAdmin, err, http.StatusAccepted)

	wantActor := map[uuid.UUID]string{byAdmin.JSON202.QueueId: "admin"}
	for _, id := range started {
		wantActor[id] = "api-key:" + w.keyA.Id.String()
	}
	for id, want := range wantActor {
		rows, err := w.pool.Query(ctx, "SELECT actor, workspace_id FROM activity WHERE action = 'execution.enqueued' AND subject_id = $1", id)
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
