package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
)

// greetGraph is the README's one-node definition.
func greetGraph() client.Graph {
	return client.Graph(`{"nodes":[{"key":"greet","type":"TRANSFORM","config":{"output":{"message":"Hello, {{ input.name }}"}}}],"edges":[]}`)
}

// twoStepGraph is a second version: greet, then shout.
func twoStepGraph() client.Graph {
	return client.Graph(`{"nodes":[
		{"key":"greet","type":"TRANSFORM","config":{"output":{"message":"Hello, {{ input.name }}"}}},
		{"key":"shout","type":"TRANSFORM","config":{"output":{"loud":"{{ steps.greet.output.message }}!"}}}
	],"edges":[{"from":"greet","to":"shout"}]}`)
}

// graphOf reads a graph the API answered with, as the domain reads it.
func graphOf(t *testing.T, raw client.Graph) domain.Graph {
	t.Helper()
	g, err := domain.DecodeGraph(raw)
	if err != nil {
		t.Fatalf("graph %s: %v", raw, err)
	}
	return g
}

// status fails the test unless the generated client's response r (a
// *client.XxxResponse) came back with want.
func status(t *testing.T, what string, r interface{ StatusCode() int }, err error, want int) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if r.StatusCode() != want {
		body := reflect.ValueOf(r).Elem().FieldByName("Body").Bytes()
		t.Fatalf("%s: got %d, want %d: %s", what, r.StatusCode(), want, body)
	}
}

// TestContractEveryOperation calls every operation of openapi.yaml through
// the generated Go client against a server on real Postgres and Temporal.
// The checking transport validates each response against the spec; the
// test checks that the answers say what the operations promise.
func TestContractEveryOperation(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	anon := s.Client(t, "")
	admin := s.Client(t, harness.AdminToken)

	// Health.
	hz, err := anon.GetHealthzWithResponse(ctx)
	status(t, "getHealthz", hz, err, http.StatusOK)
	if hz.JSON200.Status != "ok" {
		t.Errorf("healthz status %q", hz.JSON200.Status)
	}
	rz, err := anon.GetReadyzWithResponse(ctx)
	status(t, "getReadyz", rz, err, http.StatusOK)
	if rz.JSON200.Checks == nil || (*rz.JSON200.Checks)["postgres"] != "ok" || (*rz.JSON200.Checks)["temporal"] != "ok" {
		t.Errorf("readyz checks: %s", rz.Body)
	}

	// Workspaces: create two so that listing pages.
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "Acme", Plan: client.PRO})
	status(t, "createWorkspace", cw, err, http.StatusCreated)
	ws := *cw.JSON201
	if ws.Name != "Acme" || ws.Plan != client.PRO || ws.Limit != 5 || ws.Active != 0 || ws.Queued != 0 {
		t.Errorf("created workspace: %+v", ws)
	}
	other, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "Other", Plan: client.FREE})
	status(t, "createWorkspace", other, err, http.StatusCreated)

	var listed []uuid.UUID
	var cursor *string
	for page := 0; ; page++ {
		lw, err := admin.ListWorkspacesWithResponse(ctx, &client.ListWorkspacesParams{Limit: harness.Ptr(1), Cursor: cursor})
		status(t, "listWorkspaces", lw, err, http.StatusOK)
		for _, w := range lw.JSON200.Items {
			listed = append(listed, w.ID)
		}
		if cursor = lw.JSON200.NextCursor; cursor == nil {
			break
		}
		if page > 3 {
			t.Fatalf("listWorkspaces never ends: %v", listed)
		}
	}
	if len(listed) != 2 || !slices.Contains(listed, ws.ID) || !slices.Contains(listed, other.JSON201.ID) {
		t.Errorf("listWorkspaces pages gave %v, want both workspaces once", listed)
	}

	gw, err := admin.GetWorkspaceWithResponse(ctx, ws.ID)
	status(t, "getWorkspace", gw, err, http.StatusOK)
	if gw.JSON200.ID != ws.ID || gw.JSON200.Limit != 5 {
		t.Errorf("getWorkspace: %+v", gw.JSON200)
	}
	up, err := admin.UpdateWorkspacePlanWithResponse(ctx, ws.ID, client.UpdateWorkspaceRequest{Plan: client.ENTERPRISE})
	status(t, "updateWorkspacePlan", up, err, http.StatusOK)
	if up.JSON200.Plan != client.ENTERPRISE || up.JSON200.Limit != 20 {
		t.Errorf("updateWorkspacePlan: %+v", up.JSON200)
	}

	// Limits as data: the plans, then a workspace's own limit over its
	// plan's, shown in its view, and cleared again.
	lp, err := admin.ListPlansWithResponse(ctx)
	status(t, "listPlans", lp, err, http.StatusOK)
	if len(*lp.JSON200) != 3 || (*lp.JSON200)[0].Plan != client.FREE || (*lp.JSON200)[0].MaxRunning != 1 {
		t.Errorf("listPlans: %s", lp.Body)
	}
	upl, err := admin.UpdatePlanWithResponse(ctx, client.FREE, client.UpdatePlanRequest{MaxRunning: harness.Ptr(2)})
	status(t, "updatePlan", upl, err, http.StatusOK)
	if upl.JSON200.Plan != client.FREE || upl.JSON200.MaxRunning != 2 {
		t.Errorf("updatePlan: %s", upl.Body)
	}
	if upl.JSON200.Floor != 0 || upl.JSON200.Weight != 1 {
		t.Errorf("updatePlan: FREE's floor and weight as seeded, 0 and 1: %s", upl.Body)
	}
	gp, err := admin.GetPoolWithResponse(ctx)
	status(t, "getPool", gp, err, http.StatusOK)
	if gp.JSON200.Capacity != nil {
		t.Errorf("getPool: the default pool has no capacity: %s", gp.Body)
	}
	upo, err := admin.UpdatePoolWithResponse(ctx, client.UpdatePoolRequest{Capacity: harness.Ptr(50)})
	status(t, "updatePool", upo, err, http.StatusOK)
	if upo.JSON200.Capacity == nil || *upo.JSON200.Capacity != 50 {
		t.Errorf("updatePool: %s", upo.Body)
	}
	upo, err = admin.UpdatePoolWithResponse(ctx, client.UpdatePoolRequest{Capacity: nil})
	status(t, "updatePool to none", upo, err, http.StatusOK)
	if upo.JSON200.Capacity != nil {
		t.Errorf("updatePool to none: %s", upo.Body)
	}
	gl, err := admin.GetWorkspaceLimitsWithResponse(ctx, ws.ID)
	status(t, "getWorkspaceLimits", gl, err, http.StatusOK)
	if gl.JSON200.WorkspaceID != ws.ID || gl.JSON200.MaxRunning != nil || gl.JSON200.UpdatedAt != nil {
		t.Errorf("getWorkspaceLimits before any is set: %s", gl.Body)
	}
	sl, err := admin.SetWorkspaceLimitsWithResponse(ctx, ws.ID, client.SetWorkspaceLimitsRequest{MaxRunning: harness.Ptr(7)})
	status(t, "setWorkspaceLimits", sl, err, http.StatusOK)
	if sl.JSON200.MaxRunning == nil || *sl.JSON200.MaxRunning != 7 || sl.JSON200.UpdatedAt == nil {
		t.Errorf("setWorkspaceLimits: %s", sl.Body)
	}
	own, err := admin.GetWorkspaceWithResponse(ctx, ws.ID)
	if err != nil || own.JSON200.Limit != 7 {
		t.Errorf("getWorkspace with its own limit 7: %v %s", err, own.Body)
	}
	sl, err = admin.SetWorkspaceLimitsWithResponse(ctx, ws.ID, client.SetWorkspaceLimitsRequest{MaxRunning: nil})
	status(t, "setWorkspaceLimits", sl, err, http.StatusOK)
	if sl.JSON200.MaxRunning != nil {
		t.Errorf("setWorkspaceLimits null: %s", sl.Body)
	}

	// API keys: the secret comes once, listings never carry it.
	ck, err := admin.CreateAPIKeyWithResponse(ctx, ws.ID, client.CreateAPIKeyRequest{Name: "ci"})
	status(t, "createAPIKey", ck, err, http.StatusCreated)
	created := *ck.JSON201
	if !strings.HasPrefix(created.Secret, "slk_") || !strings.HasPrefix(created.Secret, created.Prefix) || created.RevokedAt != nil {
		t.Errorf("createAPIKey: %+v", created)
	}
	spare, err := admin.CreateAPIKeyWithResponse(ctx, ws.ID, client.CreateAPIKeyRequest{Name: "spare"})
	status(t, "createAPIKey", spare, err, http.StatusCreated)
	key := s.Client(t, created.Secret)

	// Who calls: the key names its workspace, the admin none.
	me, err := key.GetCallerWithResponse(ctx)
	status(t, "getCaller", me, err, http.StatusOK)
	if c := me.JSON200; c.Admin || c.KeyID == nil || *c.KeyID != created.ID || c.Workspace == nil ||
		c.Workspace.ID != ws.ID || c.Workspace.Name != "Acme" || c.Workspace.Plan != client.ENTERPRISE {
		t.Errorf("getCaller with a key: %s", me.Body)
	}
	me, err = admin.GetCallerWithResponse(ctx)
	status(t, "getCaller", me, err, http.StatusOK)
	if c := me.JSON200; !c.Admin || c.KeyID != nil || c.Workspace != nil {
		t.Errorf("getCaller with the admin token: %s", me.Body)
	}

	// The capacity series: the last hour in steps of a minute by default.
	cp, err := admin.GetCapacityWithResponse(ctx, nil)
	status(t, "getCapacity", cp, err, http.StatusOK)
	if c := cp.JSON200; c.StepSeconds != 60 || len(c.Pool.Borrowed) != 60 || len(c.Plans) != 3 {
		t.Errorf("getCapacity: %s", cp.Body)
	}

	lk, err := key.ListAPIKeysWithResponse(ctx, ws.ID)
	status(t, "listApiKeys", lk, err, http.StatusOK)
	if len(*lk.JSON200) != 2 {
		t.Errorf("listApiKeys: %s", lk.Body)
	}
	if strings.Contains(string(lk.Body), created.Secret) || strings.Contains(string(lk.Body), "secret") {
		t.Errorf("listApiKeys shows a secret: %s", lk.Body)
	}
	rk, err := admin.RevokeAPIKeyWithResponse(ctx, ws.ID, spare.JSON201.ID)
	status(t, "revokeAPIKey", rk, err, http.StatusNoContent)
	lk, err = admin.ListAPIKeysWithResponse(ctx, ws.ID)
	status(t, "listApiKeys", lk, err, http.StatusOK)
	for _, k := range *lk.JSON200 {
		if (k.ID == spare.JSON201.ID) != (k.RevokedAt != nil) {
			t.Errorf("after revoking %s, key %s has revokedAt %v", spare.JSON201.ID, k.ID, k.RevokedAt)
		}
	}

	// Definitions and versions, from here on with the workspace key.
	cd, err := key.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws.ID, Name: "greet", Graph: greetGraph()})
	status(t, "createDefinition", cd, err, http.StatusCreated)
	def := *cd.JSON201
	if def.CurrentVersion != 1 || def.WorkspaceID != ws.ID || len(graphOf(t, def.Graph).Nodes) != 1 || graphOf(t, def.Graph).Nodes[0].Config == nil {
		t.Errorf("createDefinition: %s", cd.Body)
	}
	spareDef, err := key.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws.ID, Name: "to delete", Graph: greetGraph()})
	status(t, "createDefinition", spareDef, err, http.StatusCreated)

	ld, err := key.ListDefinitionsWithResponse(ctx, &client.ListDefinitionsParams{WorkspaceID: ws.ID})
	status(t, "listDefinitions", ld, err, http.StatusOK)
	if len(ld.JSON200.Items) != 2 || ld.JSON200.NextCursor != nil {
		t.Errorf("listDefinitions: %s", ld.Body)
	}
	gd, err := key.GetDefinitionWithResponse(ctx, def.ID)
	status(t, "getDefinition", gd, err, http.StatusOK)
	if gd.JSON200.ID != def.ID || gd.JSON200.Name != "greet" {
		t.Errorf("getDefinition: %s", gd.Body)
	}
	cv, err := key.CreateDefinitionVersionWithResponse(ctx, def.ID, client.CreateVersionRequest{Graph: twoStepGraph()})
	status(t, "createDefinitionVersion", cv, err, http.StatusCreated)
	if cv.JSON201.Version != 2 || cv.JSON201.DefinitionID != def.ID {
		t.Errorf("createDefinitionVersion: %s", cv.Body)
	}
	for v, nodes := range map[int]int{1: 1, 2: 2} {
		gv, err := key.GetDefinitionVersionWithResponse(ctx, def.ID, v)
		status(t, "getDefinitionVersion", gv, err, http.StatusOK)
		if gv.JSON200.Version != v || len(graphOf(t, gv.JSON200.Graph).Nodes) != nodes {
			t.Errorf("getDefinitionVersion %d: %s", v, gv.Body)
		}
	}
	gd, err = key.GetDefinitionWithResponse(ctx, def.ID)
	status(t, "getDefinition", gd, err, http.StatusOK)
	if gd.JSON200.CurrentVersion != 2 || len(graphOf(t, gd.JSON200.Graph).Nodes) != 2 {
		t.Errorf("after a new version, getDefinition: %s", gd.Body)
	}
	dd, err := key.DeleteDefinitionWithResponse(ctx, spareDef.JSON201.ID)
	status(t, "deleteDefinition", dd, err, http.StatusNoContent)
	gone, err := key.GetDefinitionWithResponse(ctx, spareDef.JSON201.ID)
	status(t, "getDefinition after delete", gone, err, http.StatusNotFound)

	// Executions: six starts, one cancelled while queued, five dispatched.
	var queueIDs []uuid.UUID
	for i := range 6 {
		st, err := key.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{
			WorkspaceID: ws.ID, WorkflowDefinitionID: def.ID, Input: harness.RawInput(map[string]any{"name": "Ada", "i": i}), Priority: harness.Ptr(1 + i%4),
		})
		status(t, "startExecution", st, err, http.StatusAccepted)
		if st.JSON202.Status != client.QueueStatusPENDING {
			t.Errorf("startExecution: %s", st.Body)
		}
		queueIDs = append(queueIDs, st.JSON202.QueueID)
	}
	gq, err := key.GetQueueItemWithResponse(ctx, queueIDs[0])
	status(t, "getQueueItem", gq, err, http.StatusOK)
	if q := gq.JSON200; q.ID != queueIDs[0] || q.Status != client.QueueStatusPENDING || q.Priority != 1 || q.ExecutionID != nil || q.WorkflowDefinitionID != def.ID {
		t.Errorf("getQueueItem: %s", gq.Body)
	}
	gw, err = key.GetWorkspaceWithResponse(ctx, ws.ID)
	status(t, "getWorkspace", gw, err, http.StatusOK)
	if gw.JSON200.Queued != 6 || gw.JSON200.Active != 0 {
		t.Errorf("workspace with 6 queued: %s", gw.Body)
	}

	// A queue item's id is no execution's: it is cancelled at its own path.
	wrong, err := key.CancelExecutionWithResponse(ctx, queueIDs[0])
	status(t, "cancelExecution (a queue id)", wrong, err, http.StatusNotFound)
	cq, err := key.CancelQueueItemWithResponse(ctx, queueIDs[0])
	status(t, "cancelQueueItem (queued)", cq, err, http.StatusAccepted)
	if cq.JSON202.Status != client.CancelResponseStatusCANCELLED || cq.JSON202.ID != queueIDs[0] {
		t.Errorf("cancelling a queued item: %s", cq.Body)
	}
	lq, err := key.ListQueueWithResponse(ctx, &client.ListQueueParams{WorkspaceID: ws.ID, Status: harness.Ptr(client.QueueStatusCANCELLED)})
	status(t, "listQueue", lq, err, http.StatusOK)
	if len(lq.JSON200.Items) != 1 || lq.JSON200.Items[0].ID != queueIDs[0] {
		t.Errorf("listQueue CANCELLED: %s", lq.Body)
	}
	lq, err = key.ListQueueWithResponse(ctx, &client.ListQueueParams{WorkspaceID: ws.ID, Status: harness.Ptr(client.QueueStatusPENDING)})
	status(t, "listQueue", lq, err, http.StatusOK)
	if len(lq.JSON200.Items) != 5 {
		t.Errorf("listQueue PENDING: %s", lq.Body)
	}

	s.DispatchAll(t)

	// The queue lists in the order the dispatcher takes it, priority (1
	// first) then age, paged on that order: the six starts had priorities
	// 1, 2, 3, 4, 1, 2.
	var queued []uuid.UUID
	cursor = nil
	for page := 0; ; page++ {
		lq, err := key.ListQueueWithResponse(ctx, &client.ListQueueParams{WorkspaceID: ws.ID, Limit: harness.Ptr(2), Cursor: cursor})
		status(t, "listQueue", lq, err, http.StatusOK)
		for _, q := range lq.JSON200.Items {
			queued = append(queued, q.ID)
			if want := client.QueueStatusDISPATCHED; q.ID != queueIDs[0] && (q.Status != want || q.ExecutionID == nil || q.DispatchedAt == nil) {
				t.Errorf("after dispatch, queue item %s: %+v", q.ID, q)
			}
		}
		if cursor = lq.JSON200.NextCursor; cursor == nil {
			break
		}
		if page > 6 {
			t.Fatal("listQueue never ends")
		}
	}
	if want := []uuid.UUID{queueIDs[0], queueIDs[4], queueIDs[1], queueIDs[5], queueIDs[2], queueIDs[3]}; !slices.Equal(queued, want) {
		t.Errorf("listQueue pages gave %v, want priority then age: %v", queued, want)
	}

	// Executions list newest first, in pages of two across three pages.
	var execIDs []uuid.UUID
	var starts []string
	cursor = nil
	pages := 0
	for {
		le, err := key.ListExecutionsWithResponse(ctx, &client.ListExecutionsParams{WorkspaceID: ws.ID, Limit: harness.Ptr(2), Cursor: cursor})
		status(t, "listExecutions", le, err, http.StatusOK)
		pages++
		for _, e := range le.JSON200.Items {
			execIDs = append(execIDs, e.ID)
			starts = append(starts, e.StartedAt.UTC().Format("2006-01-02T15:04:05.000000Z"))
			if e.Status != client.ExecutionStatusRUNNING || e.WorkflowVersion != 2 || e.Nodes != nil {
				t.Errorf("listed execution: %+v", e)
			}
		}
		if cursor = le.JSON200.NextCursor; cursor == nil {
			break
		}
		if pages > 6 {
			t.Fatal("listExecutions never ends")
		}
	}
	if len(execIDs) != 5 || pages != 3 || !distinct(execIDs) {
		t.Errorf("listExecutions gave %d executions over %d pages (%v), want 5 distinct over 3", len(execIDs), pages, execIDs)
	}
	if !slices.IsSortedFunc(starts, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Errorf("listExecutions is not newest first: %v", starts)
	}

	// Each execution names its queue item, and is found by it.
	for _, q := range queueIDs[1:] {
		gq, err := key.GetQueueItemWithResponse(ctx, q)
		status(t, "getQueueItem", gq, err, http.StatusOK)
		le, err := key.ListExecutionsWithResponse(ctx, &client.ListExecutionsParams{WorkspaceID: ws.ID, QueueID: &q})
		status(t, "listExecutions by queueId", le, err, http.StatusOK)
		if len(le.JSON200.Items) != 1 || gq.JSON200.ExecutionID == nil || le.JSON200.Items[0].ID != *gq.JSON200.ExecutionID ||
			le.JSON200.Items[0].QueueID == nil || *le.JSON200.Items[0].QueueID != q {
			t.Errorf("listExecutions by queueId %s: %s (item %s)", q, le.Body, gq.Body)
		}
	}
	le, err := key.ListExecutionsWithResponse(ctx, &client.ListExecutionsParams{WorkspaceID: ws.ID, QueueID: &queueIDs[0]})
	status(t, "listExecutions by queueId", le, err, http.StatusOK)
	if len(le.JSON200.Items) != 0 {
		t.Errorf("the item cancelled while queued has an execution: %s", le.Body)
	}
	// Executions filter by definition on the server.
	for d, want := range map[uuid.UUID]int{def.ID: 5, spareDef.JSON201.ID: 0} {
		byDef, err := key.ListExecutionsWithResponse(ctx, &client.ListExecutionsParams{WorkspaceID: ws.ID, WorkflowDefinitionID: &d})
		status(t, "listExecutions by definition", byDef, err, http.StatusOK)
		if len(byDef.JSON200.Items) != want || slices.ContainsFunc(byDef.JSON200.Items, func(e client.Execution) bool { return e.WorkflowDefinitionID != d }) {
			t.Errorf("listExecutions of definition %s: %d items, want %d: %s", d, len(byDef.JSON200.Items), want, byDef.Body)
		}
	}
	le, err = key.ListExecutionsWithResponse(ctx, &client.ListExecutionsParams{WorkspaceID: ws.ID, Status: harness.Ptr(client.ExecutionStatusCOMPLETED)})
	status(t, "listExecutions", le, err, http.StatusOK)
	if len(le.JSON200.Items) != 0 {
		t.Errorf("listExecutions COMPLETED: %s", le.Body)
	}

	ge, err := key.GetExecutionWithResponse(ctx, execIDs[0])
	status(t, "getExecution", ge, err, http.StatusOK)
	if e := ge.JSON200; e.ID != execIDs[0] || e.Status != client.ExecutionStatusRUNNING || e.Input == nil || harness.InputField(t, *e.Input, "name") != "Ada" || e.Nodes == nil {
		t.Errorf("getExecution: %s", ge.Body)
	}
	ln, err := key.ListExecutionNodesWithResponse(ctx, execIDs[0], &client.ListExecutionNodesParams{Limit: harness.Ptr(100)})
	status(t, "listExecutionNodes", ln, err, http.StatusOK)
	if len(ln.JSON200.Items) != len(*ge.JSON200.Nodes) || ln.JSON200.NextCursor != nil {
		t.Errorf("listExecutionNodes: %s, want the records GET showed (%d) and no next page", ln.Body, len(*ge.JSON200.Nodes))
	}
	resp, err := key.ListExecutionNodes(ctx, execIDs[0], &client.ListExecutionNodesParams{Cursor: harness.Ptr("!")})
	harness.Read(t, resp, err).Expect(t, "listExecutionNodes with a bad cursor", http.StatusBadRequest, "invalid-request")
	gw, err = key.GetWorkspaceWithResponse(ctx, ws.ID)
	status(t, "getWorkspace", gw, err, http.StatusOK)
	if gw.JSON200.Queued != 0 || gw.JSON200.Active != 5 {
		t.Errorf("workspace with 5 running: %s", gw.Body)
	}

	// Cancelling a running execution, by its id and by its queue item.
	ce, err := key.CancelExecutionWithResponse(ctx, execIDs[0])
	status(t, "cancelExecution (running)", ce, err, http.StatusAccepted)
	if ce.JSON202.Status != client.CancelResponseStatusCANCELLING || ce.JSON202.ID != execIDs[0] {
		t.Errorf("cancelling a running execution: %s", ce.Body)
	}
	cqd, err := key.CancelQueueItemWithResponse(ctx, queueIDs[1])
	status(t, "cancelQueueItem (dispatched)", cqd, err, http.StatusAccepted)
	if cqd.JSON202.Status != client.CancelResponseStatusCANCELLING || cqd.JSON202.ID != queueIDs[1] {
		t.Errorf("cancelling a dispatched queue item: %s", cqd.Body)
	}

	// A workspace's outbound limits: set (a host in any case is stored in
	// canonical form), changed, listed and removed.
	so, err := key.SetOutboundLimitWithResponse(ctx, ws.ID, "API.Example.com.", client.SetOutboundLimitRequest{RequestsPerSecond: 2.5, Burst: 4})
	status(t, "setOutboundLimit", so, err, http.StatusOK)
	if so.JSON200.Host != "api.example.com" || so.JSON200.RequestsPerSecond != 2.5 || so.JSON200.Burst != 4 {
		t.Errorf("setOutboundLimit: %s", so.Body)
	}
	so, err = key.SetOutboundLimitWithResponse(ctx, ws.ID, "api.example.com", client.SetOutboundLimitRequest{RequestsPerSecond: 10, Burst: 1})
	status(t, "setOutboundLimit", so, err, http.StatusOK)
	lo, err := key.ListOutboundLimitsWithResponse(ctx, ws.ID)
	status(t, "listOutboundLimits", lo, err, http.StatusOK)
	if len(*lo.JSON200) != 1 || (*lo.JSON200)[0].RequestsPerSecond != 10 || (*lo.JSON200)[0].Burst != 1 {
		t.Errorf("listOutboundLimits after two sets of one host: %s", lo.Body)
	}
	do, err := key.DeleteOutboundLimitWithResponse(ctx, ws.ID, "api.example.com")
	status(t, "deleteOutboundLimit", do, err, http.StatusNoContent)
	// No upstream has asked the workspace to wait: no host is paused.
	pauses, err := key.ListOutboundPausesWithResponse(ctx, ws.ID)
	status(t, "listOutboundPauses", pauses, err, http.StatusOK)
	if pauses.JSON200 == nil || len(*pauses.JSON200) != 0 {
		t.Errorf("listOutboundPauses with no Retry-After answered: %s", pauses.Body)
	}

	// The workspace's allow-list, kept by the admin: put (twice, one
	// entry), listed, and removed.
	for range 2 {
		pa, err := admin.PutAllowedWorkflowWithResponse(ctx, ws.ID, client.AllowedWorkflow{TaskQueue: "team-orders", WorkflowType: harness.Ptr("Fulfil")})
		status(t, "putAllowedWorkflow", pa, err, http.StatusOK)
		if pa.JSON200.TaskQueue != "team-orders" || pa.JSON200.WorkflowType == nil || *pa.JSON200.WorkflowType != "Fulfil" {
			t.Errorf("putAllowedWorkflow: %s", pa.Body)
		}
	}
	la, err := admin.ListAllowedWorkflowsWithResponse(ctx, ws.ID)
	status(t, "listAllowedWorkflows", la, err, http.StatusOK)
	if len(*la.JSON200) != 1 {
		t.Errorf("listAllowedWorkflows after putting one entry twice: %s", la.Body)
	}
	da, err := admin.DeleteAllowedWorkflowWithResponse(ctx, ws.ID, &client.DeleteAllowedWorkflowParams{TaskQueue: "team-orders", WorkflowType: harness.Ptr("Fulfil")})
	status(t, "deleteAllowedWorkflow", da, err, http.StatusNoContent)

	// A bulk enqueue, delayed an hour so nothing above is disturbed.
	later := time.Now().Add(time.Hour)
	bulk, err := key.EnqueueExecutionBatchWithResponse(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: ws.ID, WorkflowDefinitionID: def.ID,
		Items: []client.EnqueueBatchItem{{Input: harness.RawInput(map[string]any{"name": "Ada"}), NotBefore: &later}, {Priority: harness.Ptr(1), NotBefore: &later, IdempotencyKey: harness.Ptr("bulk-1")}}})
	status(t, "enqueueExecutionBatch", bulk, err, http.StatusAccepted)
	if len(bulk.JSON202.Items) != 2 || bulk.JSON202.Items[0].Status != client.QueueStatusPENDING {
		t.Errorf("enqueueExecutionBatch: %s", bulk.Body)
	}

	// Schedules, paused so that nothing above is disturbed.
	sc, err := key.CreateScheduleWithResponse(ctx, client.CreateScheduleRequest{WorkspaceID: ws.ID, WorkflowDefinitionID: def.ID, Name: "nightly",
		CronExpression: harness.Ptr("0 3 * * *"), TimeZone: harness.Ptr("America/New_York"), Paused: harness.Ptr(true)})
	status(t, "createSchedule", sc, err, http.StatusCreated)
	ls, err := key.ListSchedulesWithResponse(ctx, &client.ListSchedulesParams{WorkspaceID: ws.ID, Limit: harness.Ptr(1)})
	status(t, "listSchedules", ls, err, http.StatusOK)
	if len(ls.JSON200.Items) != 1 || ls.JSON200.NextCursor == nil {
		t.Errorf("listSchedules: %s", ls.Body)
	}
	next, err := key.ListSchedulesWithResponse(ctx, &client.ListSchedulesParams{WorkspaceID: ws.ID, Cursor: ls.JSON200.NextCursor})
	status(t, "listSchedules, second page", next, err, http.StatusOK)
	if len(next.JSON200.Items) != 0 {
		t.Errorf("listSchedules, second page: %s", next.Body)
	}
	gsc, err := key.GetScheduleWithResponse(ctx, sc.JSON201.ID)
	status(t, "getSchedule", gsc, err, http.StatusOK)
	usc, err := key.UpdateScheduleWithResponse(ctx, sc.JSON201.ID, client.UpdateScheduleRequest{CronExpression: harness.Ptr("30 4 * * 1-5")})
	status(t, "updateSchedule", usc, err, http.StatusOK)
	rsc, err := key.ResumeScheduleWithResponse(ctx, sc.JSON201.ID)
	status(t, "resumeSchedule", rsc, err, http.StatusOK)
	if len(rsc.JSON200.NextFireTimes) != usecases.ScheduleShownFireTimes {
		t.Errorf("resumeSchedule: %s", rsc.Body)
	}
	psc, err := key.PauseScheduleWithResponse(ctx, sc.JSON201.ID)
	status(t, "pauseSchedule", psc, err, http.StatusOK)
	dsc, err := key.DeleteScheduleWithResponse(ctx, sc.JSON201.ID)
	status(t, "deleteSchedule", dsc, err, http.StatusNoContent)

	// Requeueing the cancelled item enqueues a new one of its definition.
	rq, err := key.RequeueQueueItemWithResponse(ctx, queueIDs[0])
	status(t, "requeueQueueItem", rq, err, http.StatusAccepted)
	if rq.JSON202.Status != client.QueueStatusPENDING || rq.JSON202.QueueID == queueIDs[0] {
		t.Errorf("requeueing a cancelled item: %s", rq.Body)
	}
	// Retrying a failed execution enqueues an item naming it. This stack
	// runs no worker, so the execution's end is written as its workflow
	// would.
	if _, err := s.Pool.Exec(ctx, `UPDATE workflow_executions SET status = 'FAILED', completed_at = now() WHERE id = $1`, execIDs[2]); err != nil {
		t.Fatal(err)
	}
	rx, err := key.RetryExecutionWithResponse(ctx, execIDs[2])
	status(t, "retryExecution", rx, err, http.StatusAccepted)
	retryItem, err := key.GetQueueItemWithResponse(ctx, rx.JSON202.QueueID)
	status(t, "getQueueItem", retryItem, err, http.StatusOK)
	if retryItem.JSON200.RetryOf == nil || *retryItem.JSON200.RetryOf != execIDs[2] {
		t.Errorf("the retry's item: %s, want it to name %s", retryItem.Body, execIDs[2])
	}

	// An event reaches a waiting run of another workspace (this one is at
	// its limit) once; a second one is a 409.
	wcw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "Waits", Plan: client.FREE})
	status(t, "createWorkspace", wcw, err, http.StatusCreated)
	wcd, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: wcw.JSON201.ID, Name: "waits",
		Graph: client.Graph(`{"nodes":[{"key":"approve","type":"WAIT_FOR_EVENT","config":{"event":"approval"}}],"edges":[]}`)})
	status(t, "createDefinition", wcd, err, http.StatusCreated)
	wst, err := admin.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: wcw.JSON201.ID, WorkflowDefinitionID: wcd.JSON201.ID})
	status(t, "startExecution", wst, err, http.StatusAccepted)
	s.DispatchAll(t)
	wq, err := admin.GetQueueItemWithResponse(ctx, wst.JSON202.QueueID)
	status(t, "getQueueItem", wq, err, http.StatusOK)
	payload := json.RawMessage(`{"by": "ada"}`)
	se, err := admin.SendEventWithResponse(ctx, *wq.JSON200.ExecutionID, client.EventToSend{Name: "approval", Payload: &payload})
	status(t, "sendEvent", se, err, http.StatusAccepted)
	if se.JSON202.NodeKey != "approve" || se.JSON202.ExecutionID != *wq.JSON200.ExecutionID {
		t.Errorf("sendEvent: %s", se.Body)
	}
	resp, err = admin.SendEvent(ctx, *wq.JSON200.ExecutionID, client.EventToSend{Name: "approval"})
	harness.Read(t, resp, err).Expect(t, "a second event for the node", http.StatusConflict, "not-waiting")

	exerciseWebhooks(t, s, key, ws.ID, execIDs[1])
	exerciseStreams(t, key, ws.ID, execIDs[1])

	// Every operation of the spec has answered a success.
	seen := s.Contract.Statuses()
	for _, op := range s.Contract.Ops {
		if !slices.ContainsFunc(seen[op], func(st int) bool { return st < 300 }) {
			t.Errorf("operation %s was never called successfully (statuses %v)", op, seen[op])
		}
	}

	// The routes outside the operations.
	plain := &http.Client{}
	for path, want := range map[string]string{"/metrics": "queue_items_dispatched_total", "/openapi.yaml": "operationId: cancelExecution"} {
		resp, err := plain.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, want 200 with %q", path, resp.StatusCode, want)
		}
	}
}

func distinct(ids []uuid.UUID) bool {
	seen := map[uuid.UUID]bool{}
	for _, id := range ids {
		if seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}
