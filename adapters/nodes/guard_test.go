package nodes_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/adapters/nodes"
	"github.com/sluicehq/sluice/domain"
)

// fakeDNS is a resolver answering A queries from names, and nothing for
// other types, without reading /etc/hosts or asking any server: the Go
// resolver's Dial hook gets one end of a pipe, and the other end speaks DNS
// over its stream framing (a two-byte length before each message).
func fakeDNS(t *testing.T, names map[string]net.IP) *net.Resolver {
	t.Helper()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for {
				var size [2]byte
				if _, err := readFull(server, size[:]); err != nil {
					return
				}
				msg := make([]byte, binary.BigEndian.Uint16(size[:]))
				if _, err := readFull(server, msg); err != nil {
					return
				}
				reply := answer(msg, names)
				out := binary.BigEndian.AppendUint16(nil, uint16(len(reply)))
				if _, err := server.Write(append(out, reply...)); err != nil {
					return
				}
			}
		}()
		return client, nil
	}}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// answer builds the reply to one query: its header and question, and an A
// record when the name is known and the query asks for A.
func answer(q []byte, names map[string]net.IP) []byte {
	// The question starts after the 12-byte header: labels, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		n := int(q[i])
		labels = append(labels, string(q[i+1:i+1+n]))
		i += 1 + n
	}
	end := i + 1 + 4
	qtype := binary.BigEndian.Uint16(q[i+1:])
	ip := names[strings.ToLower(strings.Join(labels, "."))]
	reply := append([]byte(nil), q[:2]...)  // ID
	reply = append(reply, 0x81, 0x80, 0, 1) // response, recursion available; 1 question
	ancount := uint16(0)
	if ip != nil && qtype == 1 {
		ancount = 1
	}
	reply = binary.BigEndian.AppendUint16(reply, ancount)
	reply = append(reply, 0, 0, 0, 0) // no authority, no additional
	reply = append(reply, q[12:end]...)
	if ancount == 1 {
		reply = append(reply, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4) // name pointer, A, IN, TTL 60, 4 bytes
		reply = append(reply, ip.To4()...)
	}
	return reply
}

// guarded builds an executor with the allow list and the fake resolver.
func guarded(t *testing.T, allow string, names map[string]net.IP) *nodes.HTTPRequest {
	t.Helper()
	cfg := nodes.DefaultConfig()
	cfg.Allow = allowList(t, allow)
	cfg.Resolver = fakeDNS(t, names)
	return nodes.NewHTTPRequest(cfg)
}

// countingServer counts the requests it gets.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func port(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func TestGuardRefusesPrivateTargetsByDefault(t *testing.T) {
	t.Parallel()
	exec := nodes.NewHTTPRequest(nodes.DefaultConfig())
	for _, tt := range []struct{ url, want string }{
		{"http://169.254.169.254/latest/meta-data/", "refused: 169.254.169.254 is link-local; allow it with SLUICE_HTTP_NODE_ALLOW"},
		{"http://127.0.0.1:9/", "127.0.0.1 is loopback"},
		{"http://[::1]:9/", "::1 is loopback"},
		{"http://10.0.0.1/", "10.0.0.1 is private (RFC 1918)"},
		{"http://192.168.0.10/", "is private"},
		{"http://100.64.0.1/", "is shared address space"},
		{"http://[fd00::1]/", "is unique-local"},
		{"http://[fe80::1]/", "is link-local"},
		{"http://[::ffff:169.254.169.254]/", "is link-local"},
		{"http://0.0.0.0:9/", "is unspecified"},
		{"http://224.0.0.251/", "is link-local"},
		{"http://[::a9fe:a9fe]/", "is link-local"},
		{"http://[2002:a9fe:a9fe::]/", "is link-local"},
		{"http://[64:ff9b:1::a9fe:a9fe]/", "is local-use NAT64"},
		{"http://240.0.0.1/", "is reserved (240.0.0.0/4)"},
		{"http://198.18.0.1/", "is benchmarking (198.18.0.0/15)"},
		{"http://93.184.216.34:22/", "port 22 of 93.184.216.34 is outside the ports HTTP_REQUEST reaches"},
		{"http://example.com:25/", "port 25 of example.com is outside the ports HTTP_REQUEST reaches"},
	} {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			_, _, err := run(t, exec, fmt.Sprintf(`{"url": %q}`, tt.url), domain.TemplateContext{})
			wantPermanent(t, err, "refused_target")
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestGuardChecksTheResolvedAddressOfANameInTheDialer(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, nil)
	names := map[string]net.IP{"svc.test": net.ParseIP("127.0.0.1")}
	target := fmt.Sprintf(`{"url": "http://svc.test:%s/"}`, port(t, srv))

	_, _, err := run(t, guarded(t, "", names), target, domain.TemplateContext{})
	wantPermanent(t, err, "refused_target")
	if want := "svc.test resolves to an address that is loopback"; !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if hits.Load() != 0 {
		t.Fatal("the refused request reached the server")
	}

	// The same name allowed by name, then by address, goes through.
	for _, allow := range []string{"svc.test", "127.0.0.0/8"} {
		if _, _, err := run(t, guarded(t, allow, names), target, domain.TemplateContext{}); err != nil {
			t.Errorf("allow %q: %v", allow, err)
		}
	}
	if hits.Load() != 2 {
		t.Errorf("server got %d requests, want 2", hits.Load())
	}
}

func TestGuardRefusesARedirectToAPrivateAddress(t *testing.T) {
	t.Parallel()
	inner, innerHits := countingServer(t, nil)
	names := map[string]net.IP{"public.test": net.ParseIP("127.0.0.1"), "inner.test": net.ParseIP("127.0.0.1")}
	for _, tt := range []struct{ name, location, want string }{
		{name: "by address", location: "http://127.0.0.2:" + port(t, inner) + "/", want: "127.0.0.2 is loopback"},
		{name: "by name", location: "http://inner.test:" + port(t, inner) + "/", want: "inner.test resolves to an address that is loopback"},
		{name: "metadata", location: "http://169.254.169.254/latest/meta-data/", want: "169.254.169.254 is link-local"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			outer, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tt.location, http.StatusFound)
			})
			// Only the first host is allowed, by name.
			_, _, err := run(t, guarded(t, "public.test", names), fmt.Sprintf(`{"url": "http://public.test:%s/"}`, port(t, outer)), domain.TemplateContext{})
			wantPermanent(t, err, "refused_target")
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	if innerHits.Load() != 0 {
		t.Error("a refused redirect reached its target")
	}
}

func TestCrossOriginRedirectDropsCredentials(t *testing.T) {
	t.Parallel()
	sensitive := []string{"Authorization", "Cookie", "Proxy-Authorization", "X-Api-Key", "X-Auth-User", "Private-Token", "X-Client-Secret", "X-Password"}
	seen := make(chan http.Header, 2)
	target, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Clone() })
	origin, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/same" {
			http.Redirect(w, r, "/final", http.StatusFound)
			return
		}
		if r.URL.Path == "/final" {
			seen <- r.Header.Clone()
			return
		}
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	headers := map[string]string{"X-Plain": "kept"}
	for _, h := range sensitive {
		headers[h] = "secret-" + h
	}
	for _, tt := range []struct {
		path       string
		keepSecret bool
	}{{"/cross", false}, {"/same", true}} {
		cfg := map[string]any{"url": origin.URL + tt.path, "headers": headers}
		if _, _, err := run(t, loopbackHTTP(t), mustJSON(t, cfg), domain.TemplateContext{}); err != nil {
			t.Fatal(err)
		}
		got := <-seen
		if got.Get("X-Plain") != "kept" {
			t.Errorf("%s: X-Plain = %q, want it kept", tt.path, got.Get("X-Plain"))
		}
		for _, h := range sensitive {
			if kept := got.Get(h) != ""; kept != tt.keepSecret {
				t.Errorf("%s redirect: %s sent = %v, want %v", tt.path, h, kept, tt.keepSecret)
			}
		}
	}
}

func TestRedirectsStopAfterFive(t *testing.T) {
	t.Parallel()
	// /hop/N redirects to /hop/N-1; /hop/0 answers.
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/hop/%d", &n); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
		}
	})
	if _, _, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": "%s/hop/5"}`, srv.URL), domain.TemplateContext{}); err != nil {
		t.Errorf("5 redirects: %v, want them followed", err)
	}
	_, _, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": "%s/hop/6"}`, srv.URL), domain.TemplateContext{})
	wantPermanent(t, err, "too_many_redirects")
}

func TestConfiguredProxyCarriesRequests(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	proxy, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { got <- r.URL.String() })
	cfg := nodes.DefaultConfig()
	u, _ := url.Parse(proxy.URL)
	cfg.Proxy = u
	// The proxy is on loopback and allowed as the configured proxy; the
	// target is a public name the proxy would resolve.
	if _, _, err := run(t, nodes.NewHTTPRequest(cfg), `{"url": "http://api.example.com/x"}`, domain.TemplateContext{}); err != nil {
		t.Fatal(err)
	}
	if u := <-got; u != "http://api.example.com/x" {
		t.Errorf("proxy saw %q, want the absolute target URL", u)
	}
	// A literal private target is still refused before reaching the proxy.
	_, _, err := run(t, nodes.NewHTTPRequest(cfg), `{"url": "http://169.254.169.254/"}`, domain.TemplateContext{})
	wantPermanent(t, err, "refused_target")
}

func TestA307Or308ToAnotherOriginDoesNotResendTheBody(t *testing.T) {
	t.Parallel()
	target, targetHits := countingServer(t, nil)
	var sameOrigin atomic.Int32
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			origin, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/same":
					http.Redirect(w, r, "/final", code)
				case "/final":
					sameOrigin.Add(1)
				default:
					http.Redirect(w, r, target.URL+"/elsewhere", code)
				}
			})
			cfg := map[string]any{"method": "POST", "url": origin.URL + "/cross", "body": map[string]any{"secret": "s3cr3t"}}
			_, _, err := run(t, loopbackHTTP(t), mustJSON(t, cfg), domain.TemplateContext{})
			wantPermanent(t, err, "refused_redirect")
			if err == nil || !strings.Contains(err.Error(), "would resend the request body") {
				t.Errorf("error = %v, want it to name the resent body", err)
			}
			// To the same origin the body follows, as the client would.
			cfg["url"] = origin.URL + "/same"
			if _, _, err := run(t, loopbackHTTP(t), mustJSON(t, cfg), domain.TemplateContext{}); err != nil {
				t.Errorf("same-origin %d: %v", code, err)
			}
		})
	}
	if targetHits.Load() != 0 {
		t.Error("the body reached the other origin")
	}
	if sameOrigin.Load() != 2 {
		t.Errorf("%d same-origin redirects followed, want 2", sameOrigin.Load())
	}
}

func TestHostsOtherResolversReadAsIPv4AreRefused(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, nil)
	for _, host := range []string{"127.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.000.000.001", "foo.0x7f"} {
		// Saved without templates, the definition is refused (domain's
		// validation); resolved from a template, the node is.
		_, _, err := run(t, loopbackHTTP(t), fmt.Sprintf(`{"url": "http://{{ input.h }}:%s/"}`, port(t, srv)),
			domain.TemplateContext{Input: map[string]any{"h": host}})
		wantPermanent(t, err, "invalid_url")
		if err == nil || !strings.Contains(err.Error(), "read as an IPv4 address") {
			t.Errorf("%s: error = %v, want it refused as an address in disguise", host, err)
		}
	}
	if hits.Load() != 0 {
		t.Error("a refused host reached the server")
	}
}
