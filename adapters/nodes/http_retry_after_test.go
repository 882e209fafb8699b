package nodes_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// TestHTTPRequestRetryAfterAsksToWait: a 429 or 503 with a Retry-After in
// seconds or as an HTTP date is a RetryAfterError naming the host and the
// wait; without one, or with one it cannot read, or on another status, the
// answer is classified as before.
func TestHTTPRequestRetryAfterAsksToWait(t *testing.T) {
	t.Parallel()
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		wantWait   time.Duration // -1: no RetryAfterError
		permanent  bool
	}{
		{"429 in seconds", 429, "2", 2 * time.Second, false},
		{"503 in seconds", 503, "7", 7 * time.Second, false},
		{"429 as an HTTP date", 429, future, 90 * time.Second, false},
		{"429 at a date passed", 429, "Wed, 21 Oct 2015 07:28:00 GMT", 0, false},
		{"429 far in the future is capped", 429, "99999999999", 24 * time.Hour, false},
		{"429 without Retry-After", 429, "", -1, true},
		{"429 with an unreadable Retry-After", 429, "soon", -1, true},
		{"429 with a negative Retry-After", 429, "-5", -1, true},
		{"503 without Retry-After", 503, "", -1, false},
		{"500 with Retry-After", 500, "2", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			_, _, err := run(t, loopbackHTTP(t), `{"url": "`+srv.URL+`/x"}`, domain.TemplateContext{})
			var ra *ports.RetryAfterError
			var p *ports.PermanentError
			switch {
			case tc.wantWait < 0 && errors.As(err, &ra):
				t.Fatalf("got a RetryAfterError %v, want none", err)
			case tc.wantWait < 0:
				if errors.As(err, &p) != tc.permanent {
					t.Errorf("error %v: permanent %v, want %v", err, !tc.permanent, tc.permanent)
				}
			case !errors.As(err, &ra):
				t.Fatalf("error %v, want a RetryAfterError", err)
			case ra.Host != "127.0.0.1":
				t.Errorf("host %q, want 127.0.0.1", ra.Host)
			case ra.Wait < tc.wantWait-2*time.Second || ra.Wait > tc.wantWait:
				t.Errorf("wait %s, want %s", ra.Wait, tc.wantWait)
			}
		})
	}
}

// TestHTTPRequestTargetHostResolvesTheURL: the host is named from the URL
// as its templates resolve, in canonical form.
func TestHTTPRequestTargetHostResolvesTheURL(t *testing.T) {
	t.Parallel()
	exec := loopbackHTTP(t)
	node := domain.Node{Key: "n", Type: domain.NodeHTTPRequest, Config: []byte(`{"url": "https://{{ input.host }}:8443/p"}`)}
	host, ok := exec.TargetHost(ports.NodeRun{Node: node, Context: domain.TemplateContext{Input: map[string]any{"host": "API.Example.COM"}}})
	if !ok || host != "api.example.com" {
		t.Errorf("TargetHost = %q, %v; want api.example.com", host, ok)
	}
	if _, ok := exec.TargetHost(ports.NodeRun{Node: node, Context: domain.TemplateContext{}}); ok {
		t.Error("TargetHost of a URL whose template reads a missing path named a host")
	}
}
