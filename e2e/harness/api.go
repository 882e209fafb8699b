package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	sluice "github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/crontab"
	"github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/adapters/httpapi"
	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/adapters/postgres"
	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/api/client"
	"github.com/sluicehq/sluice/app/dispatch"
	"github.com/sluicehq/sluice/app/usecases"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports/porttest"
)

// AdminToken is the admin bearer token the test server is configured with.
const AdminToken = "contract-test-admin-token-0123456789"

// ProblemBase prefixes every problem type the API answers with.
const ProblemBase = "https://sluice.dev/problems/"

// Stack is one running server on real dependencies: a fresh migrated
// Postgres database, the Temporal server named by TEMPORAL_ADDRESS (on task
// queues no worker serves, so started workflows simply wait), and a
// dispatcher the test drives by hand.
type Stack struct {
	Pool       *pgxpool.Pool
	Dispatcher *dispatch.Dispatcher
	URL        string
	Contract   *Contract
	// Queues are the stack's own task queues, which no allow-list may
	// open.
	Queues engine.TaskQueues
}

// TestLog is the logger the in-process servers log to: discarded, or
// debug lines on stderr when SLUICE_TEST_LOG is set.
func TestLog() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// RequireEnv returns the variable the real stack sets (make test runs
// the tests under devstack), skipping the test without it unless
// SLUICE_REQUIRE_INTEGRATION is set, as pgtest.BaseURL does.
func RequireEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("SLUICE_REQUIRE_INTEGRATION") != "" {
			t.Fatalf("%s is not set; run through `make test`, which starts the stack", name)
		}
		t.Skipf("%s not set: integration test skipped (run `make test`)", name)
	}
	return v
}

// TemporalAddress is the real Temporal server's address; see RequireEnv.
func TemporalAddress(t testing.TB) string {
	t.Helper()
	return RequireEnv(t, "TEMPORAL_ADDRESS")
}

// NoWakeups wakes a dispatcher never, so a test drives its batches by hand.
type NoWakeups struct{}

// C is a nil channel, which never delivers.
func (NoWakeups) C() <-chan struct{} { return nil }

// NewStack starts a Stack with the default quotas and request limits.
func NewStack(t *testing.T) *Stack {
	t.Helper()
	return NewStackWithQuotas(t, domain.DefaultProcessQuotas())
}

// NewStackWithQuotas is NewStack with the given workspace quotas.
func NewStackWithQuotas(t *testing.T, quotas domain.ProcessQuotas) *Stack {
	t.Helper()
	return NewStackWith(t, quotas, httpapi.DefaultRequestLimits())
}

// NewStackWith is NewStack with the given workspace quotas and request
// limits.
func NewStackWith(t *testing.T, quotas domain.ProcessQuotas, limits httpapi.RequestLimits) *Stack {
	t.Helper()
	pool := pgtest.Pool(t)
	addr := TemporalAddress(t)
	log := TestLog()
	tc, err := tclient.NewLazyClient(tclient.Options{
		HostPort: addr, Namespace: "default", Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	queues := engine.NewTaskQueues("http" + uuid.NewString()[:8] + ".")
	workflows := engine.NewWorkflowClient(tc, queues, engine.DefaultRunLimits())
	keys, err := postgres.NewWebhookSecretKeys([]byte("sluice-api-webhook-secret-key-32"), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.NewStore(pool, log, postgres.WithWebhookSecretKeys(keys))

	registry := prometheus.NewRegistry()
	cfg := dispatch.DefaultDispatcherConfig()
	cfg.Exclusive = false
	metrics := dispatch.NewMetrics(registry)
	dispatcher := dispatch.NewDispatcher(dispatch.DispatcherDeps{
		Store: store, Executions: store, Engine: workflows, Wakeups: NoWakeups{},
		Breaker: dispatch.NewBreaker(cfg.BreakerBackoff, metrics), Metrics: metrics, Log: log,
	}, cfg)

	application := usecases.NewApplication(usecases.Stores{Workspaces: store, Plans: store, APIKeys: store, Definitions: store, Queue: store, Executions: store, OutboundLimits: store, Schedules: store, Timetables: crontab.NewParser(), Events: store, Capacity: store,
		AllowLists: store, OwnTaskQueues: queues.Reserved()}, workflows, quotas, domain.DefaultTemplateBudget, usecases.AuthConfig{AdminToken: AdminToken})
	application.Webhooks = usecases.NewWebhooks(store, nodes.NewWebhookPoster(nodes.DefaultConfig(), nodes.WebhookConfig{Timeout: time.Second}), store)
	hub := postgres.NewFeedHub(pool, log)
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	// Streams idle for a second end, so the contract's checking transport,
	// which reads whole answers, sees them end.
	streamLimits := usecases.DefaultStreamLimits()
	streamLimits.Idle = time.Second
	application.Streams = usecases.NewStreams(hub, store, store, streamLimits)
	checks := []httpapi.ReadinessCheck{{Name: "postgres", Check: store.CheckHealth}, {Name: "temporal", Check: workflows.CheckHealth}}
	handler, err := httpapi.NewHandler(application, limits, registry, checks, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return &Stack{Pool: pool, Dispatcher: dispatcher, URL: srv.URL, Contract: NewContract(t), Queues: queues}
}

// Client returns a generated client that sends token (none when empty)
// and has every exchange checked by the contract.
func (s *Stack) Client(t *testing.T, token string) *client.ClientWithResponses {
	t.Helper()
	if token == "" {
		return s.ClientWith(t)
	}
	return s.ClientWith(t, Bearer(token))
}

// ClientWith returns a generated client that applies editors to every
// request, with every exchange checked by the contract.
func (s *Stack) ClientWith(t *testing.T, editors ...client.RequestEditorFn) *client.ClientWithResponses {
	t.Helper()
	opts := []client.ClientOption{client.WithHTTPClient(s.HTTPClient(t))}
	for _, e := range editors {
		opts = append(opts, client.WithRequestEditorFn(e))
	}
	c, err := client.NewClientWithResponses(s.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// HTTPClient is a plain HTTP client whose exchanges the contract checks,
// for the few requests the generated client cannot make (a path parameter
// that is not a UUID, say).
func (s *Stack) HTTPClient(t *testing.T) *http.Client {
	return &http.Client{Transport: &CheckingTransport{T: t, Contract: s.Contract, Next: http.DefaultTransport}, Timeout: 30 * time.Second}
}

// DispatchAll runs dispatch batches until every PENDING item of the
// database that is due (its notBefore passed) is DISPATCHED, or fails the
// test at the deadline.
func (s *Stack) DispatchAll(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	porttest.Eventually(t, 30*time.Second, func() error {
		if _, err := s.Dispatcher.DispatchBatch(ctx); err != nil {
			t.Fatalf("dispatching: %v", err)
		}
		var pending int
		if err := s.Pool.QueryRow(ctx, "SELECT count(*) FROM workflow_execution_queue WHERE status IN ('PENDING', 'CLAIMED') AND available_at <= now()").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending > 0 {
			return fmt.Errorf("%d items not dispatched", pending)
		}
		return nil
	})
}

// The contract check decodes each answer by its content type; an event
// stream is text, checked as the string the spec says it is.
func init() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	})
}

// Contract checks exchanges against openapi.yaml, as loaded from the
// embedded spec the server publishes, and remembers which operations
// answered which statuses.
type Contract struct {
	router routers.Router
	mu     sync.Mutex
	seen   map[string][]int // operationId -> statuses, in order
	Ops    []string         // every operationId of the spec
}

// NewContract loads the embedded spec into a Contract that has seen
// nothing yet.
func NewContract(t *testing.T) *Contract {
	t.Helper()
	loader := openapi3.NewLoader()
	spec, err := loader.LoadFromData(sluice.OpenAPISpec)
	if err != nil {
		t.Fatalf("loading openapi.yaml: %v", err)
	}
	if err = spec.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	// Match by path whatever host the test server listens on.
	spec.Servers = nil
	router, err := gorillamux.NewRouter(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := &Contract{router: router, seen: map[string][]int{}}
	for _, item := range spec.Paths.Map() {
		for _, op := range item.Operations() {
			c.Ops = append(c.Ops, op.OperationID)
		}
	}
	slices.Sort(c.Ops)
	return c
}

// formats makes the schema formats the API relies on part of the check:
// kin-openapi validates neither uuid nor date-time bodies by default.
var formats = openapi3.WithStringFormatValidators(map[string]openapi3.StringFormatValidator{
	"uuid":      openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562),
	"date-time": openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringDateTime),
})

func (c *Contract) record(op string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[op] = append(c.seen[op], status)
}

// Statuses returns the statuses each operation has answered so far.
func (c *Contract) Statuses() map[string][]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]int, len(c.seen))
	for op, s := range c.seen {
		out[op] = slices.Clone(s)
	}
	return out
}

// CheckingTransport validates every response against the operation the
// spec routes its request to: the status must be one the operation
// documents, and headers and body must match its schema. Whatever the
// request, the server must not answer 5xx (but readiness's 503), and every
// 4xx or 5xx is application/problem+json with a type under ProblemBase, a
// title, a detail and the status repeated in the body.
type CheckingTransport struct {
	T        testing.TB
	Contract *Contract
	Next     http.RoundTripper
}

// RoundTrip sends the request and fails the test unless the request and
// its answer are what the spec allows.
func (ct *CheckingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ct.T.Helper()
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := ct.Next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	what := req.Method + " " + req.URL.RequestURI()

	route, params, routeErr := ct.Contract.router.FindRoute(req)
	// Readiness is the one operation whose 5xx is a designed answer.
	notReady := routeErr == nil && route.Operation.OperationID == "getReadyz" && resp.StatusCode == http.StatusServiceUnavailable
	if resp.StatusCode >= 500 && !notReady {
		ct.T.Errorf("%s answered %d: %s", what, resp.StatusCode, body)
	}
	if resp.StatusCode >= 400 {
		checkProblem(ct.T, what, resp.StatusCode, resp.Header, body)
	}
	if routeErr != nil {
		ct.T.Errorf("%s: no operation in openapi.yaml: %v", what, routeErr)
		return resp, nil
	}
	ct.Contract.record(route.Operation.OperationID, resp.StatusCode)
	// The request as sent, for the validator (it reads the body again).
	vreq := req.Clone(req.Context())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus:   true,
			MultiError:              true,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{formats},
		},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
		ct.T.Errorf("%s answered %d, which breaks openapi.yaml:\n%v\nbody: %s", what, resp.StatusCode, err, body)
	}
	return resp, nil
}

// problem is the RFC 9457 body, decoded strictly enough to see what came.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Path    string `json:"path"`
		Message string `json:"message"`
	} `json:"errors"`
}

func checkProblem(t testing.TB, what string, status int, h http.Header, body []byte) {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s answered %d with Content-Type %q, want application/problem+json", what, status, ct)
	}
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Errorf("%s answered %d with a body that is not a problem: %v: %s", what, status, err, body)
		return
	}
	if !strings.HasPrefix(p.Type, ProblemBase) || p.Title == "" || p.Status != status || p.Detail == "" {
		t.Errorf("%s answered %d with an incomplete problem: %s", what, status, body)
	}
}

// Answer is what a negative test looks at: the status and the problem.
type Answer struct {
	Status  int
	Problem problem
	Body    []byte
}

// Reader returns a function that reads a raw response of the generated
// client, so that a call can be passed to it directly:
// read(c.GetWorkspace(ctx, id)).
func Reader(t *testing.T) func(*http.Response, error) Answer {
	return func(resp *http.Response, err error) Answer {
		t.Helper()
		return Read(t, resp, err)
	}
}

// Read reads a whole answer and its problem, failing the test if the
// request failed.
func Read(t *testing.T, resp *http.Response, err error) Answer {
	t.Helper()
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := Answer{Status: resp.StatusCode, Body: body}
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(body, &a.Problem)
	}
	return a
}

// Expect fails unless the answer has the status and problem type.
func (a Answer) Expect(t *testing.T, what string, status int, kind string) {
	t.Helper()
	if a.Status != status || a.Problem.Type != ProblemBase+kind {
		t.Errorf("%s: got %d %s, want %d %s%s; body: %s", what, a.Status, a.Problem.Type, status, ProblemBase, kind, a.Body)
	}
}

// FieldPaths returns the paths of a problem's field errors.
func (a Answer) FieldPaths() []string {
	out := make([]string, len(a.Problem.Errors))
	for i, e := range a.Problem.Errors {
		out[i] = e.Path
	}
	return out
}

// Bearer sends token as the request's bearer token.
func Bearer(token string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// Ptr points at a copy of v, for the generated client's optional fields.
func Ptr[T any](v T) *T { return &v }

// RawInput encodes an enqueue input.
func RawInput(v map[string]any) *json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	m := json.RawMessage(raw)
	return &m
}

// InputField reads one top-level field of an execution's input.
func InputField(t *testing.T, input json.RawMessage, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(input, &m); err != nil {
		t.Fatalf("execution input %s: %v", input, err)
	}
	return m[name]
}

// SetPlanQuotas sets quotas of plan in the stack's database through the
// store's plan edit, the path PATCH /plans takes, for tests that need a
// small quota from the start.
func (s *Stack) SetPlanQuotas(t *testing.T, plan domain.Plan, q domain.QuotaOverrides) {
	t.Helper()
	if _, err := postgres.NewStore(s.Pool, TestLog()).UpdatePlan(context.Background(), plan, domain.PlanChange{Quotas: q}, nil); err != nil {
		t.Fatalf("setting %s's quotas: %v", plan, err)
	}
}
