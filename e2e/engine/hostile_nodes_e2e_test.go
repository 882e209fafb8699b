package engine

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/e2e/harness"
)

// hostileRecord is a node record with its input, as GET shows it.
type hostileRecord struct {
	Key    string          `json:"key"`
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
	Error  *string         `json:"error"`
}

// finalRecords waits for the execution to end and returns its status, its
// node records by key and the raw body GET answered.
func finalRecords(e *harness.E2E, id string) (string, map[string]hostileRecord, string) {
	e.T.Helper()
	e.WaitFor(id, "COMPLETED", "FAILED")
	req, err := http.NewRequest("GET", e.Base+"/api/v1/workflow/executions/"+id, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+harness.TestAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		e.T.Fatal(err)
	}
	var ex struct {
		Status string          `json:"status"`
		Nodes  []hostileRecord `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &ex); err != nil {
		e.T.Fatal(err)
	}
	byKey := map[string]hostileRecord{}
	for _, n := range ex.Nodes {
		byKey[n.Key] = n
	}
	return ex.Status, byKey, string(raw)
}

// TestHostileNodesAreRefusedAndRecorded runs what a hostile workspace would
// put in its nodes on the real stack: requests to the service's own network,
// a template that multiplies a large input, and a credential it templates
// into a header. Only 127.0.0.1 is allowed, for the one legitimate server.
func TestHostileNodesAreRefusedAndRecorded(t *testing.T) {
	base := harness.StartSluice(t, map[string]string{"SLUICE_HTTP_NODE_ALLOW": "127.0.0.1/32"})
	e := harness.NewE2E(t, base)

	t.Run("private targets are refused and the record names the rule", func(t *testing.T) {
		e.T = t
		for _, tt := range []struct{ url, want string }{
			{"http://169.254.169.254/latest/meta-data/iam/security-credentials/", "refused: 169.254.169.254 is link-local; allow it with SLUICE_HTTP_NODE_ALLOW"},
			{"http://127.0.0.2:8080/admin", "127.0.0.2 is loopback"},
			{"http://[::1]:8080/", "::1 is loopback"},
			{"http://10.0.0.1/", "10.0.0.1 is private (RFC 1918)"},
			{"http://[::ffff:192.168.1.1]/", "is private (RFC 1918)"},
			{"http://100.100.100.200/latest/meta-data/", "is shared address space"},
			{"http://[::a9fe:a9fe]/latest/meta-data/", "is link-local"},
			{"http://[2002:a9fe:a9fe::1]/latest/meta-data/", "is link-local"},
			{"http://[64:ff9b:1::a9fe:a9fe]/", "is local-use NAT64"},
			{"http://240.0.0.1/", "is reserved (240.0.0.0/4)"},
			{"http://198.18.0.1/", "is benchmarking (198.18.0.0/15)"},
			{"http://93.184.216.34:25/", "port 25 of 93.184.216.34 is outside the ports HTTP_REQUEST reaches"},
		} {
			id := e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": tt.url})}}, nil)
			status, nodes, _ := finalRecords(e, id)
			call := nodes["call"]
			if status != "FAILED" || call.Status != "FAILED" || call.Error == nil || !strings.Contains(*call.Error, tt.want) {
				t.Errorf("%s: execution %s, node %s, error %v; want FAILED naming %q", tt.url, status, call.Status, call.Error, tt.want)
			}
		}
	})

	t.Run("a redirect to the metadata address is refused", func(t *testing.T) {
		e.T = t
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}))
		defer srv.Close()
		id := e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL})}}, nil)
		status, nodes, _ := finalRecords(e, id)
		if c := nodes["call"]; status != "FAILED" || c.Error == nil || !strings.Contains(*c.Error, "169.254.169.254 is link-local") {
			t.Errorf("execution %s, node %+v; want FAILED naming the refused address", status, c)
		}
	})

	t.Run("template amplification fails the node with a clear error", func(t *testing.T) {
		e.T = t
		graph := map[string]any{"nodes": []any{harness.Node("amplify", "TRANSFORM", map[string]any{
			"output": strings.Repeat("{{ input.s }}", 2000),
		})}}
		id := e.Start(graph, map[string]any{"s": strings.Repeat("x", 400<<10)})
		status, nodes, _ := finalRecords(e, id)
		a := nodes["amplify"]
		if status != "FAILED" || a.Status != "FAILED" || a.Error == nil ||
			!strings.Contains(*a.Error, "the budget is 1048576 bytes") || !strings.Contains(*a.Error, "SLUICE_NODE_TEMPLATE_BUDGET") {
			t.Errorf("execution %s, node %s, error %v; want FAILED naming the template budget", status, a.Status, a.Error)
		}
	})

	t.Run("a response body over its cap fails the node, not cut", func(t *testing.T) {
		e.T = t
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			_, _ = w.Write([]byte(strings.Repeat("a", 2<<20)))
		}))
		defer srv.Close()
		id := e.Start(map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{"url": srv.URL})}}, nil)
		status, nodes, _ := finalRecords(e, id)
		c := nodes["call"]
		if status != "FAILED" || c.Error == nil || !strings.Contains(*c.Error, "over the limit of 1048576 bytes (SLUICE_HTTP_NODE_RESPONSE_MAX)") {
			t.Errorf("execution %s, node %+v; want FAILED naming the response cap", status, c)
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("the server got %d requests, want 1: an answer over the cap is not retried", n)
		}
	})

	t.Run("a templated Authorization header and query token are redacted", func(t *testing.T) {
		e.T = t
		var gotAuth atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotAuth.Store(r.Header.Get("Authorization") + " " + r.URL.Query().Get("access_token"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		}))
		defer srv.Close()
		graph := map[string]any{"nodes": []any{harness.Node("call", "HTTP_REQUEST", map[string]any{
			"url":     srv.URL + "/v1?access_token={{ input.token }}",
			"headers": map[string]any{"Authorization": "Bearer {{ input.token }}", "X-Api-Key": "{{ input.token }}"},
		})}}
		id := e.Start(graph, map[string]any{"token": "tok-hostile-s3cr3t"})
		status, nodes, raw := finalRecords(e, id)
		if status != "COMPLETED" {
			t.Fatalf("execution %s: %v", status, nodes["call"].Error)
		}
		if got, _ := gotAuth.Load().(string); got != "Bearer tok-hostile-s3cr3t tok-hostile-s3cr3t" {
			t.Errorf("the server got %q: the credential must still be sent", got)
		}
		in := string(nodes["call"].Input)
		if !strings.Contains(in, `"Authorization":"[redacted]"`) || !strings.Contains(in, `access_token=[redacted]`) {
			t.Errorf("recorded input %s, want the Authorization header and the query value redacted", in)
		}
		// The execution's own input is the tenant's data, shown as sent;
		// no node record may repeat the credential.
		for _, n := range nodes {
			if strings.Contains(string(n.Input)+string(n.Output), "s3cr3t") {
				t.Errorf("node %s record holds the credential", n.Key)
			}
		}
		if strings.Count(raw, "tok-hostile-s3cr3t") != 1 {
			t.Errorf("GET shows the credential %d times, want once (the execution input): %s", strings.Count(raw, "tok-hostile-s3cr3t"), raw)
		}
	})
}

// TestDefinitionsWhoseTemplatesCanNeverFitAreRefused saves a chain of
// TRANSFORMs that multiplies a literal past the node budget.
func TestDefinitionsWhoseTemplatesCanNeverFitAreRefused(t *testing.T) {
	base := harness.StartSluice(t, nil)
	e := harness.NewE2E(t, base)
	graph := map[string]any{
		"nodes": []any{
			harness.Node("seed", "TRANSFORM", map[string]any{"output": strings.Repeat("x", 300<<10)}),
			harness.Node("grow", "TRANSFORM", map[string]any{"output": []any{
				"{{ steps.seed.output }}", "{{ steps.seed.output }}", "{{ steps.seed.output }}", "{{ steps.seed.output }}"}}),
		},
		"edges": []any{harness.Edge("seed", "grow")},
	}
	var problem struct {
		Errors []struct{ Path, Message string } `json:"errors"`
	}
	code := harness.Call(t, "POST", base+"/api/v1/workflow/definitions", harness.TestAdminToken,
		map[string]any{"workspaceId": e.Ws, "name": "amplifier", "graph": graph}, &problem)
	if code != 422 {
		t.Fatalf("save answered %d, want 422", code)
	}
	raw, _ := json.Marshal(problem)
	if !strings.Contains(string(raw), "/graph/nodes/1/config") || !strings.Contains(string(raw), "node template budget") {
		t.Errorf("problem %s, want it to name /graph/nodes/1/config and the budget", raw)
	}
}
