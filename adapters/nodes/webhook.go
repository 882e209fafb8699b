package nodes

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/sluicehq/sluice/ports"
)

// WebhookConfig bounds the completion webhooks' calls. They go through the
// guard of HTTP_REQUEST nodes (Config's Allow, Proxy and Resolver), never
// follow redirects, and read at most WebhookResponseMax bytes of an answer
// (its status is all that counts).
type WebhookConfig struct {
	// Timeout bounds one attempt, connection to last byte read.
	Timeout time.Duration
	// RootCAs, when set, are the certificate authorities trusted for
	// webhook targets instead of the system's (SLUICE_WEBHOOK_CA_FILE).
	RootCAs *x509.CertPool
}

// WebhookResponseMax is how much of a receiver's answer is read, to keep
// the connection reusable; the rest is not read.
const WebhookResponseMax = 64 << 10

// WebhookPoster signs deliveries following the Standard Webhooks
// specification and POSTs them through the network guard.
type WebhookPoster struct {
	client   *http.Client
	guard    guard
	resolver *net.Resolver
	timeout  time.Duration
}

var _ ports.WebhookPoster = (*WebhookPoster)(nil)

// NewWebhookPoster builds the poster over the nodes' guard configuration.
func NewWebhookPoster(nodes Config, cfg WebhookConfig) *WebhookPoster {
	p := &WebhookPoster{guard: guard{allow: nodes.Allow}, resolver: nodes.Resolver, timeout: cfg.Timeout}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	transport := &http.Transport{
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxResponseHeaderBytes: defaultResponseHeadsMax,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
	}
	if nodes.Proxy != nil {
		transport.Proxy = http.ProxyURL(nodes.Proxy)
		p.guard.proxyHost = nodes.Proxy.Hostname()
	}
	transport.DialContext = p.guard.dialContext(p.guard.newDialer(nodes.Resolver))
	p.client = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is an answer, not a delivery
	}}
	return p
}

// Post signs m with its endpoint's secret (webhook-id, webhook-timestamp,
// webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">) and
// sends it.
func (p *WebhookPoster) Post(ctx context.Context, m ports.WebhookMessage) (int, error) {
	signer, err := standardwebhooks.NewWebhook(m.Secret)
	if err != nil {
		return 0, fmt.Errorf("endpoint secret: %w", err)
	}
	sig, err := signer.Sign(m.ID.String(), m.Timestamp, m.Body)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(m.Body))
	if err != nil {
		return 0, err
	}
	if refused := p.guard.checkURL(req.URL); refused != nil {
		return 0, &ports.TargetRefusedError{Reason: refused.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Sluice-Webhooks/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, m.ID.String())
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(m.Timestamp.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := p.client.Do(req)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return 0, &ports.TargetRefusedError{Reason: refused.Error()}
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the endpoint's own, known to its owner
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, WebhookResponseMax))
	return resp.StatusCode, nil
}

// CheckTarget refuses a URL the guard would refuse: an address, written
// or resolved, of the service's own networks, or a port outside the
// guard's. A name that does not resolve is left to the send, whose dialer
// checks every address it connects to.
func (p *WebhookPoster) CheckTarget(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return &ports.TargetRefusedError{Reason: "not a URL"}
	}
	if refused := p.guard.checkURL(u); refused != nil {
		return &ports.TargetRefusedError{Reason: refused.Error()}
	}
	host := u.Hostname()
	if _, notAddr := netip.ParseAddr(host); notAddr == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if refused := p.guard.check(host, a.Unmap()); refused != nil {
			return &ports.TargetRefusedError{Reason: refused.Error()}
		}
	}
	return nil
}
