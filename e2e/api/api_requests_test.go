package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/e2e/harness"
)

// bodyOp sends a raw body to an operation that takes one.
type bodyOp struct {
	name string
	send func(ctx context.Context, c client.ClientInterface, contentType string, body io.Reader) (*http.Response, error)
}

func (w *world) bodyOps() []bodyOp {
	return []bodyOp{
		{"createWorkspace", func(ctx context.Context, c client.ClientInterface, ct string, b io.Reader) (*http.Response, error) {
			return c.CreateWorkspaceWithBody(ctx, ct, b)
		}},
		{"updateWorkspacePlan", func(ctx context.Context, c client.ClientInterface, ct string, b io.Reader) (*http.Response, error) {
			return c.UpdateWorkspacePlanWithBody(ctx, w.wsA, ct, b)
		}},
		{"createAPIKey", func(ctx context.Context, c client.ClientInterface, ct string, b io.Reader) (*http.Response, error) {
			return c.CreateAPIKeyWithBody(ctx, w.wsA, ct, b)
		}},
		{"createDefinition", func(ctx context.Context, c client.ClientInterface, ct string, b io.Reader) (*http.Response, error) {
			return c.CreateDefinitionWithBody(ctx, ct, b)
		}},
		{"createDefinitionVersion", func(ctx context.Context, c client.ClientInterface, ct string, b io.Reader) (*http.Response, error) {
			return c.CreateDefinitionVersionWithBody(ctx, w.defA, ct, b)
		}},
		{"startExecution", func(ctx context.Context, c client.ClientInterface, ct string, b io.Reader) (*http.Response, error) {
			return c.EnqueueExecutionWithBody(ctx, nil, ct, b)
		}},
	}
}

// TestNegativeMalformedBodies: malformed JSON, wrong types, unknown
// fields and missing required fields get a 400 that names each field, and
// nothing is written.
func TestNegativeMalformedBodies(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	admin := w.Client(t, harness.AdminToken)
	ws, def := w.wsA.String(), w.defA.String()
	graph := `{"nodes":[{"key":"greet","type":"TRANSFORM","config":{"output":{"m":"hi"}}}],"edges":[]}`
	type bad struct {
		body  string
		paths []string // each must be among the problem's field paths
	}
	cases := map[string]map[string]bad{
		"createWorkspace": {
			"malformed JSON":   {`{"name": "x", "plan": `, nil},
			"not an object":    {`["x"]`, nil},
			"null":             {`null`, nil},
			"empty":            {``, nil},
			"wrong type":       {`{"name": 5, "plan": "PRO"}`, []string{"/name"}},
			"unknown plan":     {`{"name": "x", "plan": "GOLD"}`, []string{"/plan"}},
			"unknown field":    {`{"name": "x", "plan": "PRO", "owner": "me"}`, []string{"/owner"}},
			"missing required": {`{"plan": "PRO"}`, []string{"/name"}},
			"empty name":       {`{"name": "", "plan": "PRO"}`, []string{"/name"}},
			"name too long":    {`{"name": "` + strings.Repeat("n", 201) + `", "plan": "PRO"}`, []string{"/name"}},
			"every problem":    {`{"name": 5, "plan": "GOLD", "owner": "me"}`, []string{"/name", "/plan", "/owner"}},
			"NUL in name":      {`{"name": "a\u0000b", "plan": "PRO"}`, []string{"/name"}},
			"trailing data":    {`{"name": "x", "plan": "PRO"} {"name": "y", "plan": "FREE"}`, []string{"/"}},
		},
		"updateWorkspacePlan": {
			"malformed JSON":   {`{"plan"`, nil},
			"wrong type":       {`{"plan": 3}`, []string{"/plan"}},
			"unknown field":    {`{"plan": "PRO", "limit": 100}`, []string{"/limit"}},
			"missing required": {`{}`, []string{"/plan"}},
		},
		"createAPIKey": {
			"malformed JSON":   {`{"name": "k",}`, nil},
			"wrong type":       {`{"name": ["k"]}`, []string{"/name"}},
			"unknown field":    {`{"name": "k", "secret": "mine"}`, []string{"/secret"}},
			"missing required": {`{}`, []string{"/name"}},
			"NUL in name":      {`{"name": "\u0000"}`, []string{"/name"}},
		},
		"createDefinition": {
			"malformed JSON":     {`{"workspaceId": "` + ws + `", "name": "d", "graph": {"nodes": [}`, nil},
			"wrong type":         {`{"workspaceId": "` + ws + `", "name": "d", "graph": {"nodes": "greet"}}`, []string{"/graph/nodes"}},
			"workspace not uuid": {`{"workspaceId": "acme", "name": "d", "graph": ` + graph + `}`, []string{"/workspaceId"}},
			"node wrong type":    {`{"workspaceId": "` + ws + `", "name": "d", "graph": {"nodes": [{"key": 1, "type": "TRANSFORM"}]}}`, []string{"/graph/nodes/0/key"}},
			"config not object":  {`{"workspaceId": "` + ws + `", "name": "d", "graph": {"nodes": [{"key": "a", "type": "TRANSFORM", "config": 7}]}}`, []string{"/graph/nodes/0/config"}},
			"edge missing to":    {`{"workspaceId": "` + ws + `", "name": "d", "graph": {"nodes": [], "edges": [{"from": "a"}]}}`, []string{"/graph/edges/0/to"}},
			"unknown field":      {`{"workspaceId": "` + ws + `", "name": "d", "graph": ` + graph + `, "version": 3}`, []string{"/version"}},
			"missing required":   {`{"workspaceId": "` + ws + `", "graph": ` + graph + `}`, []string{"/name"}},
			"missing graph":      {`{"workspaceId": "` + ws + `", "name": "d"}`, []string{"/graph"}},
			"NUL in name":        {`{"workspaceId": "` + ws + `", "name": "d\u0000", "graph": ` + graph + `}`, []string{"/name"}},
			"NUL in config":      {`{"workspaceId": "` + ws + `", "name": "d", "graph": {"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": {"m\u0000": "\u0000"}}}]}}`, []string{"/graph/nodes/0/config/output/m\u0000"}},
		},
		"createDefinitionVersion": {
			"malformed JSON":   {`{"graph": ` + graph, nil},
			"wrong type":       {`{"graph": []}`, []string{"/graph"}},
			"unknown field":    {`{"graph": ` + graph + `, "version": 9}`, []string{"/version"}},
			"missing required": {`{}`, []string{"/graph"}},
			"NUL in config":    {`{"graph": {"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": "\u0000"}}]}}`, []string{"/graph/nodes/0/config/output"}},
		},
		"startExecution": {
			"malformed JSON":      {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `"`, nil},
			"wrong type":          {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "priority": "high"}`, []string{"/priority"}},
			"priority range":      {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "priority": 9}`, []string{"/priority"}},
			"input not object":    {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "input": "Ada"}`, []string{"/input"}},
			"definition not uuid": {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "greet"}`, []string{"/workflowDefinitionId"}},
			"unknown field":       {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "delay": 5}`, []string{"/delay"}},
			"missing required":    {`{"workspaceId": "` + ws + `"}`, []string{"/workflowDefinitionId"}},
			"NUL in input":        {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "input": {"name": ["Ada\u0000"]}}`, []string{"/input/name/0"}},
			"integer as 2.0":      {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "priority": 2.0}`, []string{"/priority"}},
			"invalid UTF-8":       {"{\"workspaceId\": \"" + ws + "\", \"workflowDefinitionId\": \"" + def + "\", \"input\": {\"name\": \"Ad\xffa\"}}", []string{"/input/name"}},
			"nested too deep":     {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "input": ` + strings.Repeat(`{"a":`, 80) + "1" + strings.Repeat("}", 80) + `}`, []string{"/input/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a"}},
			"number out of range": {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `", "input": {"n": 1e400}}`, []string{"/input/n"}},
			"trailing data":       {`{"workspaceId": "` + ws + `", "workflowDefinitionId": "` + def + `"}]`, []string{"/"}},
		},
	}
	before := counts(t, w)
	for _, o := range w.bodyOps() {
		for name, c := range cases[o.name] {
			what := o.name + ": " + name
			got := read(o.send(ctx, admin, "application/json", strings.NewReader(c.body)))
			got.Expect(t, what, http.StatusBadRequest, "invalid-request")
			paths := got.FieldPaths()
			for _, p := range c.paths {
				if !slices.Contains(paths, p) {
					t.Errorf("%s: field paths %v lack %s; body: %s", what, paths, p, got.Body)
				}
			}
			if got.Status == http.StatusBadRequest && len(paths) == 0 {
				t.Errorf("%s: a 400 without field paths: %s", what, got.Body)
			}
		}
		// A body that is not JSON at all.
		got := read(o.send(ctx, admin, "text/plain", strings.NewReader("hello")))
		got.Expect(t, o.name+": text/plain", http.StatusBadRequest, "invalid-request")
	}
	// A malformed Content-Type parameter does not skip the body's checks.
	start := w.bodyOps()[5]
	got := read(start.send(ctx, admin, "application/json; charset", strings.NewReader(cases["startExecution"]["NUL in input"].body)))
	got.Expect(t, "startExecution: malformed Content-Type parameter", http.StatusBadRequest, "invalid-request")
	if paths := got.FieldPaths(); !slices.Contains(paths, "/input/name/0") {
		t.Errorf("malformed Content-Type parameter: field paths %v lack /input/name/0; body: %s", paths, got.Body)
	}
	if after := counts(t, w); after != before {
		t.Errorf("malformed requests wrote rows: before %v, after %v", before, after)
	}
}

// TestNegativeMalformedParameters: bad path, query and header parameters
// get a 400 that names the parameter.
func TestNegativeMalformedParameters(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	admin := w.Client(t, harness.AdminToken)
	hc := w.HTTPClient(t)
	get := func(path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+harness.AdminToken)
		return hc.Do(req)
	}
	ws := w.wsA.String()
	cases := map[string]struct {
		call func() (*http.Response, error)
		path string
	}{
		"workspace id not a uuid":  {func() (*http.Response, error) { return get("/api/v1/workspaces/acme") }, "/path/workspaceId"},
		"definition id not a uuid": {func() (*http.Response, error) { return get("/api/v1/workflow/definitions/greet") }, "/path/definitionId"},
		"version not a number": {func() (*http.Response, error) {
			return get("/api/v1/workflow/definitions/" + w.defA.String() + "/versions/one")
		}, "/path/version"},
		"version beyond int64": {func() (*http.Response, error) {
			return get("/api/v1/workflow/definitions/" + w.defA.String() + "/versions/99999999999999999999")
		}, "/path/version"},
		"version zero":              {func() (*http.Response, error) { return admin.GetDefinitionVersion(ctx, w.defA, 0) }, "/path/version"},
		"queue id not a uuid":       {func() (*http.Response, error) { return get("/api/v1/workflow/queue/42") }, "/path/queueId"},
		"execution id not a uuid":   {func() (*http.Response, error) { return get("/api/v1/workflow/executions/42") }, "/path/executionId"},
		"list without workspace":    {func() (*http.Response, error) { return get("/api/v1/workflow/queue") }, "/query/workspaceId"},
		"list workspace not a uuid": {func() (*http.Response, error) { return get("/api/v1/workflow/executions?workspaceId=acme") }, "/query/workspaceId"},
		"limit zero": {func() (*http.Response, error) {
			return admin.ListWorkspaces(ctx, &client.ListWorkspacesParams{Limit: harness.Ptr(0)})
		}, "/query/limit"},
		"limit too large": {func() (*http.Response, error) {
			return admin.ListDefinitions(ctx, &client.ListDefinitionsParams{WorkspaceID: w.wsA, Limit: harness.Ptr(201)})
		}, "/query/limit"},
		"limit not a number": {func() (*http.Response, error) { return get("/api/v1/workflow/queue?workspaceId=" + ws + "&limit=ten") }, "/query/limit"},
		"unknown queue status": {func() (*http.Response, error) {
			return get("/api/v1/workflow/queue?workspaceId=" + ws + "&status=DONE")
		}, "/query/status"},
		"unknown execution status": {func() (*http.Response, error) {
			return get("/api/v1/workflow/executions?workspaceId=" + ws + "&status=DONE")
		}, "/query/status"},
		"cursor too long": {func() (*http.Response, error) { return get("/api/v1/workspaces?cursor=" + strings.Repeat("c", 201)) }, "/query/cursor"},
		"idempotency key too long": {func() (*http.Response, error) {
			return admin.EnqueueExecution(ctx, &client.EnqueueExecutionParams{IdempotencyKey: harness.Ptr(strings.Repeat("k", 256))},
				client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA})
		}, "/header/Idempotency-Key"},
		"idempotency key not UTF-8": {func() (*http.Response, error) {
			return admin.EnqueueExecution(ctx, &client.EnqueueExecutionParams{IdempotencyKey: harness.Ptr("order-\xff")},
				client.EnqueueExecutionRequest{WorkspaceID: w.wsA, WorkflowDefinitionID: w.defA})
		}, "/header/Idempotency-Key"},
	}
	for name, c := range cases {
		got := read(c.call())
		got.Expect(t, name, http.StatusBadRequest, "invalid-request")
		if !slices.Contains(got.FieldPaths(), c.path) {
			t.Errorf("%s: field paths %v lack %s; body: %s", name, got.FieldPaths(), c.path, got.Body)
		}
	}

	// Cursors the API never returned are refused, never a 500.
	// Ones that decode but name a time no execution can have (pgx would
	// wrap the far past around into the present) too.
	badCursors := []string{
		"not-a-cursor", "!!!", uuid.NewString(), b64("x." + uuid.NewString()), b64("12." + "nope"),
		b64("9223372036854775807." + uuid.NewString()), b64("-9223372036854775808." + uuid.NewString()),
	}
	for _, cur := range badCursors {
		got := read(admin.ListExecutions(ctx, &client.ListExecutionsParams{WorkspaceID: w.wsB, Cursor: harness.Ptr(cur)}))
		got.Expect(t, "listExecutions with cursor "+cur, http.StatusBadRequest, "invalid-request")
		if !slices.Equal(got.FieldPaths(), []string{"/query/cursor"}) {
			t.Errorf("listExecutions with cursor %s: field paths %v", cur, got.FieldPaths())
		}
	}
	// A queue cursor is priority, time and id; one whose priority or time
	// no item can have is refused too.
	for _, cur := range []string{"not-a-cursor", b64("12." + uuid.NewString()), b64("70000.1." + uuid.NewString()),
		b64("1.9223372036854775807." + uuid.NewString()), b64("x.1." + uuid.NewString()), b64("1.1.nope")} {
		got := read(admin.ListQueue(ctx, &client.ListQueueParams{WorkspaceID: w.wsA, Cursor: harness.Ptr(cur)}))
		got.Expect(t, "listQueue with cursor "+cur, http.StatusBadRequest, "invalid-request")
		if !slices.Equal(got.FieldPaths(), []string{"/query/cursor"}) {
			t.Errorf("listQueue with cursor %s: field paths %v", cur, got.FieldPaths())
		}
	}
	for _, cur := range []string{"not-a-cursor", b64("12." + uuid.NewString())} {
		read(admin.ListWorkspaces(ctx, &client.ListWorkspacesParams{Cursor: harness.Ptr(cur)})).
			Expect(t, "listWorkspaces with cursor "+cur, http.StatusBadRequest, "invalid-request")
		read(admin.ListDefinitions(ctx, &client.ListDefinitionsParams{WorkspaceID: w.wsA, Cursor: harness.Ptr(cur)})).
			Expect(t, "listDefinitions with cursor "+cur, http.StatusBadRequest, "invalid-request")
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestNegativeTooLarge: a body over 1 MiB gets a 413 on every operation
// that takes one, whether its length is declared or it comes chunked.
func TestNegativeTooLarge(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	admin := w.Client(t, harness.AdminToken)
	// A valid-looking JSON document just over the limit.
	big := `{"name": "` + strings.Repeat("x", 1<<20) + `"}`
	before := counts(t, w)
	for _, o := range w.bodyOps() {
		read(o.send(ctx, admin, "application/json", strings.NewReader(big))).
			Expect(t, o.name+" with Content-Length", http.StatusRequestEntityTooLarge, "too-large")
		// Hiding the length makes the client send it chunked.
		read(o.send(ctx, admin, "application/json", io.MultiReader(strings.NewReader(big)))).
			Expect(t, o.name+" chunked", http.StatusRequestEntityTooLarge, "too-large")
	}
	// A start whose input alone passes the limit.
	input := `{"workspaceId": "` + w.wsA.String() + `", "workflowDefinitionId": "` + w.defA.String() + `", "input": {"blob": "` + strings.Repeat("b", 1<<20) + `"}}`
	read(admin.EnqueueExecutionWithBody(ctx, nil, "application/json", io.MultiReader(bytes.NewReader([]byte(input))))).
		Expect(t, "startExecution with a large input", http.StatusRequestEntityTooLarge, "too-large")
	if after := counts(t, w); after != before {
		t.Errorf("oversized requests wrote rows: before %v, after %v", before, after)
	}
}

// TestNegativeInvalidGraph: a graph with a cycle, an unknown node type and
// an edge to a missing node gets one 422 listing every problem with its
// path, on create and on a new version, and nothing is written.
func TestNegativeInvalidGraph(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	read := harness.Reader(t)
	a := w.Client(t, w.keyA.Secret)
	graph := client.Graph(`{"nodes":[
		{"key":"a","type":"TRANSFORM","config":{"output":{"ok":true}}},
		{"key":"b","type":"TRANSFORM","config":{"output":{"ok":true}}},
		{"key":"c","type":"TELEPORT"}
	],"edges":[{"from":"a","to":"b"},{"from":"b","to":"a"},{"from":"a","to":"ghost"}]}`)
	want := []string{"/graph/nodes/2/type", "/graph/edges/2/to", "/graph/edges/1"}
	before := counts(t, w)
	for name, call := range map[string]func() (*http.Response, error){
		"createDefinition": func() (*http.Response, error) {
			return a.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "broken", Graph: graph})
		},
		"createDefinitionVersion": func() (*http.Response, error) {
			return a.CreateDefinitionVersion(ctx, w.defA, client.CreateVersionRequest{Graph: graph})
		},
	} {
		got := read(call())
		got.Expect(t, name, http.StatusUnprocessableEntity, "invalid-graph")
		paths := got.FieldPaths()
		slices.Sort(paths)
		sorted := slices.Sorted(slices.Values(want))
		if !slices.Equal(paths, sorted) {
			t.Errorf("%s: problems at %v, want %v; body: %s", name, paths, sorted, got.Body)
		}
		for _, e := range got.Problem.Errors {
			if e.Message == "" {
				t.Errorf("%s: problem at %s has no message", name, e.Path)
			}
		}
		if got.Problem.Detail != "3 problems" {
			t.Errorf("%s: detail %q", name, got.Problem.Detail)
		}
	}
	// Hosts other resolvers read as IPv4 addresses are refused at save time.
	for _, host := range []string{"127.1", "2130706433", "0x7f000001"} {
		g := client.Graph(`{"nodes":[{"key":"call","type":"HTTP_REQUEST","config":{"url":"http://` + host + `/admin"}}],"edges":[]}`)
		got := read(a.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: w.wsA, Name: "disguised", Graph: g}))
		got.Expect(t, "createDefinition with host "+host, http.StatusUnprocessableEntity, "invalid-graph")
		if paths := got.FieldPaths(); !slices.Contains(paths, "/graph/nodes/0/config/url") {
			t.Errorf("host %s: problems at %v, want /graph/nodes/0/config/url; body: %s", host, paths, got.Body)
		}
	}
	if after := counts(t, w); after != before {
		t.Errorf("invalid graphs wrote rows: before %v, after %v", before, after)
	}
}

// rowCounts is how many rows the tables the API writes hold.
type rowCounts struct{ workspaces, keys, definitions, versions, queue, activity, idempotency int }

func counts(t *testing.T, w *world) rowCounts {
	t.Helper()
	var c rowCounts
	err := w.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM workspaces), (SELECT count(*) FROM api_keys),
		(SELECT count(*) FROM workflow_definitions WHERE deleted_at IS NULL), (SELECT count(*) FROM workflow_definition_versions),
		(SELECT count(*) FROM workflow_execution_queue), (SELECT count(*) FROM activity), (SELECT count(*) FROM idempotency_keys)`).
		Scan(&c.workspaces, &c.keys, &c.definitions, &c.versions, &c.queue, &c.activity, &c.idempotency)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNegativeGraphMembersAreExact: the graph reaches the domain's strict
// decoder as the bytes the client sent, so a misspelt, repeated or wrongly
// cased member is one 422 naming it, on create and on a new version, and
// nothing is stored. Decoded into generated structs first, these were
// dropped ("edge"), merged (the last "nodes" won) or matched without case
// ("Edges"), and the definition was stored.
func TestNegativeGraphMembersAreExact(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	read := harness.Reader(t)
	admin := s.Client(t, harness.AdminToken)
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "exact", Plan: client.PRO})
	status(t, "createWorkspace", cw, err, http.StatusCreated)
	ws := cw.JSON201.ID
	cd, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "greet", Graph: greetGraph()})
	status(t, "createDefinition", cd, err, http.StatusCreated)

	const node = `{"key":"a","type":"TRANSFORM","config":{"output":1}}`
	for _, tc := range []struct{ name, graph, path string }{
		{"edge for edges", `{"nodes":[` + node + `],"edge":[{"from":"a","to":"a"}]}`, "/graph/edge"},
		{"Edges for edges", `{"nodes":[` + node + `],"Edges":[]}`, "/graph/Edges"},
		{"Config for config", `{"nodes":[{"key":"a","type":"TRANSFORM","Config":{"output":1}}],"edges":[]}`, "/graph/nodes/0/Config"},
		{"nodes twice", `{"nodes":[` + node + `],"edges":[],"nodes":[]}`, "/graph"},
		{"key twice", `{"nodes":[{"key":"a","type":"TRANSFORM","key":"b","config":{"output":1}}],"edges":[]}`, "/graph/nodes/0"},
		{"config member twice", `{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1,"output":2}}],"edges":[]}`, "/graph/nodes/0/config"},
	} {
		for op, call := range map[string]func() (*http.Response, error){
			"createDefinition": func() (*http.Response, error) {
				return admin.CreateDefinition(ctx, client.CreateDefinitionRequest{WorkspaceID: ws, Name: "exact", Graph: client.Graph(tc.graph)})
			},
			"createDefinitionVersion": func() (*http.Response, error) {
				return admin.CreateDefinitionVersion(ctx, cd.JSON201.ID, client.CreateVersionRequest{Graph: client.Graph(tc.graph)})
			},
		} {
			got := read(call())
			got.Expect(t, op+", "+tc.name, http.StatusUnprocessableEntity, "invalid-graph")
			if paths := got.FieldPaths(); !slices.Equal(paths, []string{tc.path}) {
				t.Errorf("%s, %s: problems at %v, want [%s]; body: %s", op, tc.name, paths, tc.path, got.Body)
			}
		}
	}
	ld, err := admin.ListDefinitionsWithResponse(ctx, &client.ListDefinitionsParams{WorkspaceID: ws})
	status(t, "listDefinitions", ld, err, http.StatusOK)
	gd, err := admin.GetDefinitionWithResponse(ctx, cd.JSON201.ID)
	status(t, "getDefinition", gd, err, http.StatusOK)
	if len(ld.JSON200.Items) != 1 || gd.JSON200.CurrentVersion != 1 {
		t.Errorf("refused graphs were stored: %d definitions, current version %d", len(ld.JSON200.Items), gd.JSON200.CurrentVersion)
	}
}

// TestDefinitionConfigNumbersKeepEveryDigit: a 20-digit integer in a node
// config, past float64's 2^53, comes back from every read of the
// definition with the digits it was sent with. Through generated structs
// it came back as 12345678901234567000.
func TestDefinitionConfigNumbersKeepEveryDigit(t *testing.T) {
	t.Parallel()
	s := harness.NewStack(t)
	ctx := context.Background()
	admin := s.Client(t, harness.AdminToken)
	cw, err := admin.CreateWorkspaceWithResponse(ctx, client.CreateWorkspaceRequest{Name: "digits", Plan: client.PRO})
	status(t, "createWorkspace", cw, err, http.StatusCreated)
	const digits = "12345678901234567890"
	graph := client.Graph(`{"nodes":[{"key":"a","type":"TRANSFORM","config":{"output":{"id":` + digits + `}}}],"edges":[]}`)
	cd, err := admin.CreateDefinitionWithResponse(ctx, client.CreateDefinitionRequest{WorkspaceID: cw.JSON201.ID, Name: "digits", Graph: graph})
	status(t, "createDefinition", cd, err, http.StatusCreated)
	def := cd.JSON201.ID
	cv, err := admin.CreateDefinitionVersionWithResponse(ctx, def, client.CreateVersionRequest{Graph: graph})
	status(t, "createDefinitionVersion", cv, err, http.StatusCreated)
	gd, err := admin.GetDefinitionWithResponse(ctx, def)
	status(t, "getDefinition", gd, err, http.StatusOK)
	gv, err := admin.GetDefinitionVersionWithResponse(ctx, def, 1)
	status(t, "getDefinitionVersion", gv, err, http.StatusOK)
	ld, err := admin.ListDefinitionsWithResponse(ctx, &client.ListDefinitionsParams{WorkspaceID: cw.JSON201.ID})
	status(t, "listDefinitions", ld, err, http.StatusOK)
	for what, body := range map[string][]byte{
		"createDefinition": cd.Body, "createDefinitionVersion": cv.Body, "getDefinition": gd.Body,
		"getDefinitionVersion": gv.Body, "listDefinitions": ld.Body,
	} {
		if !bytes.Contains(body, []byte(`"id":`+digits)) {
			t.Errorf("%s lost digits of %s: %s", what, digits, body)
		}
	}
}
