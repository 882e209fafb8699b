package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/ports/porttest"
)

const testAdminToken = "e2e-admin-token-0123456789"

// testWebhookSecretKey is SLUICE_WEBHOOK_SECRET_KEY in the tests: 32
// bytes in base64.
const testWebhookSecretKey = "c2x1aWNlLWUyZS13ZWJob29rLXNlY3JldC1rZXktMzI="

// startSluice runs `sluice all` in-process against a fresh database on the
// real Postgres and the real Temporal server of the test stack, on its own
// task queues, and returns its base URL.
func startSluice(t testing.TB, extra map[string]string) string {
	t.Helper()
	return startSluiceWith(t, extra)
}

// startSluiceWith is startSluice with extra fx options, such as a decorator
// that replaces a component.
func startSluiceWith(t testing.TB, extra map[string]string, opts ...fx.Option) string {
	t.Helper()
	dbURL := extra["DATABASE_URL"]
	if dbURL == "" {
		dbURL = pgtest.URL(t)
	}
	temporalAddr := temporalAddress(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	env := map[string]string{
		"DATABASE_URL":                  dbURL,
		"TEMPORAL_ADDRESS":              temporalAddr,
		"TEMPORAL_TASK_QUEUE_PREFIX":    "t" + uuid.NewString()[:8] + ".",
		"SLUICE_HTTP_ADDR":              addr,
		"SLUICE_ADMIN_ADDR":             "127.0.0.1:0",
		"SLUICE_ADMIN_TOKEN":            testAdminToken,
		"SLUICE_WEBHOOK_SECRET_KEY":     testWebhookSecretKey,
		"SLUICE_LOG_LEVEL":              "warn",
		"SLUICE_DISPATCH_POLL_INTERVAL": "1s",
		// The tests' HTTP servers listen on loopback, which the binary's
		// default refuses.
		"SLUICE_HTTP_NODE_ALLOW": "127.0.0.0/8,::1/128",
	}
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		env["SLUICE_LOG_LEVEL"] = "debug"
	}
	for k, v := range extra {
		env[k] = v
	}
	cfg, err := LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true)
	if err != nil {
		t.Fatal(err)
	}
	app := fx.New(append([]fx.Option{commonModule, apiModule, dispatcherModule, workerModule, fx.Supply(cfg), fx.NopLogger}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = app.Stop(ctx)
	})
	appsByBase["http://"+addr] = runningApp{app: app, dbURL: dbURL}
	return "http://" + addr
}

// call sends a JSON request and decodes a JSON answer into out.
func call(t testing.TB, method, url, token string, body any, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decoding %d answer: %v", method, url, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// executionOf follows a queue item to its execution. A run can complete,
// and its item be deleted, before the first look, so a gone item's
// execution is found by the queue id it keeps.
func executionOf(t testing.TB, base, workspaceID, queueID string) string {
	t.Helper()
	var executionID string
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the queue item to name its execution", func() bool {
		var q map[string]any
		switch call(t, "GET", base+"/api/v1/workflow/queue/"+queueID, testAdminToken, nil, &q) {
		case 200:
			if id, ok := q["executionId"].(string); ok && q["status"] != "PENDING" && q["status"] != "CLAIMED" {
				executionID = id
				return true
			}
		case 404:
			var page struct {
				Items []struct{ ID string } `json:"items"`
			}
			call(t, "GET", base+"/api/v1/workflow/executions?workspaceId="+workspaceID+"&queueId="+queueID, testAdminToken, nil, &page)
			if len(page.Items) == 1 {
				executionID = page.Items[0].ID
				return true
			}
		}
		return false
	}))
	return executionID
}

func TestSkeletonRunsAnExecutionToCompletion(t *testing.T) {
	base := startSluice(t, nil)

	var ws struct{ ID string }
	if code := call(t, "POST", base+"/api/v1/workspaces", testAdminToken, map[string]any{"name": "Acme", "plan": "FREE"}, &ws); code != 201 {
		t.Fatalf("create workspace: %d", code)
	}
	var def struct{ ID string }
	graph := map[string]any{
		"nodes": []any{map[string]any{"key": "greet", "type": "TRANSFORM",
			"config": map[string]any{"output": map[string]any{"message": "Hello, {{ input.name }}", "n": "{{ input.n }}"}}}},
		"edges": []any{},
	}
	if code := call(t, "POST", base+"/api/v1/workflow/definitions", testAdminToken,
		map[string]any{"workspaceId": ws.ID, "name": "greet", "graph": graph}, &def); code != 201 {
		t.Fatalf("create definition: %d", code)
	}
	var started struct {
		QueueID string `json:"queueId"`
		Status  string `json:"status"`
	}
	if code := call(t, "POST", base+"/api/v1/workflow/executions/start", testAdminToken,
		map[string]any{"workspaceId": ws.ID, "workflowDefinitionId": def.ID, "input": map[string]any{"name": "Ada", "n": 7}}, &started); code != 202 {
		t.Fatalf("start: %d", code)
	}
	if started.Status != "PENDING" {
		t.Fatalf("a new queue item is %s, want PENDING", started.Status)
	}

	executionID := executionOf(t, base, ws.ID, started.QueueID)
	type node struct {
		Key    string         `json:"key"`
		Status string         `json:"status"`
		Output map[string]any `json:"output"`
	}
	var exec struct {
		Status     string `json:"status"`
		DurationMs *int64 `json:"durationMs"`
		Nodes      []node `json:"nodes"`
	}
	porttest.Eventually(t, 60*time.Second, porttest.Holds("the execution to complete", func() bool {
		call(t, "GET", base+"/api/v1/workflow/executions/"+executionID, testAdminToken, nil, &exec)
		return exec.Status == "COMPLETED"
	}))
	if exec.DurationMs == nil {
		t.Error("a completed execution has no duration")
	}
	if len(exec.Nodes) != 1 || exec.Nodes[0].Key != "greet" || exec.Nodes[0].Status != "COMPLETED" {
		t.Fatalf("node records = %+v, want greet COMPLETED", exec.Nodes)
	}
	if got := fmt.Sprint(exec.Nodes[0].Output); got != "map[message:Hello, Ada n:7]" {
		t.Errorf("greet output = %s", got)
	}
	var problem map[string]any
	if code := call(t, "GET", base+"/api/v1/workflow/queue/"+started.QueueID, testAdminToken, nil, &problem); code != 404 {
		t.Errorf("queue item after completion: status %d, want 404 (deleted)", code)
	}
}

func TestStartRefusesUnknownAndForeignDefinitions(t *testing.T) {
	base := startSluice(t, map[string]string{"SLUICE_DISPATCH_ENABLED": "false"})
	var a, b struct{ ID string }
	call(t, "POST", base+"/api/v1/workspaces", testAdminToken, map[string]any{"name": "A", "plan": "FREE"}, &a)
	call(t, "POST", base+"/api/v1/workspaces", testAdminToken, map[string]any{"name": "B", "plan": "FREE"}, &b)
	var def struct{ ID string }
	call(t, "POST", base+"/api/v1/workflow/definitions", testAdminToken,
		map[string]any{"workspaceId": b.ID, "name": "x", "graph": map[string]any{"nodes": []any{}}}, &def)

	var problem struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	code := call(t, "POST", base+"/api/v1/workflow/executions/start", testAdminToken,
		map[string]any{"workspaceId": a.ID, "workflowDefinitionId": uuid.NewString()}, &problem)
	if code != 404 || problem.Status != 404 {
		t.Errorf("unknown definition: %d %+v, want 404", code, problem)
	}
	code = call(t, "POST", base+"/api/v1/workflow/executions/start", testAdminToken,
		map[string]any{"workspaceId": a.ID, "workflowDefinitionId": def.ID}, &problem)
	if code != 403 || problem.Type != "https://sluice.dev/problems/forbidden" {
		t.Errorf("another workspace's definition: %d %+v, want 403 forbidden", code, problem)
	}
}
