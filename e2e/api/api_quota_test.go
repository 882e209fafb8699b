package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/adapters/httpapi"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/e2e/harness"
)

// TestQuotasRefuseWithTooManyRequests: past a workspace's pending-items,
// definitions or graph-size quota the answer is a 429 problem naming the
// quota (with Retry-After where waiting helps), nothing is written, and
// another workspace on another plan is not affected.
func TestQuotasRefuseWithTooManyRequests(t *testing.T) {
	t.Parallel()
	quotas := domain.DefaultProcessQuotas()
	quotas.NodesPerGraph = 2
	s := harness.NewStackWithQuotas(t, quotas)
	s.SetPlanQuotas(t, domain.PlanFree, domain.QuotaOverrides{PendingItems: harness.Ptr(2), Definitions: harness.Ptr(1)})
	s.SetPlanQuotas(t, domain.PlanPro, domain.QuotaOverrides{PendingItems: harness.Ptr(100), Definitions: harness.Ptr(100)})
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	wsResp, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "quota", Plan: client.FREE})
	status(t, "ws", wsResp, err, http.StatusCreated)
	ws := wsResp.JSON201
	keyResp, err := admin.CreateAPIKeyWithResponse(ctx, ws.ID, client.CreateAPIKeyRequest{Name: "k"})
	status(t, "key", keyResp, err, http.StatusCreated)
	key := keyResp.JSON201
	c := s.Client(t, key.Secret)

	big := client.Graph(`{"nodes":[
		{"key":"a","type":"TRANSFORM","config":{"output":{"k":"a"}}},
		{"key":"b","type":"TRANSFORM","config":{"output":{"k":"b"}}},
		{"key":"c","type":"TRANSFORM","config":{"output":{"k":"c"}}}
	],"edges":[]}`)
	tooBig, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws.ID, Name: "big", Graph: big})
	status(t, "createDefinition over the node quota", tooBig, err, http.StatusTooManyRequests)
	if tooBig.ApplicationProblemJSON429 == nil || tooBig.ApplicationProblemJSON429.Errors == nil ||
		!slices.ContainsFunc(*tooBig.ApplicationProblemJSON429.Errors, func(e client.FieldError) bool { return e.Path == "/graph/nodes" }) {
		t.Errorf("node quota problem does not name /graph/nodes: %s", tooBig.Body)
	}

	small := client.Graph(`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":{"k":"a"}}}],"edges":[]}`)
	defResp, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws.ID, Name: "one", Graph: small})
	status(t, "def", defResp, err, http.StatusCreated)
	def := defResp.JSON201
	second, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws.ID, Name: "two", Graph: small})
	status(t, "createDefinition over the definitions quota", second, err, http.StatusTooManyRequests)
	if second.HTTPResponse.Header.Get("Retry-After") != "" {
		t.Errorf("definitions quota says Retry-After %q, but waiting does not help", second.HTTPResponse.Header.Get("Retry-After"))
	}

	enqueue := func() *client.EnqueueExecutionResponse {
		r, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws.ID, WorkflowDefinitionID: def.ID})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for range 2 {
		status(t, "enqueueExecution within the quota", enqueue(), nil, http.StatusAccepted)
	}
	third := enqueue()
	status(t, "enqueueExecution over the pending quota", third, nil, http.StatusTooManyRequests)
	if third.HTTPResponse.Header.Get("Retry-After") == "" {
		t.Errorf("pending quota refusal has no Retry-After")
	}
	var pending int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1", ws.ID).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 2 {
		t.Errorf("%d items queued, want the 2 within the quota untouched", pending)
	}

	// Another workspace, on a plan with room, is not held back.
	proResp, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "quota-pro", Plan: client.PRO})
	status(t, "pro", proResp, err, http.StatusCreated)
	pro := proResp.JSON201
	proKeyResp, err := admin.CreateAPIKeyWithResponse(ctx, pro.ID, client.CreateAPIKeyRequest{Name: "k"})
	status(t, "proKey", proKeyResp, err, http.StatusCreated)
	proKey := proKeyResp.JSON201
	pc := s.Client(t, proKey.Secret)
	proDefResp, err := pc.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: pro.ID, Name: "one", Graph: small})
	status(t, "proDef", proDefResp, err, http.StatusCreated)
	proDef := proDefResp.JSON201
	r, err := pc.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: pro.ID, WorkflowDefinitionID: proDef.ID})
	status(t, "enqueueExecution in another workspace", r, err, http.StatusAccepted)
}

// TestTheGraphNodeQuotaIsTheOneBoundOnNodes: a quota above 1,000 nodes per
// graph lets such graphs in, and refuses the one past it with 429 naming
// /graph/nodes. The spec capped nodes at 1,000 (and edges at 5,000), so
// the 1,001-node chain got a 400 whatever the quota said.
func TestTheGraphNodeQuotaIsTheOneBoundOnNodes(t *testing.T) {
	t.Parallel()
	const quota = 1_500
	quotas := domain.DefaultProcessQuotas()
	quotas.NodesPerGraph = quota
	s := harness.NewStackWithQuotas(t, quotas)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "large graphs", Plan: client.ENTERPRISE})
	status(t, "createWorkspace", cw, err, http.StatusCreated)

	// chain is n TRANSFORM nodes, each after the one before.
	chain := func(n int) client.Graph {
		nodes, edges := make([]string, n), make([]string, 0, n-1)
		for i := range n {
			nodes[i] = fmt.Sprintf(`{"key":"n%d","type":"TRANSFORM","config":{"output":%d}}`, i, i)
			if i > 0 {
				edges = append(edges, fmt.Sprintf(`{"from":"n%d","to":"n%d"}`, i-1, i))
			}
		}
		return client.Graph(`{"nodes":[` + strings.Join(nodes, ",") + `],"edges":[` + strings.Join(edges, ",") + `]}`)
	}
	ok, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: cw.JSON201.ID, Name: "1001", Graph: chain(1_001)})
	status(t, "createDefinition with 1,001 nodes under a quota of 1,500", ok, err, http.StatusCreated)
	over, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: cw.JSON201.ID, Name: "1501", Graph: chain(quota + 1)})
	status(t, "createDefinition past the quota", over, err, http.StatusTooManyRequests)
	if p := over.ApplicationProblemJSON429; p == nil || p.Errors == nil ||
		!slices.ContainsFunc(*p.Errors, func(e client.FieldError) bool { return e.Path == "/graph/nodes" }) {
		t.Errorf("node quota problem does not name /graph/nodes: %s", over.Body)
	}
}

// quotaWorkspace is a workspace of plan with a key, and a client signed in
// with it.
func quotaWorkspace(t *testing.T, s *harness.Stack, plan client.Plan) (uuid.UUID, *client.ClientWithResponses) {
	t.Helper()
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	wsResp, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "stored quota", Plan: plan})
	status(t, "createWorkspace", wsResp, err, http.StatusCreated)
	keyResp, err := admin.CreateAPIKeyWithResponse(ctx, wsResp.JSON201.ID, client.CreateAPIKeyRequest{Name: "k"})
	status(t, "createAPIKey", keyResp, err, http.StatusCreated)
	return wsResp.JSON201.ID, s.Client(t, keyResp.JSON201.Secret)
}

var oneNodeGraph = client.Graph(`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":{"k":"a"}}}],"edges":[]}`)

// TestAnEnqueueAndCancelLoopMeetsTheStoredItemsQuota: a cancelled item
// stays stored until retention deletes it, so enqueueing and cancelling
// in a loop meets a 429 with Retry-After at the stored-items quota, while
// the pending-items quota alone would never be reached.
func TestAnEnqueueAndCancelLoopMeetsTheStoredItemsQuota(t *testing.T) {
	t.Parallel()
	const stored = 5
	s := harness.NewStack(t)
	s.SetPlanQuotas(t, domain.PlanFree, domain.QuotaOverrides{StoredItems: harness.Ptr(stored)})
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.FREE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "loop", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)

	refusedAt := 0
	for i := 1; i <= 2*stored && refusedAt == 0; i++ {
		r, err := c.EnqueueExecutionWithResponse(ctx, nil, client.EnqueueExecutionRequest{WorkspaceID: ws, WorkflowDefinitionID: def.JSON201.ID,
			Input: harness.RawInput(map[string]any{"pad": strings.Repeat("x", 10_000)})})
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() == http.StatusTooManyRequests {
			refusedAt = i
			if r.HTTPResponse.Header.Get("Retry-After") == "" {
				t.Errorf("stored-items refusal has no Retry-After")
			}
			if !strings.Contains(string(r.Body), "stored queue items") {
				t.Errorf("refusal does not name the stored-items quota: %s", r.Body)
			}
			break
		}
		status(t, "enqueueExecution", r, nil, http.StatusAccepted)
		cancel, err := c.CancelQueueItemWithResponse(ctx, r.JSON202.QueueID)
		status(t, "cancelQueueItem", cancel, err, http.StatusAccepted)
	}
	if refusedAt != stored+1 {
		t.Fatalf("the loop was refused at enqueue %d, want %d (quota %d stored items)", refusedAt, stored+1, stored)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1", ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != stored {
		t.Errorf("%d items stored, want exactly the quota, %d", n, stored)
	}
}

// TestAVersionLoopMeetsTheDefinitionVersionsQuota: every version of every
// definition counts, and a deleted definition still counts with its
// versions, so neither saving versions in a loop nor deleting and
// recreating definitions walks around the quotas.
func TestAVersionLoopMeetsTheDefinitionVersionsQuota(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	s.SetPlanQuotas(t, domain.PlanFree, domain.QuotaOverrides{DefinitionVersions: harness.Ptr(4), Definitions: harness.Ptr(3)})
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.FREE)
	def, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "versions", Graph: oneNodeGraph})
	status(t, "createDefinition", def, err, http.StatusCreated)
	for i := 2; i <= 3; i++ {
		v, err := c.CreateDefinitionVersionWithResponse(ctx, def.JSON201.ID, client.CreateVersionRequest{Graph: oneNodeGraph})
		status(t, fmt.Sprintf("createDefinitionVersion %d", i), v, err, http.StatusCreated)
	}
	// Deleting it frees nothing: its 3 versions still count.
	del, err := c.DeleteDefinitionWithResponse(ctx, def.JSON201.ID)
	status(t, "deleteDefinition", del, err, http.StatusNoContent)
	second, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "again", Graph: oneNodeGraph})
	status(t, "createDefinition, the 4th version", second, err, http.StatusCreated)
	over, err := c.CreateDefinitionVersionWithResponse(ctx, second.JSON201.ID, client.CreateVersionRequest{Graph: oneNodeGraph})
	status(t, "createDefinitionVersion past the versions quota", over, err, http.StatusTooManyRequests)
	if !strings.Contains(string(over.Body), "definition versions") {
		t.Errorf("refusal does not name the versions quota: %s", over.Body)
	}
	third, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "third", Graph: oneNodeGraph})
	status(t, "createDefinition past the versions quota", third, err, http.StatusTooManyRequests)
	var versions int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM workflow_definition_versions v JOIN workflow_definitions d ON d.id = v.workflow_definition_id
		WHERE d.workspace_id = $1`, ws).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != 4 {
		t.Errorf("%d versions stored, want exactly the quota, 4", versions)
	}
}

// TestConcurrentDefinitionCreatesLeaveExactlyTheQuota: 50 creates at once
// at the quota's edge (15 of 20 stored, 5 of them deleted) are counted
// under the workspace's lock: exactly 5 are created, the other 45 answer
// 429, and the workspace stores exactly its quota.
func TestConcurrentDefinitionCreatesLeaveExactlyTheQuota(t *testing.T) {
	t.Parallel()
	const quota, before, concurrent = 20, 15, 50
	limits := httpapi.DefaultRequestLimits()
	limits.Tenancy.WorkspaceConcurrency = concurrent // the quota, not the request caps, is under test
	s := harness.NewStackWith(t, domain.DefaultProcessQuotas(), limits)
	s.SetPlanQuotas(t, domain.PlanPro, domain.QuotaOverrides{Definitions: harness.Ptr(quota)})
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.PRO)
	for i := range before {
		d, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: fmt.Sprint("before ", i), Graph: oneNodeGraph})
		status(t, "createDefinition", d, err, http.StatusCreated)
		if i < 5 {
			del, err := c.DeleteDefinitionWithResponse(ctx, d.JSON201.ID)
			status(t, "deleteDefinition", del, err, http.StatusNoContent)
		}
	}
	codes := make([]int, concurrent)
	var wg sync.WaitGroup
	for i := range concurrent {
		wg.Go(func() {
			r, err := c.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: fmt.Sprint("race ", i), Graph: oneNodeGraph})
			if err != nil {
				t.Error(err)
				return
			}
			codes[i] = r.StatusCode()
		})
	}
	wg.Wait()
	created, refused := 0, 0
	for _, code := range codes {
		switch code {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			refused++
		default:
			t.Errorf("a concurrent create answered %d", code)
		}
	}
	var stored int
	if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_definitions WHERE workspace_id = $1", ws).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d concurrent creates at %d of %d: %d created, %d refused, %d stored", concurrent, before, quota, created, refused, stored)
	if created != quota-before || refused != concurrent-(quota-before) || stored != quota {
		t.Errorf("created %d, refused %d, stored %d; want %d, %d and exactly the quota, %d",
			created, refused, stored, quota-before, concurrent-(quota-before), quota)
	}
}

// TestAWorkspacePastItsRequestRateGetsTooManyRequests: a workspace key
// sending faster than its rate meets 429 with Retry-After once its burst
// is spent, and another workspace's key is still served at once.
func TestAWorkspacePastItsRequestRateGetsTooManyRequests(t *testing.T) {
	t.Parallel()
	const burst = 5
	limits := httpapi.DefaultRequestLimits()
	limits.Tenancy.Rate, limits.Tenancy.Burst = 1, burst
	s := harness.NewStackWith(t, domain.DefaultProcessQuotas(), limits)
	ctx := context.Background()
	ws, c := quotaWorkspace(t, s, client.PRO)
	refusedAt := 0
	for i := 1; i <= 3*burst && refusedAt == 0; i++ {
		r, err := c.ListDefinitionsWithResponse(ctx, &client.ListDefinitionsParams{WorkspaceID: ws})
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() == http.StatusTooManyRequests {
			refusedAt = i
			if ra := r.HTTPResponse.Header.Get("Retry-After"); ra == "" {
				t.Error("rate refusal has no Retry-After")
			}
			continue
		}
		status(t, "listDefinitions", r, nil, http.StatusOK)
	}
	// The bucket refills one a second, so the loop may get one more in.
	if refusedAt < burst+1 || refusedAt > burst+2 {
		t.Errorf("first 429 at request %d, want right after the burst of %d", refusedAt, burst)
	}
	other, oc := quotaWorkspace(t, s, client.FREE)
	r, err := oc.ListDefinitionsWithResponse(ctx, &client.ListDefinitionsParams{WorkspaceID: other})
	status(t, "listDefinitions by another workspace", r, err, http.StatusOK)
}
