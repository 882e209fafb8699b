package harness

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// WebhookReceiver is a local HTTPS receiver that records what it is sent
// and answers with what answer says for the nth request (from 1).
type WebhookReceiver struct {
	Srv    *httptest.Server
	Mu     sync.Mutex
	Bodies [][]byte
	Heads  []http.Header
	Times  []time.Time
}

// NewWebhookReceiver starts a WebhookReceiver, closed when the test ends.
func NewWebhookReceiver(t *testing.T, answer func(n int, r *http.Request) int) *WebhookReceiver {
	t.Helper()
	rc := &WebhookReceiver{}
	rc.Srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.Mu.Lock()
		rc.Bodies = append(rc.Bodies, body)
		rc.Heads = append(rc.Heads, r.Header.Clone())
		rc.Times = append(rc.Times, time.Now())
		n := len(rc.Bodies)
		rc.Mu.Unlock()
		w.WriteHeader(answer(n, r))
	}))
	t.Cleanup(rc.Srv.Close)
	return rc
}

// Count is how many requests the receiver has had.
func (rc *WebhookReceiver) Count() int {
	rc.Mu.Lock()
	defer rc.Mu.Unlock()
	return len(rc.Bodies)
}

// WebhookCAFile writes the test TLS servers' certificate (httptest's one
// built-in certificate, for 127.0.0.1) as the CA file the sender trusts.
func WebhookCAFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// RegisterWebhook registers url for every event in ws and returns the
// endpoint's id and secret.
func RegisterWebhook(t *testing.T, base, ws, url string) (id, secret string) {
	t.Helper()
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if code := Call(t, "POST", base+"/api/v1/webhooks/endpoints", TestAdminToken, map[string]any{
		"workspaceId": ws, "url": url, "events": []string{"execution.completed", "execution.failed", "execution.cancelled"},
	}, &ep); code != 201 {
		t.Fatalf("register webhook: %d", code)
	}
	return ep.ID, ep.Secret
}

// PublicHookURL is a webhook target the guard accepts, a public address
// (the documentation ranges such as TEST-NET-3 are refused as special
// purpose); the API tests run no sender, so nothing is ever sent there.
const PublicHookURL = "https://93.184.215.14/hook"
