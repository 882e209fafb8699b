package nodes_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// executor returns the registered executor of typ from All(cfg).
func executor(t *testing.T, cfg nodes.Config, typ domain.NodeType) ports.NodeExecutor {
	t.Helper()
	for _, e := range nodes.All(cfg) {
		if e.Type() == typ {
			return e
		}
	}
	t.Fatalf("no executor for %s", typ)
	return nil
}

func limited(t *testing.T, change func(*nodes.Config)) nodes.Config {
	t.Helper()
	cfg := nodes.DefaultConfig()
	cfg.Allow = allowList(t, "127.0.0.0/8")
	change(&cfg)
	return cfg
}

func TestResponseBodyOverTheLimitFailsTheNode(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("a", 2000)
	for _, tt := range []struct {
		name    string
		chunked bool
	}{{"with Content-Length", false}, {"chunked", true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.chunked {
					w.(http.Flusher).Flush() // headers go out without a length
				} else {
					w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				}
				fmt.Fprint(w, body)
			}))
			t.Cleanup(srv.Close)
			exec := executor(t, limited(t, func(c *nodes.Config) { c.ResponseBodyMax = 1000 }), domain.NodeHTTPRequest)
			_, out, err := run(t, exec, fmt.Sprintf(`{"url": %q}`, srv.URL), domain.TemplateContext{})
			wantPermanent(t, err, "response_too_large")
			if out != nil || !strings.Contains(err.Error(), "over the limit of 1000 bytes (SLUICE_HTTP_NODE_RESPONSE_MAX)") {
				t.Errorf("output %v, error %v: want no output and an error naming the limit", out, err)
			}
		})
	}
	// At the limit, the whole body is kept.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body[:1000]) }))
	t.Cleanup(srv.Close)
	exec := executor(t, limited(t, func(c *nodes.Config) { c.ResponseBodyMax = 1000 }), domain.NodeHTTPRequest)
	_, out, err := run(t, exec, fmt.Sprintf(`{"url": %q}`, srv.URL), domain.TemplateContext{})
	if err != nil || len(roundTrip(t, out).(map[string]any)["body"].(string)) != 1000 {
		t.Errorf("a body at the limit: %v, want it whole", err)
	}
}

func TestResponseHeadersOverTheLimitFailTheNode(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 50 {
			w.Header().Set(fmt.Sprintf("X-H%d", i), strings.Repeat("v", 100))
		}
	}))
	t.Cleanup(srv.Close)
	exec := executor(t, limited(t, func(c *nodes.Config) { c.ResponseHeadersMax = 2000 }), domain.NodeHTTPRequest)
	_, _, err := run(t, exec, fmt.Sprintf(`{"url": %q}`, srv.URL), domain.TemplateContext{})
	wantPermanent(t, err, "response_too_large")
	if !strings.Contains(err.Error(), "SLUICE_HTTP_NODE_HEADERS_MAX") {
		t.Errorf("error %q does not name the setting", err)
	}
}

func TestTemplateAmplificationFailsTheNode(t *testing.T) {
	t.Parallel()
	tc := domain.TemplateContext{Input: map[string]any{"s": strings.Repeat("x", 400<<10)}}
	config := mustJSON(t, map[string]any{"output": strings.Repeat("{{ input.s }}", 2000)})
	_, _, err := run(t, executor(t, nodes.DefaultConfig(), domain.NodeTransform), config, tc)
	wantPermanent(t, err, "template_budget")
	if !strings.Contains(err.Error(), "the budget is 1048576 bytes") || !strings.Contains(err.Error(), "SLUICE_NODE_TEMPLATE_BUDGET") {
		t.Errorf("error %q does not name the budget and its setting", err)
	}
	// An HTTP node's URL, headers and body share one budget.
	small := limited(t, func(c *nodes.Config) { c.TemplateBudget = 1000 })
	tc = domain.TemplateContext{Input: map[string]any{"s": strings.Repeat("x", 600)}}
	_, _, err = run(t, executor(t, small, domain.NodeHTTPRequest),
		`{"url": "http://127.0.0.1:9/", "headers": {"X-A": "{{ input.s }}"}, "body": "{{ input.s }}"}`, tc)
	wantPermanent(t, err, "template_budget")
}

func TestSecretsAreRedactedInRecordsAndErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "sess-s3cr3t"})
		w.Header().Set("X-Request-Id", "r-1")
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	t.Cleanup(srv.Close)
	tc := domain.TemplateContext{Input: map[string]any{"token": "tok-s3cr3t"}}
	config := func(path string) string {
		return mustJSON(t, map[string]any{
			"url":     srv.URL + path + "?api_key={{ input.token }}",
			"headers": map[string]string{"Authorization": "Bearer {{ input.token }}", "X-Vendor-Token": "{{ input.token }}", "Accept": "text/plain"},
		})
	}
	input, out, err := run(t, loopbackHTTP(t), config("/ok"), tc)
	if err != nil {
		t.Fatal(err)
	}
	recorded := mustJSON(t, map[string]any{"input": input, "output": out})
	if strings.Contains(recorded, "s3cr3t") {
		t.Errorf("record holds a secret: %s", recorded)
	}
	for _, want := range []string{`"Authorization":"[redacted]"`, `"X-Vendor-Token":"[redacted]"`, `"Accept":"text/plain"`, `api_key=[redacted]`, `"set-cookie":"[redacted]"`, `"x-request-id":"r-1"`} {
		if !strings.Contains(recorded, want) {
			t.Errorf("record %s lacks %s", recorded, want)
		}
	}
	// Error texts: a server error, a network error, a refused target.
	refusing := nodes.NewHTTPRequest(nodes.DefaultConfig())
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, c := range map[string]struct {
		exec   ports.NodeExecutor
		config string
	}{
		"server error":  {loopbackHTTP(t), config("/fail")},
		"network error": {loopbackHTTP(t), strings.Replace(config("/x"), srv.URL, closed.URL, 1)},
		"refused":       {refusing, config("/x")},
	} {
		_, _, err := run(t, c.exec, c.config, tc)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "api_key=[redacted]") {
			t.Errorf("%s: error %v, want one naming the URL with its secret redacted", name, err)
		}
	}
}
