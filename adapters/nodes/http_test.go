package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// run executes one node with the given config against the template context.
func run(t *testing.T, exec ports.NodeExecutor, config string, tc domain.TemplateContext) (input, output any, err error) {
	t.Helper()
	node := domain.Node{Key: "n", Type: exec.Type(), Config: json.RawMessage(config)}
	return exec.Execute(context.Background(), ports.NodeRun{Node: node, Context: tc})
}

// loopbackHTTP is the executor with loopback allowed, as the tests' servers
// listen there and the guard refuses it by default.
func loopbackHTTP(t *testing.T) *nodes.HTTPRequest {
	t.Helper()
	cfg := nodes.DefaultConfig()
	cfg.Allow = allowList(t, "127.0.0.0/8,::1/128")
	return nodes.NewHTTPRequest(cfg)
}

func allowList(t *testing.T, s string) nodes.AllowList {
	t.Helper()
	a, err := nodes.ParseAllowList(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// roundTrip turns v into what it becomes as JSON, as node outputs do
// between activities.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantPermanent checks that err is a PermanentError of kind.
func wantPermanent(t *testing.T, err error, kind string) {
	t.Helper()
	var p *ports.PermanentError
	if !errors.As(err, &p) {
		t.Fatalf("error = %v, want a permanent %s error", err, kind)
	}
	if p.Kind != kind {
		t.Errorf("permanent error kind = %q, want %q (%v)", p.Kind, kind, err)
	}
}

// wantRetryable checks that err is an error Temporal should retry.
func wantRetryable(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error, want a retryable one")
	}
	if perm := (*ports.PermanentError)(nil); errors.As(err, &perm) {
		t.Errorf("error %v is permanent, want retryable", err)
	}
}

func TestHTTPRequestOutputsStatusHeadersAndParsedJSON(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "r-1")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id": 7, "tags": ["a"], "nested": {"ok": true}}`)
	}))
	t.Cleanup(srv.Close)

	_, out, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": %q}`, srv.URL), domain.TemplateContext{})
	if err != nil {
		t.Fatal(err)
	}
	got := roundTrip(t, out).(map[string]any)
	if got["status"] != float64(201) {
		t.Errorf("status = %v, want 201", got["status"])
	}
	headers := got["headers"].(map[string]any)
	if headers["x-request-id"] != "r-1" || headers["content-type"] != "application/json" {
		t.Errorf("headers = %v, want lower-cased names with their values", headers)
	}
	wantBody := map[string]any{"id": float64(7), "tags": []any{"a"}, "nested": map[string]any{"ok": true}}
	if !reflect.DeepEqual(got["body"], wantBody) {
		t.Errorf("body = %#v, want the parsed JSON %#v", got["body"], wantBody)
	}
}

func TestHTTPRequestBodyParsing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, contentType, body string
		want                    any
	}{
		{name: "text stays text", contentType: "text/plain", body: "hello", want: "hello"},
		{name: "JSON without content type", contentType: "", body: `[1, 2]`, want: []any{float64(1), float64(2)}},
		{name: "bad JSON with JSON type stays text", contentType: "application/json", body: `{"a":`, want: `{"a":`},
		{name: "JSON scalar with JSON type", contentType: "application/problem+json", body: `"x"`, want: "x"},
		{name: "empty body", contentType: "", body: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = []string{tc.contentType}
				fmt.Fprint(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			_, out, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": %q}`, srv.URL), domain.TemplateContext{})
			if err != nil {
				t.Fatal(err)
			}
			if got := roundTrip(t, out).(map[string]any)["body"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("body = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestHTTPRequestResolvesTemplatesInURLHeadersAndBody(t *testing.T) {
	t.Parallel()
	type seen struct {
		Method, Path, Query, Auth, Count, ContentType string
		Body                                          any
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body any
		_ = json.Unmarshal(raw, &body)
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("X-Count"), r.Header.Get("Content-Type"), body}
	}))
	t.Cleanup(srv.Close)
	tc := domain.TemplateContext{
		Input:       map[string]any{"user": "u1", "token": "t0k", "n": float64(3)},
		Steps:       map[string]any{"prev": map[string]any{"body": map[string]any{"id": float64(9), "tags": []any{"x", "y"}}}},
		ExecutionID: "e-1",
	}
	config := fmt.Sprintf(`{
		"method": "POST",
		"url": "%s/users/{{ input.user }}?exec={{ execution.id }}",
		"headers": {"Authorization": "Bearer {{ input.token }}", "X-Count": "{{ input.n }}"},
		"body": {"id": "{{ steps.prev.output.body.id }}", "tags": "{{ steps.prev.output.body.tags }}", "note": "id {{ steps.prev.output.body.id }}"}
	}`, srv.URL)

	input, _, err := run(t, loopbackHTTP(t), config, tc)
	if err != nil {
		t.Fatal(err)
	}
	want := seen{
		Method: "POST", Path: "/users/u1", Query: "exec=e-1", Auth: "Bearer t0k", Count: "3", ContentType: "application/json",
		Body: map[string]any{"id": float64(9), "tags": []any{"x", "y"}, "note": "id 9"},
	}
	if s := <-got; !reflect.DeepEqual(s, want) {
		t.Errorf("server saw %+v, want %+v", s, want)
	}
	// The resolved request is the node's recorded input, its secrets
	// redacted: query values and the Authorization header.
	in := roundTrip(t, input).(map[string]any)
	if in["url"] != srv.URL+"/users/u1?exec=[redacted]" || in["method"] != "POST" {
		t.Errorf("recorded input = %v, want the resolved request", in)
	}
	if h := in["headers"].(map[string]any); h["Authorization"] != "[redacted]" || h["X-Count"] != "3" {
		t.Errorf("recorded headers = %v, want Authorization redacted and X-Count kept", h)
	}
}

func TestHTTPRequestClassifiesFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		// kind is the permanent error's kind, "" for retryable.
		kind string
	}{
		{name: "400", status: http.StatusBadRequest, kind: "http_4xx"},
		{name: "404", status: http.StatusNotFound, kind: "http_4xx"},
		{name: "422", status: http.StatusUnprocessableEntity, kind: "http_4xx"},
		{name: "500", status: http.StatusInternalServerError},
		{name: "503", status: http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			_, out, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": %q}`, srv.URL), domain.TemplateContext{})
			if out != nil {
				t.Errorf("output = %v, want none on failure", out)
			}
			if tc.kind == "" {
				wantRetryable(t, err)
			} else {
				wantPermanent(t, err, tc.kind)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprint(tc.status)) {
				t.Errorf("error %q does not name the status %d", err, tc.status)
			}
		})
	}
}

func TestHTTPRequestTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	// The handler answers only once the client has given up.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	_, _, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": %q, "timeout": "50ms"}`, srv.URL), domain.TemplateContext{})
	wantRetryable(t, err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want the node's deadline", err)
	}
}

func TestHTTPRequestNetworkErrorIsRetryable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close() // nothing listens there any more
	_, _, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": %q}`, addr), domain.TemplateContext{})
	wantRetryable(t, err)
}

func TestHTTPRequestBadRequestsArePermanent(t *testing.T) {
	t.Parallel()
	tc := domain.TemplateContext{Input: map[string]any{
		"file": "file:///etc/passwd", "relative": "/path", "multiline": "a\r\nX-Injected: 1", "obj": map[string]any{"a": float64(1)},
	}}
	for _, c := range []struct {
		name, config, kind string
	}{
		{name: "invalid config", config: `{"url": 5}`, kind: "invalid_config"},
		{name: "missing path in url", config: `{"url": "http://example.test/{{ input.nope }}"}`, kind: "missing_path"},
		{name: "missing path in body", config: `{"url": "http://example.test", "body": {"a": "{{ steps.x.output }}"}}`, kind: "missing_path"},
		{name: "resolved url not http", config: `{"url": "{{ input.file }}"}`, kind: "invalid_url"},
		{name: "resolved url relative", config: `{"url": "{{ input.relative }}"}`, kind: "invalid_url"},
		{name: "resolved url an object", config: `{"url": "{{ input.obj }}"}`, kind: "invalid_url"},
		{name: "header with line break", config: `{"url": "http://example.test", "headers": {"X-A": "{{ input.multiline }}"}}`, kind: "invalid_header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := run(t, loopbackHTTP(t), c.config, tc)
			wantPermanent(t, err, c.kind)
		})
	}
}

func TestHTTPRequestSendsNonStringHeaderValuesAsJSON(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Filter")
	}))
	t.Cleanup(srv.Close)
	tc := domain.TemplateContext{Input: map[string]any{"filter": map[string]any{"a": float64(1)}}}
	if _, _, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": %q, "headers": {"X-Filter": "{{ input.filter }}"}}`, srv.URL), tc); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h != `{"a":1}` {
		t.Errorf("X-Filter = %q, want the JSON of the value", h)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestHTTPRequestSendsWhatInterpolationWrites: a header value a whole
// reference fills and the request body are written as a template
// interpolation writes text, with '<', '>' and '&' as themselves
// (domain.TemplateText, domain.EncodeJSON), and with every digit of a
// number. They were HTML-escaped (\u003c, \u0026), unlike the same value
// interpolated into a longer string.
func TestHTTPRequestSendsWhatInterpolationWrites(t *testing.T) {
	t.Parallel()
	type seen struct{ header, text, body string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got <- seen{r.Header.Get("X-Filter"), r.Header.Get("X-Text"), string(raw)}
	}))
	t.Cleanup(srv.Close)
	input, err := domain.DecodeJSON([]byte(`{"filter":{"q":"a<b&c"},"id":12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`{"url": %q, "method": "POST",
		"headers": {"X-Filter": "{{ input.filter }}", "X-Text": "f={{ input.filter }}"},
		"body": {"q": "{{ input.filter.q }}", "id": "{{ input.id }}", "note": "<&>"}}`, srv.URL)
	if _, _, err := run(t, loopbackHTTP(t), config, domain.TemplateContext{Input: input}); err != nil {
		t.Fatal(err)
	}
	want := seen{header: `{"q":"a<b&c"}`, text: `f={"q":"a<b&c"}`, body: `{"id":12345678901234567890,"note":"<&>","q":"a<b&c"}`}
	if s := <-got; s != want {
		t.Errorf("server saw %+v,\nwant       %+v", s, want)
	}
}

// TestHTTPRequestOutputKeepsEveryDigit: a JSON response's integers past
// 2^53 keep their digits in the node's output, where float64 rounded them.
func TestHTTPRequestOutputKeepsEveryDigit(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id": 12345678901234567890, "price": 0.10}`)
	}))
	t.Cleanup(srv.Close)
	_, out, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": %q}`, srv.URL), domain.TemplateContext{})
	if err != nil {
		t.Fatal(err)
	}
	var output struct{ Body json.RawMessage }
	if err := json.Unmarshal([]byte(mustJSON(t, out)), &output); err != nil {
		t.Fatal(err)
	}
	if want := `{"id":12345678901234567890,"price":0.10}`; string(output.Body) != want {
		t.Errorf("body = %s, want %s", output.Body, want)
	}
}
