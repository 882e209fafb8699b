package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/app/worker"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// testRetry retries nodes quickly; the test clock skips the backoff anyway,
// but short intervals keep the recorded histories small and readable.
var testRetry = RetryConfig{
	InitialInterval:      100 * time.Millisecond,
	BackoffCoefficient:   2,
	MaximumInterval:      time.Second,
	MaximumAttempts:      3,
	ExternalAPITaskQueue: ExternalAPITaskQueue,
}

// harness runs one execution's workflow in the SDK's test environment,
// with the real activities over an in-memory store and the fake node
// executors of executors_test.go.
type harness struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	store  *memStore
	execID domain.ID
	in     ExecutionInput
	// wf and acts are registered; tests may set their limits before run.
	wf   *Workflows
	acts *Activities

	mu sync.Mutex
	// ran lists the nodes RunNode was started for, in order, with the
	// task queue each attempt ran on.
	ran []ranNode
	// inputs are the inputs of those activities.
	inputs []RunNodeInput
}

type ranNode struct {
	Key       string
	TaskQueue string
}

// newHarness stores graph (JSON, decoded but not validated, so that an
// invalid graph reaches the workflow) as version 1 of a definition, with a
// RUNNING execution of it.
func newHarness(t *testing.T, graph string) *harness {
	t.Helper()
	return newHarnessWith(t, graph, fakeExecutors())
}

// newHarnessWith is newHarness with the given node executors.
func newHarnessWith(t *testing.T, graph string, executors []ports.NodeExecutor) *harness {
	t.Helper()
	g, err := domain.DecodeGraph([]byte(graph))
	if err != nil {
		t.Fatalf("decoding graph: %v", err)
	}
	h := &harness{t: t, store: newMemStore(), execID: domain.ID(uuid.New())}
	defID := domain.ID(uuid.New())
	h.store.addRun(defID, h.execID, 1, g)
	h.in = ExecutionInput{ExecutionID: h.execID.String(), WorkspaceID: uuid.NewString(), DefinitionID: defID.String(), Version: 1,
		Plan: domain.PlanFree, Graph: json.RawMessage(graph)}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(discardLogger{})
	h.env = suite.NewTestWorkflowEnvironment()
	h.wf = &Workflows{Retry: testRetry}
	registerWorkflow(h.env, h.wf)
	h.env.SetTestTimeout(30 * time.Second)
	h.acts = NewActivities(worker.NewRuns(h.store, slog.New(slog.DiscardHandler), worker.WithDefinitions(h.store),
		worker.WithAllowLists(h.store, NewTaskQueues("").Reserved())), executors)
	registerActivities(h.env, h.acts)
	h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: WorkflowID(h.execID)})
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != runNodeActivity {
			return
		}
		var in RunNodeInput
		if err := args.Get(&in); err != nil {
			t.Errorf("decoding RunNode input: %v", err)
			return
		}
		h.ran1(in, info.TaskQueue)
	})
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		if info.ActivityType.Name != runPureNodeActivity || len(args) != 1 {
			return
		}
		if in, ok := args[0].(RunNodeInput); ok {
			h.ran1(in, "local")
		}
	})
	return h
}

// ran1 notes that a node's activity started.
func (h *harness) ran1(in RunNodeInput, queue string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ran = append(h.ran, ranNode{Key: in.Node.Key, TaskQueue: queue})
	h.inputs = append(h.inputs, in)
}

// withoutGraph makes the workflow load its graph, as when the input could
// not carry it.
func (h *harness) withoutGraph() *harness {
	h.in.Graph = nil
	return h
}

// withInput sets the execution's input.
func (h *harness) withInput(input string) *harness {
	h.in.Input = json.RawMessage(input)
	return h
}

// run executes the workflow to its end and returns its result and error.
func (h *harness) run() (ExecutionResult, error) {
	h.t.Helper()
	h.env.ExecuteWorkflow(ExecutionWorkflowName, h.in)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("workflow did not complete")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		return ExecutionResult{}, err
	}
	var res ExecutionResult
	if err := h.env.GetWorkflowResult(&res); err != nil {
		h.t.Fatalf("workflow result: %v", err)
	}
	return res, nil
}

// mustRun runs the workflow and fails the test on a workflow error.
func (h *harness) mustRun() ExecutionResult {
	h.t.Helper()
	res, err := h.run()
	if err != nil {
		h.t.Fatalf("workflow error: %v", err)
	}
	return res
}

// ranKeys lists the nodes RunNode was started for, one entry per attempt.
func (h *harness) ranKeys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, len(h.ran))
	for i, r := range h.ran {
		keys[i] = r.Key
	}
	return keys
}

// wantStatuses checks the recorded status of every node, and that no other
// node has a record.
func (h *harness) wantStatuses(want map[string]domain.NodeStatus) {
	h.t.Helper()
	if got := h.store.statuses(h.execID); !reflect.DeepEqual(got, want) {
		h.t.Errorf("node statuses = %v, want %v", got, want)
	}
}

// wantCompletion checks that CompleteExecution was called exactly once,
// with status and error.
func (h *harness) wantCompletion(status domain.ExecutionStatus, errMsg string) {
	h.t.Helper()
	want := []completion{{ID: h.execID, Status: status, Error: errMsg}}
	if got := h.store.finished(); !reflect.DeepEqual(got, want) {
		h.t.Errorf("completions = %+v, want %+v", got, want)
	}
}

// record returns a node's record, failing the test if there is none.
func (h *harness) record(key string) (n struct {
	Status    domain.NodeStatus
	Attempt   int
	Output    any
	Error     string
	Started   time.Time
	Completed time.Time
}) {
	h.t.Helper()
	rec, ok := h.store.node(h.execID, key)
	if !ok {
		h.t.Fatalf("node %s has no record", key)
	}
	n.Status, n.Attempt = rec.Status, rec.Attempt
	if len(rec.Output) > 0 {
		if err := json.Unmarshal(rec.Output, &n.Output); err != nil {
			h.t.Fatalf("node %s output: %v", key, err)
		}
	}
	if rec.Error != nil {
		n.Error = *rec.Error
	}
	if rec.StartedAt != nil {
		n.Started = *rec.StartedAt
	}
	if rec.CompletedAt != nil {
		n.Completed = *rec.CompletedAt
	}
	return n
}

// jsonOf decodes a JSON literal, so expected outputs can be written as JSON.
func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON literal %s: %v", s, err)
	}
	return v
}

// discardLogger silences the SDK's logger in tests.
type discardLogger struct{}

func (discardLogger) Debug(string, ...any) {}
func (discardLogger) Info(string, ...any)  {}
func (discardLogger) Warn(string, ...any)  {}
func (discardLogger) Error(string, ...any) {}

func TestExecutionRunsIndependentDelaysInParallel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{
		"nodes": [
			{"key": "a", "type": "DELAY", "config": {"duration": "1s"}},
			{"key": "b", "type": "DELAY", "config": {"duration": "1s"}},
			{"key": "join", "type": "TRANSFORM", "config": {"output": "{{ steps.a.output.waitedMs }}"}}
		],
		"edges": [{"from": "a", "to": "join"}, {"from": "b", "to": "join"}]
	}`)
	start := h.env.Now()
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	// Run one after the other, two 1 s delays would take 2 s.
	if elapsed := h.env.Now().Sub(start); elapsed < time.Second || elapsed >= 1500*time.Millisecond {
		t.Errorf("execution took %s of workflow time, want about 1s", elapsed)
	}
	a, b := h.record("a"), h.record("b")
	if !a.Started.Equal(b.Started) {
		t.Errorf("a started at %s, b at %s; want the same workflow time", a.Started, b.Started)
	}
	for key, n := range map[string]struct{ Started, Completed time.Time }{"a": {a.Started, a.Completed}, "b": {b.Started, b.Completed}} {
		if d := n.Completed.Sub(n.Started); d != time.Second {
			t.Errorf("node %s took %s, want 1s", key, d)
		}
	}
	if out := h.record("join").Output; out != float64(1000) {
		t.Errorf("join output = %v, want 1000", out)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"a": domain.NodeCompleted, "b": domain.NodeCompleted, "join": domain.NodeCompleted})
	h.wantCompletion(domain.ExecutionCompleted, "")
}

func TestExecutionRunsIndependentHTTPNodesConcurrently(t *testing.T) {
	t.Parallel()
	// Each request waits until both have arrived: run one at a time, the
	// first would never see the second and answer 409 after the safety
	// timeout, failing the execution.
	var arrived atomic.Int32
	both := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"path": %q}`, r.URL.Path)
		case <-time.After(10 * time.Second):
			w.WriteHeader(http.StatusConflict)
		}
	}))
	t.Cleanup(srv.Close)

	h := newHarness(t, fmt.Sprintf(`{
		"nodes": [
			{"key": "x", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/x"}},
			{"key": "y", "type": "HTTP_REQUEST", "config": {"url": "%[1]s/y"}}
		]
	}`, srv.URL))
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	for _, key := range []string{"x", "y"} {
		want := jsonOf(t, `{"status": 200, "body": {"path": "/`+key+`"}}`).(map[string]any)
		got, _ := h.record(key).Output.(map[string]any)
		if got["status"] != want["status"] || !reflect.DeepEqual(got["body"], want["body"]) {
			t.Errorf("node %s output = %v, want status and body of %v", key, got, want)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.ran {
		if r.TaskQueue != ExternalAPITaskQueue {
			t.Errorf("HTTP node %s ran on %q, want %q", r.Key, r.TaskQueue, ExternalAPITaskQueue)
		}
	}
}

func TestExecutionFailedNodeFailsExecutionAndSkipsDownstream(t *testing.T) {
	t.Parallel()
	// bad fails at once (a template naming missing input); slow runs
	// beside it and may finish, but nothing starts after the failure.
	h := newHarness(t, `{
		"nodes": [
			{"key": "bad", "type": "TRANSFORM", "config": {"output": "{{ input.missing }}"}},
			{"key": "next", "type": "TRANSFORM", "config": {"output": 1}},
			{"key": "last", "type": "TRANSFORM", "config": {"output": 2}},
			{"key": "slow", "type": "DELAY", "config": {"duration": "5s"}},
			{"key": "after_slow", "type": "TRANSFORM", "config": {"output": 3}}
		],
		"edges": [
			{"from": "bad", "to": "next"}, {"from": "next", "to": "last"},
			{"from": "slow", "to": "after_slow"}
		]
	}`).withInput(`{"present": true}`)
	res := h.mustRun()

	const nodeErr = `missing path input.missing: input has no member "missing"`
	wantErr := "node bad failed: " + nodeErr
	if res.Status != domain.ExecutionFailed || res.Error != wantErr {
		t.Fatalf("result = %+v, want FAILED with %q", res, wantErr)
	}
	h.wantStatuses(map[string]domain.NodeStatus{
		"bad": domain.NodeFailed, "slow": domain.NodeCompleted,
		"next": domain.NodeSkipped, "last": domain.NodeSkipped, "after_slow": domain.NodeSkipped,
	})
	if got := h.record("bad").Error; got != nodeErr {
		t.Errorf("bad's error = %q, want %q", got, nodeErr)
	}
	if got := h.record("next").Error; got != "not run: "+wantErr {
		t.Errorf("next's error = %q, want the reason it was not run", got)
	}
	// A template error is permanent: one attempt, and nothing downstream.
	if got := h.ranKeys(); !reflect.DeepEqual(got, []string{"bad"}) {
		t.Errorf("RunNode ran %v, want only [bad]", got)
	}
	h.wantCompletion(domain.ExecutionFailed, wantErr)
}

func TestExecutionHTTP4xxIsNotRetried(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, fmt.Sprintf(`{
		"nodes": [
			{"key": "get", "type": "HTTP_REQUEST", "config": {"url": "%s/missing"}},
			{"key": "use", "type": "TRANSFORM", "config": {"output": "{{ steps.get.output.body }}"}}
		],
		"edges": [{"from": "get", "to": "use"}]
	}`, srv.URL))
	res := h.mustRun()

	if n := hits.Load(); n != 1 {
		t.Errorf("server got %d requests, want exactly 1: a 4xx must not be retried", n)
	}
	// The executor's error, recorded as it is.
	nodeErr := fmt.Sprintf("GET %s/missing: status 404", srv.URL)
	if res.Status != domain.ExecutionFailed || res.Error != "node get failed: "+nodeErr {
		t.Fatalf("result = %+v, want FAILED with the 404", res)
	}
	if got := h.record("get"); got.Status != domain.NodeFailed || got.Error != nodeErr || got.Attempt != 1 {
		t.Errorf("get's record = %+v, want FAILED on attempt 1 with %q", got, nodeErr)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"get": domain.NodeFailed, "use": domain.NodeSkipped})
	h.wantCompletion(domain.ExecutionFailed, "node get failed: "+nodeErr)
}

func TestExecutionHTTP5xxIsRetriedThenCompletes(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) < 3 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "flaky", "type": "HTTP_REQUEST", "config": {"url": "%s"}}]}`, srv.URL))
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("server got %d requests, want 3 (two 503s, then 200)", n)
	}
	rec := h.record("flaky")
	if rec.Status != domain.NodeCompleted || rec.Attempt != 3 {
		t.Errorf("flaky's record = %+v, want COMPLETED on attempt 3", rec)
	}
	if body := rec.Output.(map[string]any)["body"]; !reflect.DeepEqual(body, map[string]any{"ok": true}) {
		t.Errorf("flaky's body = %v, want the parsed JSON", body)
	}
	h.wantCompletion(domain.ExecutionCompleted, "")
}

func TestExecutionHTTP5xxExhaustsRetriesAndFails(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, fmt.Sprintf(`{"nodes": [{"key": "down", "type": "HTTP_REQUEST", "config": {"url": "%s"}}]}`, srv.URL))
	res := h.mustRun()

	if n := hits.Load(); n != testRetry.MaximumAttempts {
		t.Errorf("server got %d requests, want MaximumAttempts = %d", n, testRetry.MaximumAttempts)
	}
	// The last attempt's error, recorded as the executor gave it.
	nodeErr := fmt.Sprintf("GET %s: status 502", srv.URL)
	if res.Status != domain.ExecutionFailed || res.Error != "node down failed: "+nodeErr {
		t.Fatalf("result = %+v, want FAILED with %q", res, nodeErr)
	}
	if rec := h.record("down"); rec.Attempt != int(testRetry.MaximumAttempts) || rec.Error != nodeErr {
		t.Errorf("down's record = %+v, want attempt %d and %q", rec, testRetry.MaximumAttempts, nodeErr)
	}
}

func TestExecutionConditionRunsOnlyTheTakenBranch(t *testing.T) {
	t.Parallel()
	const graph = `{
		"nodes": [
			{"key": "check", "type": "CONDITION", "config": {"left": "{{ input.n }}", "op": ">", "right": 3}},
			{"key": "big", "type": "TRANSFORM", "config": {"output": "big"}},
			{"key": "big_after", "type": "TRANSFORM", "config": {"output": "{{ steps.big.output }}"}},
			{"key": "small", "type": "TRANSFORM", "config": {"output": "small"}},
			{"key": "small_after", "type": "TRANSFORM", "config": {"output": "{{ steps.small.output }}"}},
			{"key": "always", "type": "TRANSFORM", "config": {"output": "{{ steps.check.output }}"}}
		],
		"edges": [
			{"from": "check", "to": "big", "when": true}, {"from": "big", "to": "big_after"},
			{"from": "check", "to": "small", "when": false}, {"from": "small", "to": "small_after"},
			{"from": "check", "to": "always"}
		]
	}`
	for _, tc := range []struct {
		name           string
		input          string
		taken, skipped string
	}{
		{name: "true", input: `{"n": 5}`, taken: "big", skipped: "small"},
		{name: "false", input: `{"n": 1}`, taken: "small", skipped: "big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, graph).withInput(tc.input)
			res := h.mustRun()

			if res.Status != domain.ExecutionCompleted {
				t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
			}
			h.wantStatuses(map[string]domain.NodeStatus{
				"check": domain.NodeCompleted, "always": domain.NodeCompleted,
				tc.taken: domain.NodeCompleted, tc.taken + "_after": domain.NodeCompleted,
				tc.skipped: domain.NodeSkipped, tc.skipped + "_after": domain.NodeSkipped,
			})
			if got := h.record(tc.taken + "_after").Output; got != tc.taken {
				t.Errorf("%s_after output = %v, want %q", tc.taken, got, tc.taken)
			}
			if got := h.record("always").Output; got != (tc.name == "true") {
				t.Errorf("always saw the condition as %v", got)
			}
			for _, k := range h.ranKeys() {
				if strings.HasPrefix(k, tc.skipped) {
					t.Errorf("node %s of the untaken branch ran", k)
				}
			}
		})
	}
}

func TestExecutionTransformReadsUpstreamOutputs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{
		"nodes": [
			{"key": "first", "type": "TRANSFORM", "config": {"output": {"x": "{{ input.x }}", "tags": ["a", "b"]}}},
			{"key": "second", "type": "TRANSFORM", "config": {"output": {
				"x": "{{ steps.first.output.x }}",
				"tag": "{{ steps.first.output.tags[1] }}",
				"text": "x={{ steps.first.output.x }} in {{ execution.id }}"
			}}}
		],
		"edges": [{"from": "first", "to": "second"}]
	}`).withInput(`{"x": 42}`)
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	want := jsonOf(t, fmt.Sprintf(`{"x": 42, "tag": "b", "text": "x=42 in %s"}`, h.execID))
	if got := h.record("second").Output; !reflect.DeepEqual(got, want) {
		t.Errorf("second output = %v, want %v", got, want)
	}
}

func TestExecutionHTTPJSONBodyFeedsTransform(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Order") != "o-7" {
			http.Error(w, "missing X-Order", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprint(w, `{"items": [{"id": 7, "name": "seven"}], "count": 1}`)
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, fmt.Sprintf(`{
		"nodes": [
			{"key": "fetch", "type": "HTTP_REQUEST", "config": {"url": "%s/orders", "headers": {"X-Order": "o-{{ input.order }}"}}},
			{"key": "shape", "type": "TRANSFORM", "config": {"output": {
				"id": "{{ steps.fetch.output.body.items[0].id }}",
				"name": "{{ steps.fetch.output.body.items.0.name }}",
				"status": "{{ steps.fetch.output.status }}",
				"type": "{{ steps.fetch.output.headers.content-type }}"
			}}}
		],
		"edges": [{"from": "fetch", "to": "shape"}]
	}`, srv.URL)).withInput(`{"order": 7}`)
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	want := jsonOf(t, `{"id": 7, "name": "seven", "status": 200, "type": "application/json; charset=utf-8"}`)
	if got := h.record("shape").Output; !reflect.DeepEqual(got, want) {
		t.Errorf("shape output = %v, want %v", got, want)
	}
}

func TestExecutionEmptyGraphCompletesAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [], "edges": []}`)
	start := h.env.Now()
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if elapsed := h.env.Now().Sub(start); elapsed != 0 {
		t.Errorf("empty execution took %s of workflow time, want none", elapsed)
	}
	h.wantStatuses(map[string]domain.NodeStatus{})
	h.wantCompletion(domain.ExecutionCompleted, "")
}

func TestExecutionInvalidGraphFailsWithValidationError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{
		"nodes": [
			{"key": "a", "type": "TRANSFORM", "config": {"output": 1}},
			{"key": "b", "type": "TRANSFORM", "config": {"output": 2}}
		],
		"edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}]
	}`)
	res := h.mustRun()

	g, _ := h.store.GetDefinitionVersion(context.Background(), domain.ID(uuid.MustParse(h.in.DefinitionID)), 1)
	validation := g.Graph.Validate()
	if validation == nil {
		t.Fatal("test graph is valid; want a cycle")
	}
	wantErr := "graph " + validation.Error()
	if res.Status != domain.ExecutionFailed || res.Error != wantErr || !strings.Contains(res.Error, "cycle") {
		t.Fatalf("result = %+v, want FAILED with %q", res, wantErr)
	}
	if ran := h.ranKeys(); len(ran) != 0 {
		t.Errorf("nodes ran: %v", ran)
	}
	h.wantCompletion(domain.ExecutionFailed, wantErr)
}

func TestExecutionMissingDefinitionFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{}`).withoutGraph()
	h.in.Version = 2
	res := h.mustRun()

	wantErr := fmt.Sprintf("loading graph: definition %s version 2 not found", h.in.DefinitionID)
	if res.Status != domain.ExecutionFailed || res.Error != wantErr {
		t.Fatalf("result = %+v, want FAILED with %q", res, wantErr)
	}
	h.wantCompletion(domain.ExecutionFailed, wantErr)
}

func TestExecutionCancelledDuringDelay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{
		"nodes": [
			{"key": "quick", "type": "TRANSFORM", "config": {"output": "done"}},
			{"key": "wait", "type": "DELAY", "config": {"duration": "1h"}},
			{"key": "after", "type": "TRANSFORM", "config": {"output": "{{ steps.wait.output }}"}},
			{"key": "later", "type": "TRANSFORM", "config": {"output": 1}}
		],
		"edges": [{"from": "wait", "to": "after"}, {"from": "after", "to": "later"}]
	}`)
	start := h.env.Now()
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
	_, err := h.run()

	if !temporal.IsCanceledError(err) {
		t.Fatalf("workflow error = %v, want cancelled", err)
	}
	if elapsed := h.env.Now().Sub(start); elapsed >= time.Hour {
		t.Errorf("cancelled execution ran %s: the delay was not interrupted", elapsed)
	}
	h.wantStatuses(map[string]domain.NodeStatus{
		"quick": domain.NodeCompleted, "wait": domain.NodeCancelled,
		"after": domain.NodeSkipped, "later": domain.NodeSkipped,
	})
	if got := h.record("after").Error; got != "execution cancelled" {
		t.Errorf("after's error = %q, want the cancellation", got)
	}
	h.wantCompletion(domain.ExecutionCancelled, "execution cancelled")
}

// stallingExecutor runs TRANSFORM nodes by cancelling the workflow and
// then waiting for its context, as an HTTP call to a slow endpoint does.
type stallingExecutor struct {
	cancel    func()
	cancelled chan struct{}
}

func (*stallingExecutor) Type() domain.NodeType { return domain.NodeTransform }

func (e *stallingExecutor) Execute(ctx context.Context, _ ports.NodeRun) (any, any, error) {
	e.cancel()
	<-ctx.Done()
	close(e.cancelled)
	return nil, nil, ctx.Err()
}

func TestExecutionCancelledWhileNodeActivityRuns(t *testing.T) {
	t.Parallel()
	exec := &stallingExecutor{cancelled: make(chan struct{})}
	h := newHarnessWith(t, `{
		"nodes": [
			{"key": "slow", "type": "TRANSFORM", "config": {"output": 1}},
			{"key": "after", "type": "TRANSFORM", "config": {"output": 2}}
		],
		"edges": [{"from": "slow", "to": "after"}]
	}`, []ports.NodeExecutor{exec})
	exec.cancel = h.env.CancelWorkflow
	_, err := h.run()

	if !temporal.IsCanceledError(err) {
		t.Fatalf("workflow error = %v, want cancelled", err)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"slow": domain.NodeCancelled, "after": domain.NodeSkipped})
	h.wantCompletion(domain.ExecutionCancelled, "execution cancelled")
	// RunNode's heartbeats carry the cancellation to the executor.
	select {
	case <-exec.cancelled:
	case <-time.After(10 * time.Second):
		t.Error("the running node's context was never cancelled")
	}
}

func TestExecutionCancelledWhileLoadingGraphStillRecordsCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`).withoutGraph()
	h.store.beforeLoad = h.env.CancelWorkflow
	_, err := h.run()

	if !temporal.IsCanceledError(err) {
		t.Fatalf("workflow error = %v, want cancelled", err)
	}
	if ran := h.ranKeys(); len(ran) != 0 {
		t.Errorf("nodes ran after the cancellation: %v", ran)
	}
	// Without a CANCELLED completion the execution would hold its slot
	// until the reconciler noticed.
	h.wantCompletion(domain.ExecutionCancelled, "execution cancelled")
}

func TestExecutionCancelDuringCompletionDoesNotInterruptIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
	h.store.beforeFinish = h.env.CancelWorkflow
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Errorf("status = %s, want COMPLETED: the DAG had finished", res.Status)
	}
	h.wantCompletion(domain.ExecutionCompleted, "")
}

func TestExecutionIDComesFromWorkflowID(t *testing.T) {
	t.Parallel()
	id := domain.ID(uuid.New())
	for _, tc := range []struct {
		name, workflowID, want string
	}{
		{name: "execution id", workflowID: WorkflowID(id), want: id.String()},
		{name: "other prefix", workflowID: "run-" + id.String(), want: "fallback"},
		{name: "not a uuid", workflowID: "execution-42", want: "fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := executionIDFrom(tc.workflowID, "fallback"); got != tc.want {
				t.Errorf("executionIDFrom(%q) = %q, want %q", tc.workflowID, got, tc.want)
			}
		})
	}
}

func TestExecutionLoadsItsGraphWhenTheInputCarriesNone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": "{{ input.x }}"}}]}`).withoutGraph().withInput(`{"x": 5}`)
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if out := h.record("a").Output; out != float64(5) {
		t.Errorf("a's output = %v, want 5", out)
	}
}

func TestExecutionCapsNodesInFlightByPlan(t *testing.T) {
	t.Parallel()
	// Each request is held until the workflow has as many in flight as
	// FREE's cap allows, and then one at a time is let go, so the cap is
	// reached deterministically and any request past it would be seen in
	// flight beside the held ones. The last arrival lets every request go.
	const total, limit = 10, 3
	var (
		mu                      sync.Mutex
		inFlight, arrived, peak int
	)
	tokens, last := make(chan struct{}, total), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		arrived++
		peak = max(peak, inFlight)
		if arrived == total {
			close(last)
		} else if inFlight >= limit {
			tokens <- struct{}{}
		}
		mu.Unlock()
		select {
		case <-tokens:
		case <-last:
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	var nodes []string
	for i := range total {
		nodes = append(nodes, fmt.Sprintf(`{"key": "n%d", "type": "HTTP_REQUEST", "config": {"url": "%s/%d"}}`, i, srv.URL, i))
	}
	h := newHarness(t, `{"nodes": [`+strings.Join(nodes, ",")+`]}`)
	h.wf.Limits = RunLimits{NodesInFlight: map[domain.Plan]int{domain.PlanFree: limit, domain.PlanPro: total}}
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != limit {
		t.Errorf("at most %d requests ran at once, want FREE's cap of %d reached and kept", peak, limit)
	}
	if n := len(h.ranKeys()); n != total {
		t.Errorf("%d nodes ran, want all %d", n, total)
	}
}

func TestExecutionHandsEachNodeOnlyTheDataItReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{
		"nodes": [
			{"key": "a", "type": "TRANSFORM", "config": {"output": {"keep": "{{ input.small }}", "also": "x"}}},
			{"key": "b", "type": "TRANSFORM", "config": {"output": {"big": "{{ input.big }}", "other": 1}}},
			{"key": "c", "type": "TRANSFORM", "config": {"output": "{{ steps.a.output.keep }}"}}
		],
		"edges": [{"from": "a", "to": "c"}, {"from": "b", "to": "c"}]
	}`).withInput(`{"small": 1, "big": "` + strings.Repeat("x", 1000) + `"}`)
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	got := map[string]string{}
	for _, in := range h.inputs {
		steps, _ := json.Marshal(in.Steps)
		got[in.Node.Key] = string(in.Input) + " " + string(steps)
	}
	want := map[string]string{
		"a": `{"small":1} null`,
		"c": ` {"a":{"keep":1}}`,
	}
	for key, w := range want {
		if got[key] != w {
			t.Errorf("node %s got input and steps %s, want %s", key, got[key], w)
		}
	}
	if out := h.record("c").Output; out != float64(1) {
		t.Errorf("c's output = %v, want 1", out)
	}
}

func TestExecutionFailsANodeOverThePayloadLimitWithARecordedError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, output, wantErr string
	}{
		{name: "input", output: `"{{ input.s }}"`, wantErr: "the node's config and the data its templates read are"},
		{name: "output", output: `["{{ input.t }}", "{{ input.t }}", "{{ input.t }}", "{{ input.t }}", "{{ input.t }}"]`, wantErr: "output is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, `{
				"nodes": [
					{"key": "big", "type": "TRANSFORM", "config": {"output": `+tc.output+`}},
					{"key": "after", "type": "TRANSFORM", "config": {"output": 1}}
				],
				"edges": [{"from": "big", "to": "after"}]
			}`).withInput(`{"s": "` + strings.Repeat("s", 300) + `", "t": "` + strings.Repeat("t", 60) + `"}`)
			h.wf.Limits = RunLimits{PayloadLimit: 200}
			h.acts.PayloadLimit = 200
			res := h.mustRun()

			if res.Status != domain.ExecutionFailed || !strings.Contains(res.Error, tc.wantErr) || !strings.Contains(res.Error, "payload limit of 200") {
				t.Fatalf("result = %+v, want FAILED naming the payload limit (%q)", res, tc.wantErr)
			}
			if rec := h.record("big"); rec.Status != domain.NodeFailed || !strings.Contains(rec.Error, "payload limit of 200") {
				t.Errorf("big's record = %s %q, want FAILED naming the limit", rec.Status, rec.Error)
			}
			h.wantStatuses(map[string]domain.NodeStatus{"big": domain.NodeFailed, "after": domain.NodeSkipped})
		})
	}
}

func TestExecutionZeroDelayIsAJoinPointWithoutATimer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{
		"nodes": [
			{"key": "now", "type": "DELAY", "config": {"duration": "0s"}},
			{"key": "after", "type": "TRANSFORM", "config": {"output": "{{ steps.now.output.waitedMs }}"}}
		],
		"edges": [{"from": "now", "to": "after"}]
	}`)
	timers := 0
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	res := h.mustRun()

	if res.Status != domain.ExecutionCompleted {
		t.Fatalf("status = %s (%s), want COMPLETED", res.Status, res.Error)
	}
	if timers != 0 {
		t.Errorf("%d timers scheduled for a zero delay, want none", timers)
	}
	if out := h.record("after").Output; out != float64(0) {
		t.Errorf("after's output = %v, want 0", out)
	}
	h.wantStatuses(map[string]domain.NodeStatus{"now": domain.NodeCompleted, "after": domain.NodeCompleted})
}

func TestARunWhoseClaimWasReleasedEndsNotAdmittedHavingDoneNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "a", "type": "HTTP_REQUEST", "config": {"url": "https://example.com"}}]}`)
	// The claim the run was started for was released before the start
	// landed: its item is PENDING without the execution, whose row is gone.
	h.store.release(h.execID)
	_, err := h.run()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != NotAdmittedErrorType {
		t.Fatalf("workflow error %v, want one of type %s", err, NotAdmittedErrorType)
	}
	if ran := h.ranKeys(); len(ran) != 0 {
		t.Errorf("nodes %v ran, want none", ran)
	}
	if got := h.store.finished(); len(got) != 0 {
		t.Errorf("completions %+v, want none: nothing is recorded of a run not admitted", got)
	}
}

func TestAnAdmittedRunMarksItsClaimedItemDispatched(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "a", "type": "TRANSFORM", "config": {"output": 1}}]}`)
	// A claimed run (its dispatcher has not marked it yet) is admitted;
	// the admission marks its item, so that no release can follow.
	var admittedWhile domain.QueueStatus
	h.store.mu.Lock()
	h.store.items[h.execID].Status = domain.QueueClaimed
	h.store.mu.Unlock()
	h.store.beforeFinish = func() {
		h.store.mu.Lock()
		admittedWhile = h.store.items[h.execID].Status
		h.store.mu.Unlock()
	}
	if res := h.mustRun(); res.Status != domain.ExecutionCompleted {
		t.Fatalf("status %s, want COMPLETED", res.Status)
	}
	if admittedWhile != domain.QueueDispatched {
		t.Errorf("item %s when the admitted run ended, want DISPATCHED", admittedWhile)
	}
	h.wantCompletion(domain.ExecutionCompleted, "")
}

func TestARunWhoseItemWasCancelledBeforeItStartedEndsCancelledHavingRunNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"nodes": [{"key": "a", "type": "HTTP_REQUEST", "config": {"url": "https://example.com"}}]}`)
	// The cancel found no workflow (the start was still on the wire),
	// ended the CLAIMED item and answered CANCELLED; the dispatcher that
	// sent the start is gone, so nobody else will cancel the workflow.
	h.store.mu.Lock()
	item := h.store.items[h.execID]
	item.Status = domain.QueueClaimed
	if err := item.Cancel(); err != nil {
		t.Fatal(err)
	}
	h.store.mu.Unlock()
	if res := h.mustRun(); res.Status != domain.ExecutionCancelled {
		t.Fatalf("status %s, want CANCELLED", res.Status)
	}
	if ran := h.ranKeys(); len(ran) != 0 {
		t.Errorf("nodes %v ran, want none: the cancel was answered before the run started", ran)
	}
	h.wantCompletion(domain.ExecutionCancelled, "cancelled before the run started")
}
