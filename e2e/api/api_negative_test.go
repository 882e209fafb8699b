package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/adapters/crontab"
	"github.com/sluicehq/sluice/adapters/httpapi"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
)

// world is two workspaces, A and B, each with a key and a definition; B
// also has a queued item and a running execution. Negative tests aim A's
// key, no key, bad keys and the admin at them.
type world struct {
	*harness.Stack
	wsA, wsB     uuid.UUID
	keyA, keyB   client.CreatedAPIKey
	defA, defB   uuid.UUID
	queuedB      uuid.UUID // PENDING
	dispatchedB  uuid.UUID // DISPATCHED, its execution is execB
	execB        uuid.UUID
	revokedA     string // the secret of a revoked key of A
	finishedA    uuid.UUID
	spareKeyOfA  uuid.UUID
	definitionsB int
	// endpointB is B's webhook endpoint, deliveryB a delivery of it.
	endpointB, deliveryB uuid.UUID
	scheduleB            uuid.UUID // paused
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{Stack: harness.NewStack(t)}
	ctx := context.Background()
	admin := w.Client(t, harness.AdminToken)
	mkWorkspace := func(name string) (uuid.UUID, client.CreatedAPIKey) {
		cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: name, Plan: client.PRO})
		status(t, "createWorkspace", cw, err, http.StatusCreated)
		ck, err := admin.CreateAPIKeyWithResponse(ctx, cw.JSON201.ID, client.CreateAPIKeyRequest{Name: "key of " + name})
		status(t, "createAPIKey", ck, err, http.StatusCreated)
		return cw.JSON201.ID, *ck.JSON201
	}
	w.wsA, w.keyA = mkWorkspace("A")
	w.wsB, w.keyB = mkWorkspace("B")
	a, b := w.Client(t, w.keyA.Secret), w.Client(t, w.keyB.Secret)
	mkDefinition := func(c *client.ClientWithResponses, ws uuid.UUID) uuid.UUID {
		cd, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "greet", Graph: greetGraph()})
		status(t, "createDefinition", cd, err, http.StatusCreated)
		return cd.JSON201.ID
	}
	w.defA, w.defB = mkDefinition(a, w.wsA), mkDefinition(b, w.wsB)
	w.definitionsB = 1
	start := func(c *client.ClientWithResponses, ws, def uuid.UUID) uuid.UUID {
		st, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: def})
		status(t, "startExecution", st, err, http.StatusAccepted)
		return st.JSON202.QueueID
	}
	w.dispatchedB = start(b, w.wsB, w.defB)
	w.DispatchAll(t)
	gq, err := b.GetQueueItemWithResponse(ctx, w.dispatchedB)
	status(t, "getQueueItem", gq, err, http.StatusOK)
	w.execB = *gq.JSON200.ExecutionID
	w.queuedB = start(b, w.wsB, w.defB)
	w.finishedA = start(a, w.wsA, w.defA)
	sb, err := b.CreateScheduleWithResponse(ctx, client.CreateScheduleRequest{WorkspaceID: w.wsB, WorkflowDefinitionID: w.defB,
		Name: "B's", CronExpression: harness.Ptr("0 3 * * *"), Paused: harness.Ptr(true)})
	status(t, "createSchedule", sb, err, http.StatusCreated)
	w.scheduleB = sb.JSON201.ID
	cq, err := a.CancelQueueItemWithResponse(ctx, w.finishedA)
	status(t, "cancelQueueItem", cq, err, http.StatusAccepted)

	revoked, err := admin.CreateAPIKeyWithResponse(ctx, w.wsA, client.CreateAPIKeyRequest{Name: "revoked"})
	status(t, "createAPIKey", revoked, err, http.StatusCreated)
	rk, err := admin.RevokeAPIKeyWithResponse(ctx, w.wsA, revoked.JSON201.ID)
	status(t, "revokeAPIKey", rk, err, http.StatusNoContent)
	w.revokedA = revoked.JSON201.Secret
	spare, err := admin.CreateAPIKeyWithResponse(ctx, w.wsA, client.CreateAPIKeyRequest{Name: "spare"})
	status(t, "createAPIKey", spare, err, http.StatusCreated)
	w.spareKeyOfA = spare.JSON201.ID
	w.endpointB, w.deliveryB = webhookFixture(t, w.Stack, b, w.wsB, w.execB)
	so, err := b.SetOutboundLimitWithResponse(ctx, w.wsB, outboundHostOfB, client.SetOutboundLimitRequest{RequestsPerSecond: 5, Burst: 5})
	status(t, "setOutboundLimit", so, err, http.StatusOK)
	return w
}

// outboundHostOfB is the host workspace B keeps a limit for.
const outboundHostOfB = "api.b.example"

// op is one operation aimed at workspace B's resources with a valid request.
type op struct {
	name string
	call func(ctx context.Context, c client.ClientInterface) (*http.Response, error)
}

// opsOnB returns every operation under /api/v1, each aimed at B.
func (w *world) opsOnB() []op {
	return []op{
		{"createWorkspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateWorkspace(ctx, client.CreateWorkspaceRequest{Name: "intruder", Plan: client.FREE})
		}},
		{"listWorkspaces", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListWorkspaces(ctx, nil)
		}},
		{"getCaller", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetCaller(ctx)
		}},
		{"getWorkspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetWorkspace(ctx, w.wsB)
		}},
		{"updateWorkspacePlan", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdateWorkspacePlan(ctx, w.wsB, client.UpdateWorkspaceRequest{Plan: client.ENTERPRISE})
		}},
		{"createAPIKey", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateAPIKey(ctx, w.wsB, client.CreateAPIKeyRequest{Name: "intruder"})
		}},
		{"listApiKeys", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListAPIKeys(ctx, w.wsB)
		}},
		{"revokeAPIKey", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.RevokeAPIKey(ctx, w.wsB, w.keyB.ID)
		}},
		{"getWorkspaceLimits", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetWorkspaceLimits(ctx, w.wsB)
		}},
		{"setWorkspaceLimits", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimits(ctx, w.wsB, client.SetWorkspaceLimitsRequest{MaxRunning: harness.Ptr(1000)})
		}},
		{"listPlans", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListPlans(ctx)
		}},
		{"updatePlan", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePlan(ctx, client.PRO, client.UpdatePlanRequest{MaxRunning: harness.Ptr(1000)})
		}},
		{"getPool", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetPool(ctx)
		}},
		{"updatePool", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePool(ctx, client.UpdatePoolRequest{Capacity: harness.Ptr(1000)})
		}},
		{"getCapacity", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetCapacity(ctx, nil)
		}},
		{"createDefinition", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsB, Name: "intruder", Graph: greetGraph()})
		}},
		{"listDefinitions", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListDefinitions(ctx, &client.ListDefinitionsParams{WorkspaceID: w.wsB})
		}},
		{"getDefinition", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetDefinition(ctx, w.defB)
		}},
		{"deleteDefinition", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.DeleteDefinition(ctx, w.defB)
		}},
		{"createDefinitionVersion", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateDefinitionVersion(ctx, w.defB, client.CreateVersionRequest{Graph: twoStepGraph()})
		}},
		{"getDefinitionVersion", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetDefinitionVersion(ctx, w.defB, 1)
		}},
		{"startExecution", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsB, WorkflowDefinitionID: w.defB})
		}},
		{"enqueueExecutionBatch", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.EnqueueExecutionBatch(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: w.wsB, WorkflowDefinitionID: w.defB,
				Items: []client.EnqueueBatchItem{{}}})
		}},
		{"createSchedule", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateSchedule(ctx, client.CreateScheduleRequest{WorkspaceID: w.wsB, WorkflowDefinitionID: w.defB, Name: "intruder", IntervalSeconds: harness.Ptr(3600)})
		}},
		{"listSchedules", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListSchedules(ctx, &client.ListSchedulesParams{WorkspaceID: w.wsB})
		}},
		{"getSchedule", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetSchedule(ctx, w.scheduleB)
		}},
		{"updateSchedule", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdateSchedule(ctx, w.scheduleB, client.UpdateScheduleRequest{Name: harness.Ptr("taken")})
		}},
		{"pauseSchedule", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.PauseSchedule(ctx, w.scheduleB)
		}},
		{"resumeSchedule", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ResumeSchedule(ctx, w.scheduleB)
		}},
		{"deleteSchedule", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.DeleteSchedule(ctx, w.scheduleB)
		}},
		{"listQueue", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListQueue(ctx, &client.ListQueueParams{WorkspaceID: w.wsB})
		}},
		{"getQueueItem", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetQueueItem(ctx, w.queuedB)
		}},
		{"listExecutions", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListExecutions(ctx, &client.ListExecutionsParams{WorkspaceID: w.wsB})
		}},
		{"getExecution", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetExecution(ctx, w.execB)
		}},
		{"listExecutionNodes", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListExecutionNodes(ctx, w.execB, &client.ListExecutionNodesParams{})
		}},
		{"cancelExecution", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CancelExecution(ctx, w.execB)
		}},
		{"cancelQueueItem", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CancelQueueItem(ctx, w.queuedB)
		}},
		{"cancelQueueItem (dispatched)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CancelQueueItem(ctx, w.dispatchedB)
		}},
		{"createWebhookEndpoint", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateWebhookEndpoint(ctx, client.CreateWebhookEndpointRequest{
				WorkspaceID: w.wsB, URL: harness.PublicHookURL, Events: []client.WebhookEvent{client.ExecutionCompleted},
			})
		}},
		{"listWebhookEndpoints", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListWebhookEndpoints(ctx, &client.ListWebhookEndpointsParams{WorkspaceID: w.wsB})
		}},
		{"getWebhookEndpoint", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetWebhookEndpoint(ctx, w.endpointB)
		}},
		{"listWebhookDeliveries", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListWebhookDeliveries(ctx, w.endpointB, nil)
		}},
		{"resendWebhookDelivery", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ResendWebhookDelivery(ctx, w.deliveryB)
		}},
		{"deleteWebhookEndpoint", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.DeleteWebhookEndpoint(ctx, w.endpointB)
		}},
		{"streamExecutionEvents", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.StreamExecutionEvents(ctx, w.execB, nil)
		}},
		{"streamWorkspaceEvents", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.StreamWorkspaceEvents(ctx, w.wsB, nil)
		}},
		{"retryExecution", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.RetryExecution(ctx, w.execB)
		}},
		{"requeueQueueItem", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.RequeueQueueItem(ctx, w.queuedB)
		}},
		{"listOutboundLimits", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListOutboundLimits(ctx, w.wsB)
		}},
		{"setOutboundLimit", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetOutboundLimit(ctx, w.wsB, outboundHostOfB, client.SetOutboundLimitRequest{RequestsPerSecond: 1000, Burst: 1000})
		}},
		{"setOutboundLimit (new host)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetOutboundLimit(ctx, w.wsB, "intruder.example", client.SetOutboundLimitRequest{RequestsPerSecond: 1, Burst: 1})
		}},
		{"deleteOutboundLimit", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.DeleteOutboundLimit(ctx, w.wsB, outboundHostOfB)
		}},
		{"listOutboundPauses", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListOutboundPauses(ctx, w.wsB)
		}},
		{"listAllowedWorkflows", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListAllowedWorkflows(ctx, w.wsB)
		}},
		{"putAllowedWorkflow", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.PutAllowedWorkflow(ctx, w.wsB, client.AllowedWorkflow{TaskQueue: "intruder-queue"})
		}},
		{"deleteAllowedWorkflow", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.DeleteAllowedWorkflow(ctx, w.wsB, &client.DeleteAllowedWorkflowParams{TaskQueue: "intruder-queue"})
		}},
		{"sendEvent", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SendEvent(ctx, w.execB, client.EventToSend{Name: "approval"})
		}},
	}
}

// checkBUntouched fails unless B's resources are as newWorld left them.
func (w *world) checkBUntouched(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var plan, queued, exec string
	var defs, versions, keys, revoked, workspaces int
	err := w.Pool.QueryRow(ctx, `SELECT
		(SELECT plan FROM workspaces WHERE id = $1),
		(SELECT status FROM workflow_execution_queue WHERE id = $2),
		(SELECT status FROM workflow_executions WHERE id = $3),
		(SELECT count(*) FROM workflow_definitions WHERE workspace_id = $1 AND deleted_at IS NULL),
		(SELECT count(*) FROM workflow_definition_versions WHERE workflow_definition_id = $4),
		(SELECT count(*) FROM api_keys WHERE workspace_id = $1),
		(SELECT count(*) FROM api_keys WHERE workspace_id = $1 AND revoked_at IS NOT NULL),
		(SELECT count(*) FROM workspaces)`,
		w.wsB, w.queuedB, w.execB, w.defB).Scan(&plan, &queued, &exec, &defs, &versions, &keys, &revoked, &workspaces)
	if err != nil {
		t.Fatal(err)
	}
	if plan != "PRO" || queued != "PENDING" || exec != "RUNNING" || defs != w.definitionsB || versions != 1 || keys != 1 || revoked != 0 || workspaces != 2 {
		t.Errorf("workspace B changed: plan %s, queued item %s, execution %s, %d definitions, %d versions, %d keys (%d revoked), %d workspaces",
			plan, queued, exec, defs, versions, keys, revoked, workspaces)
	}
	var schedules int
	var schedName string
	var schedPaused bool
	if err := w.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM schedules WHERE workspace_id = $1),
		(SELECT name FROM schedules WHERE id = $2), (SELECT paused_at IS NOT NULL FROM schedules WHERE id = $2)`, w.wsB, w.scheduleB).
		Scan(&schedules, &schedName, &schedPaused); err != nil {
		t.Fatal(err)
	}
	if schedules != 1 || schedName != "B's" || !schedPaused {
		t.Errorf("workspace B's schedules changed: %d, %q, paused %v", schedules, schedName, schedPaused)
	}
	var queueRows int
	if err := w.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1", w.wsB).Scan(&queueRows); err != nil {
		t.Fatal(err)
	}
	if queueRows != 2 {
		t.Errorf("workspace B has %d queue rows, want 2", queueRows)
	}
	var endpoints int
	var delivery string
	if err := w.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_endpoints WHERE workspace_id = $1 AND deleted_at IS NULL),
		(SELECT status || ':' || attempts || ':' || next_attempt_at::text FROM webhook_deliveries WHERE id = $2)`,
		w.wsB, w.deliveryB).Scan(&endpoints, &delivery); err != nil {
		t.Fatal(err)
	}
	if endpoints != 1 || !strings.HasPrefix(delivery, "FAILED:3:") {
		t.Errorf("workspace B's webhooks changed: %d endpoints, delivery %s", endpoints, delivery)
	}
	var limits int
	var rate float64
	if err := w.Pool.QueryRow(ctx, `SELECT count(*), coalesce(max(rate_per_second) FILTER (WHERE host = $2), 0) FROM workspace_outbound_limits WHERE workspace_id = $1`,
		w.wsB, outboundHostOfB).Scan(&limits, &rate); err != nil {
		t.Fatal(err)
	}
	if limits != 1 || rate != 5 {
		t.Errorf("workspace B has %d outbound limits (%s at %g/s), want its one at 5/s", limits, outboundHostOfB, rate)
	}
}

// TestNegativeOutboundLimits: a workspace's own key setting limits out of
// range, or for a host name that is none, gets 422 naming the field, and
// nothing is stored. (The bound on hosts per workspace is
// TestOutboundLimitsPerWorkspaceAreBounded, in the store's tests.)
func TestNegativeOutboundLimits(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	for _, tc := range []struct {
		name, host string
		rate       float64
		burst      int
		field      string
	}{
		{"rate zero", "api.example.com", 0, 1, "/requestsPerSecond"},
		{"rate negative", "api.example.com", -3, 1, "/requestsPerSecond"},
		{"rate over the maximum", "api.example.com", 1e6, 1, "/requestsPerSecond"},
		{"rate below the minimum", "api.example.com", 1e-9, 1, "/requestsPerSecond"},
		{"burst zero", "api.example.com", 1, 0, "/burst"},
		{"burst over the maximum", "api.example.com", 1, 1_000_001, "/burst"},
		{"host too long", strings.Repeat("a.", 127) + "com", 1, 1, "/path/host"},
		{"label too long", strings.Repeat("x", 64) + ".example", 1, 1, "/path/host"},
		{"host with a port", "api.example.com:443", 1, 1, "/path/host"},
		{"host with a bad character", "api*.example.com", 1, 1, "/path/host"},
		{"ambiguous IPv4", "0x7f000001", 1, 1, "/path/host"},
		{"empty label", "api..example.com", 1, 1, "/path/host"},
	} {
		got := read(a.SetOutboundLimit(ctx, w.wsA, tc.host, client.SetOutboundLimitRequest{RequestsPerSecond: tc.rate, Burst: tc.burst}))
		got.Expect(t, "setOutboundLimit with "+tc.name, http.StatusUnprocessableEntity, "invalid-field")
		if !slices.Equal(got.FieldPaths(), []string{tc.field}) {
			t.Errorf("setOutboundLimit with %s: field paths %v, want [%s]", tc.name, got.FieldPaths(), tc.field)
		}
	}
	read(a.DeleteOutboundLimit(ctx, w.wsA, "bad*host")).Expect(t, "deleteOutboundLimit of a bad host", http.StatusUnprocessableEntity, "invalid-field")
	read(a.DeleteOutboundLimit(ctx, w.wsA, "never.set.example")).Expect(t, "deleteOutboundLimit of a host without one", http.StatusNotFound, "not-found")
	read(a.ListOutboundLimits(ctx, uuid.New())).Expect(t, "listOutboundLimits of no workspace", http.StatusNotFound, "not-found")
	read(a.ListOutboundPauses(ctx, uuid.New())).Expect(t, "listOutboundPauses of no workspace", http.StatusNotFound, "not-found")
	var stored int
	if err := w.Pool.QueryRow(ctx, "SELECT count(*) FROM workspace_outbound_limits WHERE workspace_id = $1", w.wsA).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("refused limits stored %d rows for A", stored)
	}
	w.checkBUntouched(t)
}

// TestNegativeUnauthenticated: every operation under /api/v1 refuses a
// request without a valid bearer token with a 401, and changes nothing.
func TestNegativeUnauthenticated(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	credentials := map[string]client.RequestEditorFn{
		"no token":     func(context.Context, *http.Request) error { return nil },
		"empty bearer": func(_ context.Context, r *http.Request) error { r.Header.Set("Authorization", "Bearer "); return nil },
		"basic auth": func(_ context.Context, r *http.Request) error {
			r.SetBasicAuth("admin", harness.AdminToken)
			return nil
		},
		"admin token typo":           harness.Bearer(harness.AdminToken + "x"),
		"unknown token":              harness.Bearer("not-a-sluice-token"),
		"unknown slk key":            harness.Bearer("slk_" + strings.Repeat("a", 32)),
		"slk key of the wrong shape": harness.Bearer("slk_" + strings.Repeat("A", 32)),
		"revoked key":                harness.Bearer(w.revokedA),
		"lower-case bearer": func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "bearer nope")
			return nil
		},
	}
	for name, cred := range credentials {
		c := w.ClientWith(t, cred)
		for _, o := range w.opsOnB() {
			a := read(o.call(ctx, c))
			a.Expect(t, o.name+" with "+name, http.StatusUnauthorized, "unauthorized")
		}
	}
	anon := w.Client(t, "")
	// The revoked key says so.
	a := read(anon.GetWorkspace(ctx, w.wsA, harness.Bearer(w.revokedA)))
	if !strings.Contains(a.Problem.Detail, "revoked") {
		t.Errorf("a revoked key's 401 says %q", a.Problem.Detail)
	}
	// Every operation under /api/v1 was among those refused.
	seen := w.Contract.Statuses()
	for _, op := range w.Contract.Ops {
		if op == "getHealthz" || op == "getReadyz" {
			continue
		}
		if !slices.Contains(seen[op], http.StatusUnauthorized) {
			t.Errorf("operation %s was never tried without a valid token", op)
		}
	}
	w.checkBUntouched(t)
	// The health endpoints need no token.
	hz, err := anon.GetHealthzWithResponse(ctx)
	status(t, "getHealthz", hz, err, http.StatusOK)
}

// TestNegativeOtherWorkspace: a key of workspace A gets 403 on everything
// of workspace B (its workspace, keys, definition, version, queue item,
// execution, lists and cancel) and on the admin-only operations, and B is
// left exactly as it was: no tenant reads or changes another's work.
func TestNegativeOtherWorkspace(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	for _, o := range w.opsOnB() {
		if o.name == "listWorkspaces" || o.name == "getCaller" {
			continue // they answer for the caller's own; checked below
		}
		read(o.call(ctx, a)).Expect(t, o.name+" on B with A's key", http.StatusForbidden, "forbidden")
	}

	// Starting B's definition inside A is refused too: the definition
	// belongs to another workspace.
	read(a.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defB})).
		Expect(t, "startExecution of B's definition in A", http.StatusForbidden, "forbidden")
	read(a.EnqueueExecutionBatch(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defB, Items: []client.EnqueueBatchItem{{}}})).
		Expect(t, "enqueueExecutionBatch of B's definition in A", http.StatusForbidden, "forbidden")
	read(a.CreateSchedule(ctx, client.CreateScheduleRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defB, Name: "theirs", IntervalSeconds: harness.Ptr(3600)})).
		Expect(t, "createSchedule of B's definition in A", http.StatusForbidden, "forbidden")

	// The admin-only operations refuse a key even on its own workspace.
	adminOnly := []op{
		{"updateWorkspacePlan", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdateWorkspacePlan(ctx, w.wsA, client.UpdateWorkspaceRequest{Plan: client.ENTERPRISE})
		}},
		{"createAPIKey", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateAPIKey(ctx, w.wsA, client.CreateAPIKeyRequest{Name: "self-made"})
		}},
		{"revokeAPIKey", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.RevokeAPIKey(ctx, w.wsA, w.spareKeyOfA)
		}},
		{"listAllowedWorkflows", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListAllowedWorkflows(ctx, w.wsA)
		}},
		{"putAllowedWorkflow", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.PutAllowedWorkflow(ctx, w.wsA, client.AllowedWorkflow{TaskQueue: "self-allowed"})
		}},
		{"deleteAllowedWorkflow", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.DeleteAllowedWorkflow(ctx, w.wsA, &client.DeleteAllowedWorkflowParams{TaskQueue: "self-allowed"})
		}},
	}
	for _, o := range adminOnly {
		read(o.call(ctx, a)).Expect(t, o.name+" on A with A's key", http.StatusForbidden, "forbidden")
	}
	var plan string
	var keys, revoked int
	if err := w.Pool.QueryRow(ctx, `SELECT (SELECT plan FROM workspaces WHERE id = $1),
		(SELECT count(*) FROM api_keys WHERE workspace_id = $1), (SELECT count(*) FROM api_keys WHERE workspace_id = $1 AND revoked_at IS NOT NULL)`,
		w.wsA).Scan(&plan, &keys, &revoked); err != nil {
		t.Fatal(err)
	}
	if plan != "PRO" || keys != 3 || revoked != 1 {
		t.Errorf("admin-only calls with a key changed A: plan %s, %d keys, %d revoked", plan, keys, revoked)
	}

	// Asking who calls with A's key names A, never B.
	me, err := a.GetCallerWithResponse(ctx)
	status(t, "getCaller", me, err, http.StatusOK)
	if c := me.JSON200; c.Admin || c.Workspace == nil || c.Workspace.ID != w.wsA || c.KeyID == nil || *c.KeyID != w.keyA.ID {
		t.Errorf("getCaller with A's key: %s", me.Body)
	}

	// Listing workspaces with a key shows its own only, and pages end.
	lw, err := a.ListWorkspacesWithResponse(ctx, nil)
	status(t, "listWorkspaces", lw, err, http.StatusOK)
	if len(lw.JSON200.Items) != 1 || lw.JSON200.Items[0].ID != w.wsA {
		t.Errorf("listWorkspaces with A's key: %s", lw.Body)
	}
	lw, err = a.ListWorkspacesWithResponse(ctx, &client.ListWorkspacesParams{Limit: harness.Ptr(1)})
	status(t, "listWorkspaces", lw, err, http.StatusOK)
	if lw.JSON200.NextCursor != nil {
		next, err := a.ListWorkspacesWithResponse(ctx, &client.ListWorkspacesParams{Limit: harness.Ptr(1), Cursor: lw.JSON200.NextCursor})
		status(t, "listWorkspaces", next, err, http.StatusOK)
		if len(next.JSON200.Items) != 0 {
			t.Errorf("listWorkspaces with A's key, second page: %s", next.Body)
		}
	}
	w.checkBUntouched(t)
}

// TestNegativeNotFound: ids that name nothing get 404, for the admin and,
// where the id says nothing about a workspace, for a workspace key.
func TestNegativeNotFound(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	missing := uuid.New()
	cases := []op{
		{"getWorkspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetWorkspace(ctx, missing)
		}},
		{"updateWorkspacePlan", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdateWorkspacePlan(ctx, missing, client.UpdateWorkspaceRequest{Plan: client.FREE})
		}},
		{"createAPIKey", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateAPIKey(ctx, missing, client.CreateAPIKeyRequest{Name: "k"})
		}},
		{"listApiKeys", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListAPIKeys(ctx, missing)
		}},
		{"revokeAPIKey (missing workspace)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.RevokeAPIKey(ctx, missing, w.keyA.ID)
		}},
		{"revokeAPIKey (missing key)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.RevokeAPIKey(ctx, w.wsA, missing)
		}},
		{"revokeAPIKey (B's key under A)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.RevokeAPIKey(ctx, w.wsA, w.keyB.ID)
		}},
		{"createDefinition", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: missing, Name: "d", Graph: greetGraph()})
		}},
		{"listDefinitions", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListDefinitions(ctx, &client.ListDefinitionsParams{WorkspaceID: missing})
		}},
		{"getDefinition", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetDefinition(ctx, missing)
		}},
		{"deleteDefinition", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.DeleteDefinition(ctx, missing)
		}},
		{"createDefinitionVersion", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CreateDefinitionVersion(ctx, missing, client.CreateVersionRequest{Graph: greetGraph()})
		}},
		{"getDefinitionVersion (missing definition)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetDefinitionVersion(ctx, missing, 1)
		}},
		{"getDefinitionVersion (missing version)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetDefinitionVersion(ctx, w.defA, 2)
		}},
		{"getDefinitionVersion (beyond int32)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetDefinitionVersion(ctx, w.defA, 1<<40)
		}},
		{"getDefinitionVersion (1 modulo 2^32)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetDefinitionVersion(ctx, w.defA, 1<<32+1)
		}},
		{"startExecution (missing definition)", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: missing})
		}},
		{"listQueue", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListQueue(ctx, &client.ListQueueParams{WorkspaceID: missing})
		}},
		{"getQueueItem", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetQueueItem(ctx, missing)
		}},
		{"listExecutions", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListExecutions(ctx, &client.ListExecutionsParams{WorkspaceID: missing})
		}},
		{"getExecution", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetExecution(ctx, missing)
		}},
		{"listExecutionNodes", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListExecutionNodes(ctx, missing, &client.ListExecutionNodesParams{})
		}},
		{"cancelExecution", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CancelExecution(ctx, missing)
		}},
		{"cancelQueueItem", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.CancelQueueItem(ctx, missing)
		}},
	}
	admin := w.Client(t, harness.AdminToken)
	for _, o := range cases {
		read(o.call(ctx, admin)).Expect(t, o.name+" (admin)", http.StatusNotFound, "not-found")
	}
	// A key gets 404 for ids that belong to no workspace.
	a := w.Client(t, w.keyA.Secret)
	for _, o := range cases {
		switch o.name {
		case "getDefinition", "deleteDefinition", "createDefinitionVersion", "getDefinitionVersion (missing definition)",
			"getDefinitionVersion (missing version)", "getDefinitionVersion (beyond int32)", "getDefinitionVersion (1 modulo 2^32)",
			"startExecution (missing definition)",
			"getQueueItem", "getExecution", "cancelExecution":
			read(o.call(ctx, a)).Expect(t, o.name+" (A's key)", http.StatusNotFound, "not-found")
		}
	}

	// A deleted definition is gone for every operation on it.
	dd, err := a.DeleteDefinitionWithResponse(ctx, w.defA)
	status(t, "deleteDefinition", dd, err, http.StatusNoContent)
	for name, call := range map[string]func() (*http.Response, error){
		"getDefinition":        func() (*http.Response, error) { return a.GetDefinition(ctx, w.defA) },
		"deleteDefinition":     func() (*http.Response, error) { return a.DeleteDefinition(ctx, w.defA) },
		"getDefinitionVersion": func() (*http.Response, error) { return a.GetDefinitionVersion(ctx, w.defA, 1) },
		"createDefinitionVersion": func() (*http.Response, error) {
			return a.CreateDefinitionVersion(ctx, w.defA, client.CreateVersionRequest{Graph: greetGraph()})
		},
		"startExecution": func() (*http.Response, error) {
			return a.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA})
		},
	} {
		read(call()).Expect(t, name+" of a deleted definition", http.StatusNotFound, "not-found")
	}

	// Routes outside the spec answer a problem too.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+"/api/v1/nothing-here", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+harness.AdminToken)
	got := read(http.DefaultClient.Do(req))
	if got.Status != http.StatusNotFound || got.Problem.Type != harness.ProblemBase+"not-found" {
		t.Errorf("unknown route: %d %s", got.Status, got.Body)
	}
}

// TestNegativeConflictOnFinished: cancelling what has already ended is a 409.
func TestNegativeConflictOnFinished(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	read(a.CancelQueueItem(context.Background(), w.finishedA)).
		Expect(t, "cancelling a CANCELLED queue item", http.StatusConflict, "already-finished")
}

// TestNegativeExecutionFiltersStayInTheWorkspace: another workspace's
// definition or queue item, as a filter, matches none of the listed
// workspace's executions and shows none of its own; a filter that is no
// uuid is a 400 naming it.
func TestNegativeExecutionFiltersStayInTheWorkspace(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	read := harness.Reader(t)
	ctx := context.Background()
	admin := w.Client(t, harness.AdminToken)
	for name, p := range map[string]client.ListExecutionsParams{
		"B's definition": {WorkspaceID: w.wsA, WorkflowDefinitionID: &w.defB},
		"B's queue item": {WorkspaceID: w.wsA, QueueID: &w.dispatchedB},
	} {
		var page client.ExecutionPage
		got := read(admin.ListExecutions(ctx, &p))
		if err := json.Unmarshal(got.Body, &page); err != nil || got.Status != http.StatusOK || len(page.Items) != 0 {
			t.Errorf("listExecutions of A by %s: %d %s", name, got.Status, got.Body)
		}
	}
	got := read(admin.ListExecutions(ctx, &client.ListExecutionsParams{WorkspaceID: w.wsB, QueueID: &w.dispatchedB}))
	var page client.ExecutionPage
	if err := json.Unmarshal(got.Body, &page); err != nil || len(page.Items) != 1 || page.Items[0].ID != w.execB {
		t.Errorf("listExecutions of B by its own queue item: %d %s", got.Status, got.Body)
	}
	for _, param := range []string{"workflowDefinitionId", "queueId"} {
		got := read(admin.ListExecutions(ctx, &client.ListExecutionsParams{WorkspaceID: w.wsA}, func(_ context.Context, r *http.Request) error {
			q := r.URL.Query()
			q.Set(param, "not-a-uuid")
			r.URL.RawQuery = q.Encode()
			return nil
		}))
		got.Expect(t, "listExecutions with "+param+"=not-a-uuid", http.StatusBadRequest, "invalid-request")
		if !slices.Equal(got.FieldPaths(), []string{"/query/" + param}) {
			t.Errorf("listExecutions with a bad %s: field paths %v", param, got.FieldPaths())
		}
	}
}

// TestReadyzIsAProblemWhenPostgresIsDown: readiness answers 503 with a
// problem naming the failed dependency, as the spec documents, and not its
// error text, which would tell an unauthenticated caller about the database.
func TestReadyzIsAProblemWhenPostgresIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := postgres.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	store := postgres.NewStore(pool, harness.TestLog())
	handler, err := httpapi.NewHandler(usecases.NewApplication(usecases.Stores{Workspaces: store, Plans: store, APIKeys: store, Definitions: store, Queue: store, Executions: store, Schedules: store, Timetables: crontab.NewParser()}, nil, domain.DefaultProcessQuotas(), domain.DefaultTemplateBudget, usecases.AuthConfig{AdminToken: harness.AdminToken}), httpapi.DefaultRequestLimits(), prometheus.NewRegistry(),
		[]httpapi.ReadinessCheck{{Name: "postgres", Check: store.CheckHealth}}, harness.TestLog())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	s := &harness.Stack{URL: srv.URL, Contract: harness.NewContract(t)}
	rz, err := s.Client(t, "").GetReadyzWithResponse(ctx)
	status(t, "getReadyz", rz, err, http.StatusServiceUnavailable)
	if p := rz.ApplicationProblemJSON503; p == nil || p.Type != harness.ProblemBase+"not-ready" || p.Detail == nil ||
		*p.Detail != "not ready: postgres failing (details in the log)" {
		t.Errorf("readyz with Postgres down: %s", rz.Body)
	}
	hz, err := s.Client(t, "").GetHealthzWithResponse(ctx)
	status(t, "getHealthz", hz, err, http.StatusOK)
}

// TestNegativeWhatAWorkspaceKeepsAndSends: each way a workspace could
// grow what it keeps, or take more than its share of the API, by repeating
// requests that are each allowed, meets a 429 naming the bound (with
// Retry-After where waiting helps), and unauthenticated probes cost the
// database nothing per call.
func TestNegativeWhatAWorkspaceKeepsAndSends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	small := domain.DefaultProcessQuotas()
	small.NodesPerGraph = 10
	smallPlan := domain.QuotaOverrides{StoredItems: harness.Ptr(3), Definitions: harness.Ptr(2), DefinitionVersions: harness.Ptr(3), StoredExecutions: harness.Ptr(2)}
	for _, row := range []struct {
		name   string
		limits func(*httpapi.RequestLimits)
		// loop repeats an allowed request and returns the first answer
		// that is not a success.
		loop       func(t *testing.T, ws uuid.UUID, c *client.ClientWithResponses) *http.Response
		retryAfter bool
	}{
		{name: "enqueue and cancel in a loop (cancelled items stay stored)", retryAfter: true,
			loop: func(t *testing.T, ws uuid.UUID, c *client.ClientWithResponses) *http.Response {
				d, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "d", Graph: oneNodeGraph})
				status(t, "createDefinition", d, err, http.StatusCreated)
				for {
					r, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: d.JSON201.ID})
					if err != nil || r.StatusCode() != http.StatusAccepted {
						return r.HTTPResponse
					}
					cq, err := c.CancelQueueItemWithResponse(ctx, r.JSON202.QueueID)
					status(t, "cancelQueueItem", cq, err, http.StatusAccepted)
				}
			}},
		{name: "enqueue in a loop (each item is an execution to store)", retryAfter: true,
			loop: func(t *testing.T, ws uuid.UUID, c *client.ClientWithResponses) *http.Response {
				d, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "d", Graph: oneNodeGraph})
				status(t, "createDefinition", d, err, http.StatusCreated)
				for {
					r, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: d.JSON201.ID})
					if err != nil || r.StatusCode() != http.StatusAccepted {
						if r != nil && !strings.Contains(string(r.Body), "stored executions") {
							t.Errorf("the refusal does not name the stored-executions quota: %s", r.Body)
						}
						return r.HTTPResponse
					}
				}
			}},
		{name: "delete and recreate definitions (deleted ones stay stored)",
			loop: func(t *testing.T, ws uuid.UUID, c *client.ClientWithResponses) *http.Response {
				for {
					d, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "d", Graph: oneNodeGraph})
					if err != nil || d.StatusCode() != http.StatusCreated {
						return d.HTTPResponse
					}
					del, err := c.DeleteDefinitionWithResponse(ctx, d.JSON201.ID)
					status(t, "deleteDefinition", del, err, http.StatusNoContent)
				}
			}},
		{name: "save versions in a loop",
			loop: func(t *testing.T, ws uuid.UUID, c *client.ClientWithResponses) *http.Response {
				d, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "d", Graph: oneNodeGraph})
				status(t, "createDefinition", d, err, http.StatusCreated)
				for {
					v, err := c.CreateDefinitionVersionWithResponse(ctx, d.JSON201.ID, client.CreateVersionRequest{Graph: oneNodeGraph})
					if err != nil || v.StatusCode() != http.StatusCreated {
						return v.HTTPResponse
					}
				}
			}},
		{name: "requests faster than the workspace's rate", retryAfter: true,
			limits: func(l *httpapi.RequestLimits) { l.Tenancy.Rate, l.Tenancy.Burst = 1, 3 },
			loop: func(t *testing.T, ws uuid.UUID, c *client.ClientWithResponses) *http.Response {
				for {
					r, err := c.GetWorkspaceWithResponse(ctx, ws)
					if err != nil || r.StatusCode() != http.StatusOK {
						return r.HTTPResponse
					}
				}
			}},
	} {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			limits := httpapi.DefaultRequestLimits()
			if row.limits != nil {
				row.limits(&limits)
			}
			s := harness.NewStackWith(t, small, limits)
			s.SetPlanQuotas(t, domain.PlanFree, smallPlan)
			ws, c := quotaWorkspace(t, s, client.FREE)
			resp := row.loop(t, ws, c)
			if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("the loop ended with %v, want 429", resp)
			}
			if got := resp.Header.Get("Retry-After") != ""; got != row.retryAfter {
				t.Errorf("Retry-After %q, want one: %v", resp.Header.Get("Retry-After"), row.retryAfter)
			}
		})
	}

	t.Run("unauthenticated readiness probes", func(t *testing.T) {
		t.Parallel()
		s := harness.NewStack(t)
		before := s.Pool.Stat().AcquireCount()
		for range 200 {
			resp, err := http.Get(s.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if n := s.Pool.Stat().AcquireCount() - before; n > 10 {
			t.Errorf("200 calls of /readyz took %d database connections, want a handful (one check a second)", n)
		}
	})
}

// TestNegativePoliciesPastThePlansCaps: on a PRO workspace (10 attempts,
// 30 min per attempt, a 7-day run deadline by default), a node's retry
// attempts, its timeout and the graph's runTimeout past the caps are one
// 422 naming each field, on create and on a new version, and nothing is
// written; the same policies at the caps are accepted.
func TestNegativePoliciesPastThePlansCaps(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	over := client.Graph(`{"runTimeout":"169h","nodes":[
		{"key":"a","type":"TRANSFORM","config":{"output":1}},
		{"key":"b","type":"HTTP_REQUEST","config":{"url":"https://example.com"},"retry":{"maxAttempts":11,"finalStatuses":[404]},"timeout":"31m"}
	],"edges":[]}`)
	want := []string{"/graph/nodes/1/retry/maxAttempts", "/graph/nodes/1/timeout", "/graph/runTimeout"}
	before := counts(t, w)
	for name, call := range map[string]func() (*http.Response, error){
		"createDefinition": func() (*http.Response, error) {
			return a.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "greedy", Graph: over})
		},
		"createDefinitionVersion": func() (*http.Response, error) {
			return a.CreateDefinitionVersion(ctx, w.defA, client.CreateVersionRequest{Graph: over})
		},
	} {
		got := read(call())
		got.Expect(t, name, http.StatusUnprocessableEntity, "invalid-graph")
		if paths := got.FieldPaths(); !slices.Equal(slices.Sorted(slices.Values(paths)), want) {
			t.Errorf("%s: problems at %v, want %v; body: %s", name, paths, want, got.Body)
		}
	}
	if after := counts(t, w); after != before {
		t.Errorf("refused policies wrote rows: %+v, then %+v", before, after)
	}
	// An enqueue's own run deadline: past the cap a 422 naming it, not a
	// duration a 400 naming it.
	read(a.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA, RunTimeout: harness.Ptr("169h")})).
		Expect(t, "enqueue with a run deadline past the cap", http.StatusUnprocessableEntity, "policy-cap")
	bad := read(a.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA, RunTimeout: harness.Ptr("soon")}))
	bad.Expect(t, "enqueue with a run deadline that is no duration", http.StatusBadRequest, "invalid-request")
	if paths := bad.FieldPaths(); !slices.Equal(paths, []string{"/runTimeout"}) {
		t.Errorf("the bad run deadline is reported at %v", paths)
	}
	if after := counts(t, w); after != before {
		t.Errorf("refused enqueues wrote rows: %+v, then %+v", before, after)
	}
	atCaps := client.Graph(`{"runTimeout":"168h","nodes":[
		{"key":"b","type":"HTTP_REQUEST","config":{"url":"https://example.com"},"retry":{"maxAttempts":10},"timeout":"30m"}]}`)
	cd, err := a.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "at caps", Graph: atCaps})
	status(t, "createDefinition at the caps", cd, err, http.StatusCreated)
}

// TestNegativeRetryAndRequeueOnlyWhatFailed: retrying a RUNNING execution
// and requeueing a PENDING or DISPATCHED item are 409s naming the status,
// from the workspace's own key, and enqueue nothing; ids that name nothing
// are 404s. (Another workspace's execution or item is a 403 in
// TestNegativeOtherWorkspace, which checks B untouched.)
func TestNegativeRetryAndRequeueOnlyWhatFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	b := w.Client(t, w.keyB.Secret)
	read(b.RetryExecution(ctx, w.execB)).Expect(t, "retrying a RUNNING execution", http.StatusConflict, "not-retryable")
	read(b.RequeueQueueItem(ctx, w.queuedB)).Expect(t, "requeueing a PENDING item", http.StatusConflict, "not-retryable")
	read(b.RequeueQueueItem(ctx, w.dispatchedB)).Expect(t, "requeueing a DISPATCHED item", http.StatusConflict, "not-retryable")
	read(b.RetryExecution(ctx, uuid.New())).Expect(t, "retrying a missing execution", http.StatusNotFound, "not-found")
	read(b.RequeueQueueItem(ctx, uuid.New())).Expect(t, "requeueing a missing item", http.StatusNotFound, "not-found")
	w.checkBUntouched(t)
}

// TestNegativePlansAndLimits: a workspace key can neither read nor edit
// the plans, nor set any workspace's limits (its own included: a tenant
// cannot raise its own capacity or quotas), nor read another workspace's;
// every such call is a 403 and nothing changes. The admin's limits and
// quotas out of range are refused naming the field (each quota, below
// and above its bounds, on both operations), and change nothing either.
func TestNegativePlansAndLimits(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	admin := w.Client(t, harness.AdminToken)
	fifty := 50
	forbidden := []op{
		{"listPlans", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.ListPlans(ctx)
		}},
		{"updatePlan", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePlan(ctx, client.PRO, client.UpdatePlanRequest{MaxRunning: &fifty})
		}},
		{"setWorkspaceLimits on its own workspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimits(ctx, w.wsA, client.SetWorkspaceLimitsRequest{MaxRunning: &fifty})
		}},
		{"setWorkspaceLimits on another workspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimits(ctx, w.wsB, client.SetWorkspaceLimitsRequest{MaxRunning: &fifty})
		}},
		{"updatePlan's quotas", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePlan(ctx, client.FREE, client.UpdatePlanRequest{PendingItems: harness.Ptr(1_000_000), NodesInFlight: harness.Ptr(1000)})
		}},
		{"setWorkspaceLimits' quotas on its own workspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimits(ctx, w.wsA, client.SetWorkspaceLimitsRequest{PendingItems: harness.Ptr(1_000_000), ForEachItems: harness.Ptr(100_000)})
		}},
		{"setWorkspaceLimits' quotas on another workspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimits(ctx, w.wsB, client.SetWorkspaceLimitsRequest{Schedules: harness.Ptr(1)})
		}},
		{"getWorkspaceLimits of another workspace", func(ctx context.Context, c client.ClientInterface) (*http.Response, error) {
			return c.GetWorkspaceLimits(ctx, w.wsB)
		}},
	}
	successes := 0
	for _, o := range forbidden {
		got := read(o.call(ctx, a))
		if got.Status < 300 {
			successes++
		}
		got.Expect(t, o.name+" with A's key", http.StatusForbidden, "forbidden")
	}
	if successes != 0 {
		t.Errorf("%d of %d calls with a workspace key succeeded", successes, len(forbidden))
	}
	if own := read(a.GetWorkspaceLimits(ctx, w.wsA)); own.Status != http.StatusOK {
		t.Errorf("getWorkspaceLimits of its own workspace with its key: %d %s", own.Status, own.Body)
	}

	var plansBefore string
	if err := w.Pool.QueryRow(ctx, `SELECT string_agg(p::text, ';' ORDER BY name) FROM plans p`).Scan(&plansBefore); err != nil {
		t.Fatal(err)
	}
	type badBody struct{ field, body string }
	bodies := map[string]badBody{
		"zero":           {"/maxRunning", `{"maxRunning": 0}`},
		"negative":       {"/maxRunning", `{"maxRunning": -1}`},
		"over 100,000":   {"/maxRunning", `{"maxRunning": 100001}`},
		"not an integer": {"/maxRunning", `{"maxRunning": 2.5}`},
		"a string":       {"/maxRunning", `{"maxRunning": "5"}`},
	}
	// Every quota with its documented range (README, Every per-plan limit).
	for _, b := range []struct {
		Name     string
		Min, Max int
	}{
		{"pendingItems", 1, 10_000_000}, {"storedItems", 1, 10_000_000}, {"definitions", 1, 1_000_000},
		{"definitionVersions", 1, 10_000_000}, {"schedules", 1, 100_000}, {"scheduleMinIntervalSeconds", 1, 86_400},
		{"nodeAttempts", 1, 100}, {"nodeTimeoutSeconds", 1, 604_800}, {"runTimeoutSeconds", 1, 31_536_000},
		{"nodesInFlight", 1, 1_000}, {"workspaceNodesInFlight", 1, 10_000}, {"forEachItems", 1, 100_000},
		{"webhookEndpoints", 1, 1_000}, {"outboundHosts", 1, 10_000}, {"subWorkflowNodes", 1, 1_000_000},
		{"storedExecutions", 1, 100_000_000}, {"retryAfterRounds", 1, 1_000},
	} {
		bodies[b.Name+" below its minimum"] = badBody{"/" + b.Name, fmt.Sprintf(`{"maxRunning": null, %q: %d}`, b.Name, b.Min-1)}
		bodies[b.Name+" above its maximum"] = badBody{"/" + b.Name, fmt.Sprintf(`{"maxRunning": null, %q: %d}`, b.Name, b.Max+1)}
		bodies[b.Name+" a string"] = badBody{"/" + b.Name, fmt.Sprintf(`{"maxRunning": null, %q: "5"}`, b.Name)}
	}
	for name, bad := range bodies {
		// A plan's PATCH leaves out what it does not change (it takes no
		// null); a workspace's PUT replaces all, so it carries maxRunning.
		patch := strings.Replace(bad.body, `"maxRunning": null, `, "", 1)
		for opName, send := range map[string]func() (*http.Response, error){
			"updatePlan": func() (*http.Response, error) {
				return admin.UpdatePlanWithBody(ctx, client.PRO, "application/json", strings.NewReader(patch))
			},
			"setWorkspaceLimits": func() (*http.Response, error) {
				return admin.SetWorkspaceLimitsWithBody(ctx, w.wsA, "application/json", strings.NewReader(bad.body))
			},
		} {
			got := read(send())
			got.Expect(t, opName+": "+name, http.StatusBadRequest, "invalid-request")
			if !slices.Contains(got.FieldPaths(), bad.field) {
				t.Errorf("%s: %s: field paths %v lack %s; body: %s", opName, name, got.FieldPaths(), bad.field, got.Body)
			}
		}
	}
	// Retention is a plan figure only: out of range on the plan, and no
	// field of a workspace's own limits.
	for _, body := range []string{`{"retentionDays": 0}`, `{"retentionDays": 3651}`, `{"retentionDays": "7"}`} {
		got := read(admin.UpdatePlanWithBody(ctx, client.PRO, "application/json", strings.NewReader(body)))
		got.Expect(t, "updatePlan: "+body, http.StatusBadRequest, "invalid-request")
		if !slices.Contains(got.FieldPaths(), "/retentionDays") {
			t.Errorf("updatePlan %s: field paths %v lack /retentionDays; body: %s", body, got.FieldPaths(), got.Body)
		}
	}
	read(admin.SetWorkspaceLimitsWithBody(ctx, w.wsA, "application/json", strings.NewReader(`{"maxRunning": null, "retentionDays": 5}`))).
		Expect(t, "setWorkspaceLimits with a retention", http.StatusBadRequest, "invalid-request")
	read(admin.UpdatePlanWithBody(ctx, "GOLD", "application/json", strings.NewReader(`{"maxRunning": 5}`))).
		Expect(t, "updatePlan of an unknown plan", http.StatusBadRequest, "invalid-request")

	var plans string
	var own int
	if err := w.Pool.QueryRow(ctx, `SELECT (SELECT string_agg(name || '=' || max_running, ',' ORDER BY max_running) FROM plans),
		(SELECT count(*) FROM workspace_limits)`).Scan(&plans, &own); err != nil {
		t.Fatal(err)
	}
	if plans != "FREE=1,PRO=5,ENTERPRISE=20" || own != 0 {
		t.Errorf("refused calls changed limits: plans %s, %d workspace limits", plans, own)
	}
	var plansAfter string
	if err := w.Pool.QueryRow(ctx, `SELECT string_agg(p::text, ';' ORDER BY name) FROM plans p`).Scan(&plansAfter); err != nil {
		t.Fatal(err)
	}
	if plansAfter != plansBefore {
		t.Errorf("refused calls changed the plans:\n before %s\n after  %s", plansBefore, plansAfter)
	}
	w.checkBUntouched(t)
}

// TestNegativeConcurrencyKeys: a key template that is too long, reads
// anything but the input, or a limit out of range is a 422 naming the
// member at save time; an input that lacks what the key reads is a 422
// naming /input at enqueue, and nothing is queued.
func TestNegativeConcurrencyKeys(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	before := counts(t, w)
	for name, tt := range map[string]struct{ concurrency, path string }{
		"template too long":  {`{"key": "{{ input.a }}` + strings.Repeat("x", domain.ConcurrencyKeyTemplateMax) + `", "limit": 2}`, "/graph/concurrency/key"},
		"a step reference":   {`{"key": "{{ steps.a.output }}", "limit": 2}`, "/graph/concurrency/key"},
		"no reference":       {`{"key": "everyone", "limit": 2}`, "/graph/concurrency/key"},
		"limit out of range": {`{"key": "{{ input.a }}", "limit": 0}`, "/graph/concurrency/limit"},
	} {
		g := client.Graph(`{"nodes": [], "edges": [], "concurrency": ` + tt.concurrency + `}`)
		got := read(a.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "keyed", Graph: g}))
		got.Expect(t, "createDefinition: "+name, http.StatusUnprocessableEntity, "invalid-graph")
		if !slices.Contains(got.FieldPaths(), tt.path) {
			t.Errorf("%s: problems at %v, want %s; body: %s", name, got.FieldPaths(), tt.path, got.Body)
		}
	}
	if after := counts(t, w); after != before {
		t.Errorf("refused definitions wrote rows: before %v, after %v", before, after)
	}
	keyed, err := a.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "keyed",
		Graph: client.Graph(`{"nodes": [], "edges": [], "concurrency": {"key": "{{ input.customer.id }}", "limit": 2}}`)})
	if err != nil || keyed.JSON201 == nil {
		t.Fatalf("a keyed definition was refused: %v %s", err, keyed.Body)
	}
	before = counts(t, w)
	for name, input := range map[string]json.RawMessage{
		"a missing member":     json.RawMessage(`{"customer": {}}`),
		"a missing parent":     json.RawMessage(`{"order": 1}`),
		"a key past 256 bytes": json.RawMessage(`{"customer": {"id": "` + strings.Repeat("k", domain.ConcurrencyKeyMax+1) + `"}}`),
	} {
		got := read(a.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: keyed.JSON201.ID, Input: &input}))
		got.Expect(t, "startExecution with "+name, http.StatusUnprocessableEntity, "invalid-input")
		if !slices.Contains(got.FieldPaths(), "/input") {
			t.Errorf("%s: problems at %v, want /input; body: %s", name, got.FieldPaths(), got.Body)
		}
	}
	if after := counts(t, w); after != before {
		t.Errorf("refused enqueues wrote rows: before %v, after %v", before, after)
	}
	ok := json.RawMessage(`{"customer": {"id": "c-1"}}`)
	got := read(a.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: keyed.JSON201.ID, Input: &ok}))
	if got.Status != http.StatusAccepted {
		t.Fatalf("an input with the key's member: %d %s", got.Status, got.Body)
	}
	var key string
	if err := w.Pool.QueryRow(ctx, "SELECT concurrency_key FROM workflow_execution_queue WHERE workflow_definition_id = $1", keyed.JSON201.ID).Scan(&key); err != nil || key != "c-1" {
		t.Fatalf("stored key %q (%v), want c-1", key, err)
	}

	// A bulk enqueue resolves every item's key: one input without it
	// refuses the whole batch naming that item's input, and writes nothing.
	missing := json.RawMessage(`{"customer": {}}`)
	other := json.RawMessage(`{"customer": {"id": "c-2"}}`)
	before = counts(t, w)
	batch := read(a.EnqueueExecutionBatch(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: keyed.JSON201.ID,
		Items: []client.EnqueueBatchItem{{Input: &ok}, {Input: &missing}, {Input: &other}}}))
	batch.Expect(t, "startExecutionBatch with item 1 lacking the key", http.StatusUnprocessableEntity, "invalid-input")
	if !slices.Contains(batch.FieldPaths(), "/items/1/input") {
		t.Errorf("a batch with item 1 lacking the key: problems at %v, want /items/1/input; body: %s", batch.FieldPaths(), batch.Body)
	}
	if after := counts(t, w); after != before {
		t.Errorf("a refused batch wrote rows: before %v, after %v", before, after)
	}
	if got := read(a.EnqueueExecutionBatch(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: keyed.JSON201.ID,
		Items: []client.EnqueueBatchItem{{Input: &other}, {Input: &other}}})); got.Status != http.StatusAccepted {
		t.Fatalf("a batch whose items have the key: %d %s", got.Status, got.Body)
	}
	var batched int
	if err := w.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue
		WHERE workflow_definition_id = $1 AND concurrency_key = 'c-2' AND concurrency_limit = 2`, keyed.JSON201.ID).Scan(&batched); err != nil || batched != 2 {
		t.Fatalf("%d batched items stored with key c-2 and limit 2 (%v), want 2", batched, err)
	}

	// A schedule resolves the key over its input when it is written, as
	// each tick would: an input without it is refused at creation and at
	// an edit, naming /input and the key, and nothing is stored.
	schedule := func(input json.RawMessage) client.CreateScheduleRequest {
		return client.CreateScheduleRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: keyed.JSON201.ID, Name: "keyed",
			CronExpression: harness.Ptr("0 3 * * *"), Input: &input}
	}
	refusedAtInput := func(name string, got harness.Answer) {
		t.Helper()
		got.Expect(t, name, http.StatusUnprocessableEntity, "invalid-input")
		if !slices.Equal(got.FieldPaths(), []string{"/input"}) || !strings.Contains(string(got.Body), "input.customer.id") {
			t.Errorf("%s: problems at %v, want /input naming the key's path; body: %s", name, got.FieldPaths(), got.Body)
		}
	}
	before = counts(t, w)
	refusedAtInput("createSchedule with an input lacking the key", read(a.CreateSchedule(ctx, schedule(missing))))
	if after := counts(t, w); after != before {
		t.Errorf("a refused schedule wrote rows: before %v, after %v", before, after)
	}
	sc, err := a.CreateScheduleWithResponse(ctx, schedule(ok))
	if err != nil || sc.JSON201 == nil {
		t.Fatalf("a schedule whose input has the key was refused: %v %s", err, sc.Body)
	}
	refusedAtInput("updateSchedule to an input lacking the key", read(a.UpdateSchedule(ctx, sc.JSON201.ID, client.UpdateScheduleRequest{Input: &missing})))
	var stored string
	if err := w.Pool.QueryRow(ctx, `SELECT input->'customer'->>'id' FROM schedules WHERE id = $1`, sc.JSON201.ID).Scan(&stored); err != nil || stored != "c-1" {
		t.Errorf("the refused edit changed the schedule's input: customer id %q (%v), want c-1", stored, err)
	}
	if got := read(a.UpdateSchedule(ctx, sc.JSON201.ID, client.UpdateScheduleRequest{Name: harness.Ptr("renamed")})); got.Status != http.StatusOK {
		t.Errorf("renaming a schedule whose input has the key: %d %s", got.Status, got.Body)
	}
}

// TestNegativeEvents: an event no node of the run waits for is a 409, one
// over the body limit a 413, a malformed name a 400 naming it; none is
// noted or delivered, and another workspace's execution is covered by
// opsOnB (403).
func TestNegativeEvents(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	b := w.Client(t, w.keyB.Secret)
	read(b.SendEvent(ctx, w.execB, client.EventToSend{Name: "approval"})).
		Expect(t, "an event no node of the run waits for", http.StatusConflict, "not-waiting")
	huge := json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)
	read(b.SendEvent(ctx, w.execB, client.EventToSend{Name: "approval", Payload: &huge})).
		Expect(t, "an event over the body limit", http.StatusRequestEntityTooLarge, "too-large")
	bad := read(b.SendEvent(ctx, w.execB, client.EventToSend{Name: "no spaces"}))
	bad.Expect(t, "an event name with a space", http.StatusBadRequest, "invalid-request")
	if paths := bad.FieldPaths(); !slices.Contains(paths, "/name") {
		t.Errorf("a malformed event name: field errors at %v, want /name", paths)
	}
	var events int
	if err := w.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_events").Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 0 {
		t.Errorf("%d events noted, want none", events)
	}
	w.checkBUntouched(t)
}

// TestNegativeForEachPastItsCapFailsBeforeAnyIteration: a FOR_EACH over
// more elements than the plan allows fails its run, naming the limit, and
// runs no iteration.
func TestNegativeForEachPastItsCapFailsBeforeAnyIteration(t *testing.T) {
	t.Parallel()
	var quotas *worker.QuotaSnapshot
	base := harness.StartSluiceWith(t, nil, fx.Populate(&quotas))
	harness.SetPlanQuotasE2E(t, base, quotas, domain.PlanFree, map[string]any{"forEachItems": 3}, func(q domain.PlanQuotas) bool { return q.ForEachItems == 3 })
	graph := map[string]any{"nodes": []any{map[string]any{"key": "each", "type": "FOR_EACH", "config": map[string]any{
		"items": "{{ input.list }}", "node": map[string]any{"type": "TRANSFORM", "config": map[string]any{"output": "{{ item }}"}},
	}}}, "edges": []any{}}
	_, execID := harness.StartGraph(t, base, "FREE", graph, map[string]any{"list": []int{1, 2, 3, 4}})
	run := harness.WaitRun(t, base, execID, time.Minute, "the execution to fail", harness.StatusIs("FAILED"))
	if run.Error == nil || !strings.Contains(*run.Error, "4 elements, over the workspace's FOR_EACH limit of 3 (its forEachItems quota)") {
		t.Errorf("error = %v, want the limit named", run.Error)
	}
	if len(run.Nodes) != 1 {
		t.Errorf("node records = %+v, want the FOR_EACH's alone (no iteration ran)", run.Nodes)
	}
}

// TestNegativeSubWorkflowsNestingTooDeepOrInACycleAre422: saving a graph
// whose SUB_WORKFLOWs lead back to itself, nest past the limit, or name
// another workspace's definition is refused naming the node's field.
func TestNegativeSubWorkflowsNestingTooDeepOrInACycleAre422(t *testing.T) {
	t.Parallel()
	base := harness.StartSluice(t, nil)
	mkWorkspace := func() string {
		var ws struct{ ID string }
		if code := harness.Call(t, "POST", base+"/api/v1/workspaces", harness.TestAdminToken, map[string]any{"name": "subs", "plan": "PRO"}, &ws); code != 201 {
			t.Fatalf("create workspace: %d", code)
		}
		return ws.ID
	}
	ws, other := mkWorkspace(), mkWorkspace()
	leaf := map[string]any{"nodes": []any{map[string]any{"key": "t", "type": "TRANSFORM", "config": map[string]any{"output": 1}}}, "edges": []any{}}
	const field = "/graph/nodes/0/config/definition"
	refused := func(what, method, url string, body map[string]any, want string) {
		t.Helper()
		var problem struct {
			Errors []struct{ Path, Message string }
		}
		if code := harness.Call(t, method, url, harness.TestAdminToken, body, &problem); code != 422 {
			t.Fatalf("%s: %d, want 422", what, code)
		}
		if len(problem.Errors) != 1 || problem.Errors[0].Path != field || !strings.Contains(problem.Errors[0].Message, want) {
			t.Errorf("%s: field errors %+v, want one at %s mentioning %q", what, problem.Errors, field, want)
		}
	}

	// d4 <- d3 <- d2 <- d1: d1 nests three deep, at the limit.
	chain := []string{harness.DefineIn(t, base, ws, "d4", leaf)}
	for _, name := range []string{"d3", "d2", "d1"} {
		chain = append(chain, harness.DefineIn(t, base, ws, name, harness.SubGraph(chain[len(chain)-1], nil)))
	}
	refused("a fourth level", "POST", base+"/api/v1/workflow/definitions",
		map[string]any{"workspaceId": ws, "name": "d0", "graph": harness.SubGraph(chain[3], nil)}, "nest deeper than the limit of 3")

	// d4 running d1 would close d1 -> d2 -> d3 -> d4 -> d1.
	refused("a cycle", "POST", base+"/api/v1/workflow/definitions/"+chain[0]+"/versions",
		map[string]any{"graph": harness.SubGraph(chain[3], nil)}, "form a cycle")

	foreign := harness.DefineIn(t, base, other, "theirs", leaf)
	refused("another workspace's definition", "POST", base+"/api/v1/workflow/definitions",
		map[string]any{"workspaceId": ws, "name": "reach", "graph": harness.SubGraph(foreign, nil)}, "no such definition in this workspace")
}

// TestNegativeStartRates: a workspace key can set no start rate, not its
// plan's, nor its own workspace's, nor another's (403, 0 successes). The
// admin's rates out of range, on a plan, a workspace or a definition's
// concurrency key, are refused naming the field (the request's schema
// answers 400 for a bound it states, as for /maxRunning; a burst under
// the rate, which only the domain can see, is a 422), and nothing is
// written.
func TestNegativeStartRates(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	admin := w.Client(t, harness.AdminToken)
	rate := `{"maxRunning": 5, "startRate": {"rate": 1000, "per": "second"}}`
	successes, calls := 0, 0
	for name, send := range map[string]func(c client.ClientInterface) (*http.Response, error){
		"updatePlan with a rate": func(c client.ClientInterface) (*http.Response, error) {
			return c.UpdatePlanWithBody(ctx, client.FREE, "application/json", strings.NewReader(rate))
		},
		"setWorkspaceLimits with a rate on its own workspace": func(c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimitsWithBody(ctx, w.wsA, "application/json", strings.NewReader(rate))
		},
		"setWorkspaceLimits with a rate on another workspace": func(c client.ClientInterface) (*http.Response, error) {
			return c.SetWorkspaceLimitsWithBody(ctx, w.wsB, "application/json", strings.NewReader(rate))
		},
	} {
		calls++
		got := read(send(a))
		if got.Status < 300 {
			successes++
		}
		got.Expect(t, name+" with A's key", http.StatusForbidden, "forbidden")
	}
	if successes != 0 {
		t.Errorf("%d of %d rate edits with a workspace key succeeded", successes, calls)
	}
	for _, tc := range []struct {
		name, startRate, field string
		status                 int
		kind                   string
	}{
		{"rate 0", `{"rate": 0, "per": "second"}`, "/startRate/rate", http.StatusBadRequest, "invalid-request"},
		{"rate over 10,000", `{"rate": 10001, "per": "second"}`, "/startRate/rate", http.StatusBadRequest, "invalid-request"},
		{"an hour", `{"rate": 5, "per": "hour"}`, "/startRate/per", http.StatusBadRequest, "invalid-request"},
		{"burst over 10,000", `{"rate": 5, "per": "second", "burst": 10001}`, "/startRate/burst", http.StatusBadRequest, "invalid-request"},
		{"a string rate", `{"rate": "5", "per": "second"}`, "/startRate/rate", http.StatusBadRequest, "invalid-request"},
		{"burst under the rate", `{"rate": 10, "per": "second", "burst": 5}`, "/startRate/burst", http.StatusUnprocessableEntity, "invalid-field"},
	} {
		body := `{"maxRunning": 5, "startRate": ` + tc.startRate + `}`
		for opName, send := range map[string]func() (*http.Response, error){
			"updatePlan": func() (*http.Response, error) {
				return admin.UpdatePlanWithBody(ctx, client.PRO, "application/json", strings.NewReader(body))
			},
			"setWorkspaceLimits": func() (*http.Response, error) {
				return admin.SetWorkspaceLimitsWithBody(ctx, w.wsA, "application/json", strings.NewReader(body))
			},
		} {
			got := read(send())
			got.Expect(t, opName+": "+tc.name, tc.status, tc.kind)
			if !slices.Contains(got.FieldPaths(), tc.field) {
				t.Errorf("%s: %s: field paths %v lack %s; body: %s", opName, tc.name, got.FieldPaths(), tc.field, got.Body)
			}
		}
	}
	var rated, own int
	if err := w.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM plans WHERE start_rate IS NOT NULL OR max_running <> ALL(ARRAY[1, 5, 20])),
		(SELECT count(*) FROM workspace_limits)`).Scan(&rated, &own); err != nil {
		t.Fatal(err)
	}
	if rated != 0 || own != 0 {
		t.Errorf("refused rate edits wrote: %d plans changed, %d workspace limits", rated, own)
	}

	before := counts(t, w)
	for name, tt := range map[string]struct{ startRate, path string }{
		"rate 0":               {`{"rate": 0, "per": "second"}`, "/graph/concurrency/startRate/rate"},
		"rate over 10,000":     {`{"rate": 10001, "per": "second"}`, "/graph/concurrency/startRate/rate"},
		"an hour":              {`{"rate": 5, "per": "hour"}`, "/graph/concurrency/startRate/per"},
		"burst under the rate": {`{"rate": 10, "per": "minute", "burst": 9}`, "/graph/concurrency/startRate/burst"},
		"burst over 10,000":    {`{"rate": 10, "per": "minute", "burst": 10001}`, "/graph/concurrency/startRate/burst"},
		"an unknown member":    {`{"rate": 10, "per": "minute", "window": 3}`, "/graph/concurrency/startRate/window"},
		"not an object":        {`"10/s"`, "/graph/concurrency/startRate"},
	} {
		g := client.Graph(`{"nodes": [], "edges": [], "concurrency": {"key": "{{ input.a }}", "limit": 2, "startRate": ` + tt.startRate + `}}`)
		got := read(a.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "rated", Graph: g}))
		got.Expect(t, "createDefinition with a key rate: "+name, http.StatusUnprocessableEntity, "invalid-graph")
		if !slices.Contains(got.FieldPaths(), tt.path) {
			t.Errorf("%s: problems at %v, want %s; body: %s", name, got.FieldPaths(), tt.path, got.Body)
		}
	}
	if after := counts(t, w); after != before {
		t.Errorf("refused definitions wrote rows: before %v, after %v", before, after)
	}

	// A valid key rate is stored on every item enqueued, one by one or in
	// bulk, with an absent burst read as the rate.
	ratedDef, err := a.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "rated",
		Graph: client.Graph(`{"nodes": [], "edges": [], "concurrency": {"key": "{{ input.a }}", "limit": 2, "startRate": {"rate": 3, "per": "minute"}}}`)})
	if err != nil || ratedDef.JSON201 == nil {
		t.Fatalf("a definition with a valid key rate was refused: %v %s", err, ratedDef.Body)
	}
	in := json.RawMessage(`{"a": "k"}`)
	if got := read(a.EnqueueExecution(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: ratedDef.JSON201.ID, Input: &in})); got.Status != http.StatusAccepted {
		t.Fatalf("enqueueing a rated key's item: %d %s", got.Status, got.Body)
	}
	if got := read(a.EnqueueExecutionBatch(ctx, client.EnqueueExecutionBatchRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: ratedDef.JSON201.ID,
		Items: []client.EnqueueBatchItem{{Input: &in}, {Input: &in}}})); got.Status != http.StatusAccepted {
		t.Fatalf("bulk-enqueueing a rated key's items: %d %s", got.Status, got.Body)
	}
	var stored int
	if err := w.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_execution_queue WHERE workflow_definition_id = $1
		AND concurrency_rate = 3 AND concurrency_rate_per = 'minute' AND concurrency_burst = 3`, ratedDef.JSON201.ID).Scan(&stored); err != nil || stored != 3 {
		t.Errorf("%d items stored with the key's rate 3/minute burst 3 (%v), want 3", stored, err)
	}
	w.checkBUntouched(t)
}

// TestNegativeAllowedWorkflows: the allow-list is the admin's (a
// workspace key gets 403, even on its own workspace); Sluice's own task
// queues and names that are no literal Temporal name are refused with 422
// naming the field, and so is an empty type, which would otherwise widen
// to any; a definition whose TEMPORAL_WORKFLOW names a queue or type the
// list does not permit, or a queue as a template, is refused at save
// with 422 naming the node's config field; an oversized input is refused
// by the request limit (413). Nothing refused is written.
func TestNegativeAllowedWorkflows(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	read := harness.Reader(t)
	admin := s.Client(t, harness.AdminToken)
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "team", Plan: client.PRO})
	status(t, "createWorkspace", cw, err, http.StatusCreated)
	ws := cw.JSON201.ID
	ck, err := admin.CreateAPIKeyWithResponse(ctx, ws, client.CreateAPIKeyRequest{Name: "team key"})
	status(t, "createAPIKey", ck, err, http.StatusCreated)
	key := s.Client(t, ck.JSON201.Secret)

	read(key.PutAllowedWorkflow(ctx, ws, client.AllowedWorkflow{TaskQueue: "team-orders"})).
		Expect(t, "putAllowedWorkflow with the workspace's own key", http.StatusForbidden, "forbidden")
	read(key.ListAllowedWorkflows(ctx, ws)).Expect(t, "listAllowedWorkflows with the workspace's own key", http.StatusForbidden, "forbidden")
	for _, tc := range []struct {
		name  string
		entry client.AllowedWorkflow
		field string
	}{
		{"Sluice's workflow queue", client.AllowedWorkflow{TaskQueue: s.Queues.Workflows}, "/taskQueue"},
		{"Sluice's external-API queue", client.AllowedWorkflow{TaskQueue: s.Queues.ExternalAPI, WorkflowType: harness.Ptr("X")}, "/taskQueue"},
		{"an empty queue", client.AllowedWorkflow{TaskQueue: ""}, "/taskQueue"},
		{"a queue of 201 bytes", client.AllowedWorkflow{TaskQueue: strings.Repeat("q", 201)}, "/taskQueue"},
		{"a queue with a space", client.AllowedWorkflow{TaskQueue: "team orders"}, "/taskQueue"},
		{"a template queue", client.AllowedWorkflow{TaskQueue: "{{ input.q }}"}, "/taskQueue"},
		{"an empty type", client.AllowedWorkflow{TaskQueue: "team-orders", WorkflowType: harness.Ptr("")}, "/workflowType"},
		{"a type with a newline", client.AllowedWorkflow{TaskQueue: "team-orders", WorkflowType: harness.Ptr("a\nb")}, "/workflowType"},
	} {
		got := read(admin.PutAllowedWorkflow(ctx, ws, tc.entry))
		got.Expect(t, "putAllowedWorkflow of "+tc.name, http.StatusUnprocessableEntity, "invalid-field")
		if !slices.Equal(got.FieldPaths(), []string{tc.field}) {
			t.Errorf("putAllowedWorkflow of %s: field paths %v, want [%s]", tc.name, got.FieldPaths(), tc.field)
		}
	}
	var stored int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM workspace_allow_list WHERE workspace_id = $1", ws).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatalf("refused entries stored %d rows", stored)
	}
	read(admin.DeleteAllowedWorkflow(ctx, ws, &client.DeleteAllowedWorkflowParams{TaskQueue: "never-allowed"})).
		Expect(t, "deleteAllowedWorkflow of an entry not there", http.StatusNotFound, "not-found")
	read(admin.PutAllowedWorkflow(ctx, uuid.New(), client.AllowedWorkflow{TaskQueue: "team-orders"})).
		Expect(t, "putAllowedWorkflow on no workspace", http.StatusNotFound, "not-found")

	pa, err := admin.PutAllowedWorkflowWithResponse(ctx, ws, client.AllowedWorkflow{TaskQueue: "team-billing", WorkflowType: harness.Ptr("Invoice")})
	status(t, "putAllowedWorkflow", pa, err, http.StatusOK)
	node := func(config string) client.Graph {
		return client.Graph(`{"nodes":[{"key":"team","type":"TEMPORAL_WORKFLOW","config":` + config + `}],"edges":[]}`)
	}
	for _, tc := range []struct {
		name, config, field string
	}{
		{"a queue not allowed", `{"workflowType":"Invoice","taskQueue":"team-orders"}`, "/graph/nodes/0/config/taskQueue"},
		{"a type not allowed on the queue", `{"workflowType":"Refund","taskQueue":"team-billing"}`, "/graph/nodes/0/config/workflowType"},
		{"Sluice's own queue", `{"workflowType":"SluiceExecution","taskQueue":"` + s.Queues.Workflows + `"}`, "/graph/nodes/0/config/taskQueue"},
		{"a queue from a template", `{"workflowType":"Invoice","taskQueue":"{{ input.queue }}"}`, "/graph/nodes/0/config/taskQueue"},
		{"an execution timeout past the plan's node timeout", `{"workflowType":"Invoice","taskQueue":"team-billing","executionTimeout":"48h"}`, "/graph/nodes/0/config/executionTimeout"},
	} {
		got := read(key.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "gate", Graph: node(tc.config)}))
		if got.Status != http.StatusUnprocessableEntity || !slices.Equal(got.FieldPaths(), []string{tc.field}) {
			t.Errorf("createDefinition with %s: %d %v, want 422 naming [%s]", tc.name, got.Status, got.FieldPaths(), tc.field)
		}
	}
	big := strings.Repeat("x", 2<<20)
	read(key.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "gate",
		Graph: node(`{"workflowType":"Invoice","taskQueue":"team-billing","input":{"blob":"` + big + `"}}`)})).
		Expect(t, "createDefinition with an oversized input", http.StatusRequestEntityTooLarge, "too-large")
	var defs int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_definitions WHERE workspace_id = $1", ws).Scan(&defs); err != nil {
		t.Fatal(err)
	}
	if defs != 0 {
		t.Errorf("refused definitions stored %d rows", defs)
	}
	cd, err := key.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "gate",
		Graph: node(`{"workflowType":"Invoice","taskQueue":"team-billing","input":{"id":"{{ input.id }}"}}`)})
	status(t, "createDefinition of an allowed TEMPORAL_WORKFLOW", cd, err, http.StatusCreated)
}
