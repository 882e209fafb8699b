package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/domain"
)

// TestQuotasRefuseWithTooManyRequests: past a workspace's pending-items,
// definitions or graph-size quota the answer is a 429 problem naming the
// quota (with Retry-After where waiting helps), nothing is written, and
// another workspace on another plan is not affected.
func TestQuotasRefuseWithTooManyRequests(t *testing.T) {
	t.Parallel()
	s := newStackWithQuotas(t, domain.Quotas{
		PendingItems:  map[domain.Plan]int{domain.PlanFree: 2, domain.PlanPro: 100},
		Definitions:   map[domain.Plan]int{domain.PlanFree: 1, domain.PlanPro: 100},
		NodesPerGraph: 2,
	})
	ctx := context.Background()
	admin := s.client(t, adminToken)
	wsResp, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "quota", Plan: client.FREE})
	status(t, "ws", wsResp, err, http.StatusCreated)
	ws := wsResp.JSON201
	keyResp, err := admin.CreateAPIKeyWithResponse(ctx, ws.ID, client.CreateAPIKeyRequest{Name: "k"})
	status(t, "key", keyResp, err, http.StatusCreated)
	key := keyResp.JSON201
	c := s.client(t, key.Secret)

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
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE workspace_id = $1", ws.ID).Scan(&pending); err != nil {
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
	pc := s.client(t, proKey.Secret)
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
	quotas := domain.DefaultQuotas()
	quotas.NodesPerGraph = quota
	s := newStackWithQuotas(t, quotas)
	ctx := context.Background()
	admin := s.client(t, adminToken)
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
