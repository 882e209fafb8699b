package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/fx"

	"github.com/sluicehq/sluice/adapters/postgres/pgtest"
	"github.com/sluicehq/sluice/cmd/sluice/service"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestAdminToken is the admin token of the servers StartSluice starts.
const TestAdminToken = "e2e-admin-token-0123456789"

// TestWebhookSecretKey is SLUICE_WEBHOOK_SECRET_KEY in the tests: 32
// bytes in base64.
const TestWebhookSecretKey = "c2x1aWNlLWUyZS13ZWJob29rLXNlY3JldC1rZXktMzI="

// StartSluice runs `sluice all` in-process against a fresh database on the
// real Postgres and the real Temporal server of the test stack, on its own
// task queues, and returns its base URL.
func StartSluice(t testing.TB, extra map[string]string) string {
	t.Helper()
	return StartSluiceWith(t, extra)
}

// StartSluiceWith is StartSluice with extra fx options, such as a
// decorator that replaces a component.
//
// A whole sluice runs a Temporal worker, which the fast tier (`make
// test-fast`, under -short) leaves out: there the test is skipped, and
// says so. `make test` runs it.
func StartSluiceWith(t testing.TB, extra map[string]string, opts ...fx.Option) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a whole sluice with its Temporal worker: not in the fast tier (-short); make test runs it")
	}
	dbURL := extra["DATABASE_URL"]
	if dbURL == "" {
		dbURL = pgtest.URL(t)
	}
	temporalAddr := TemporalAddress(t)
	env := map[string]string{
		"DATABASE_URL":                  dbURL,
		"TEMPORAL_ADDRESS":              temporalAddr,
		"TEMPORAL_TASK_QUEUE_PREFIX":    "t" + uuid.NewString()[:8] + ".",
		"SLUICE_ADMIN_ADDR":             "127.0.0.1:0",
		"SLUICE_ADMIN_TOKEN":            TestAdminToken,
		"SLUICE_WEBHOOK_SECRET_KEY":     TestWebhookSecretKey,
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
	// The API's port is chosen here, so that the test knows its URL, and
	// is free only until the app binds it: another package's process may
	// take it in between (make test runs the e2e packages side by side),
	// so a start that finds it taken chooses again.
	var app *fx.App
	var addr string
	for attempt := 1; ; attempt++ {
		addr = freeLoopbackAddr(t)
		env["SLUICE_HTTP_ADDR"] = addr
		cfg, err := service.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true)
		if err != nil {
			t.Fatal(err)
		}
		app = fx.New(append([]fx.Option{service.CommonModule, service.APIModule, service.DispatcherModule, service.WorkerModule, fx.Supply(cfg), fx.NopLogger}, opts...)...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = app.Start(ctx)
		cancel()
		if err == nil {
			break
		}
		if attempt == 5 || !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = app.Stop(ctx)
	})
	AppsByBase["http://"+addr] = runningApp{App: app, DBURL: dbURL}
	return "http://" + addr
}

// freeLoopbackAddr is a loopback address whose port was free a moment ago.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Call sends a JSON request and decodes a JSON answer into out.
func Call(t testing.TB, method, url, token string, body any, out any) int {
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

// ExecutionOf follows a queue item to its execution. A run can complete,
// and its item be deleted, before the first look, so a gone item's
// execution is found by the queue id it keeps.
func ExecutionOf(t testing.TB, base, workspaceID, queueID string) string {
	t.Helper()
	var executionID string
	porttest.Eventually(t, 30*time.Second, porttest.Holds("the queue item to name its execution", func() bool {
		var q map[string]any
		switch Call(t, "GET", base+"/api/v1/workflow/queue/"+queueID, TestAdminToken, nil, &q) {
		case 200:
			if id, ok := q["executionId"].(string); ok && q["status"] != "PENDING" && q["status"] != "CLAIMED" {
				executionID = id
				return true
			}
		case 404:
			var page struct {
				Items []struct{ ID string } `json:"items"`
			}
			Call(t, "GET", base+"/api/v1/workflow/executions?workspaceId="+workspaceID+"&queueId="+queueID, TestAdminToken, nil, &page)
			if len(page.Items) == 1 {
				executionID = page.Items[0].ID
				return true
			}
		}
		return false
	}))
	return executionID
}
