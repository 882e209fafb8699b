package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// HTTPRequest runs HTTP_REQUEST nodes. A 429 or 503 with a Retry-After it
// can read is a ports.RetryAfterError, which the engine waits out without
// spending an attempt (on the outbound path). Otherwise a 4xx answer is a
// permanent failure (or, when the node's retry policy lists finalStatuses,
// a status it lists: domain.RetryPolicy.FinalHTTPStatus);
// a 5xx, a timeout or a network error is returned as retryable so that
// Temporal retries it with backoff. A target the network guard refuses, a
// redirect past MaxRedirects and an answer over a size limit are permanent.
type HTTPRequest struct {
	client *http.Client
	guard  guard
	cfg    Config
}

// NewHTTPRequest builds the executor. Its client has no timeout of its own
// (each node's config sets one), ignores the proxy environment variables
// and connects only where the guard lets it.
func NewHTTPRequest(cfg Config) *HTTPRequest {
	cfg = cfg.withDefaults()
	h := &HTTPRequest{cfg: cfg, guard: guard{allow: cfg.Allow}}
	transport := &http.Transport{
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: cfg.ResponseHeadersMax,
	}
	if cfg.Proxy != nil {
		transport.Proxy = http.ProxyURL(cfg.Proxy)
		h.guard.proxyHost = cfg.Proxy.Hostname()
	}
	transport.DialContext = h.guard.dialContext(h.guard.newDialer(cfg.Resolver))
	h.client = &http.Client{Transport: transport, CheckRedirect: h.checkRedirect}
	return h
}

// Type is HTTP_REQUEST.
func (*HTTPRequest) Type() domain.NodeType { return domain.NodeHTTPRequest }

// HTTPOutput is an HTTP node's output, available to later templates as
// steps.<key>.output.status, .headers and .body.
type HTTPOutput struct {
	Status int `json:"status"`
	// Headers has lower-cased names; sensitive values are domain.Redacted.
	Headers map[string]string `json:"headers"`
	// Body is the parsed JSON when the response is JSON, else the text.
	Body any `json:"body"`
}

// httpInput is the resolved request, kept on the node record with its
// secrets redacted.
type httpInput struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    any               `json:"body,omitempty"`
}

// redacted is the input as it may be stored and shown.
func (in httpInput) redacted() httpInput {
	in.URL = domain.RedactURL(in.URL)
	in.Headers = domain.RedactHeaders(in.Headers)
	return in
}

// Execute resolves the request's templates, sends it and classifies the
// answer. The input it returns, and every error text, has the URL's
// credentials and query values and the sensitive header values redacted.
func (h *HTTPRequest) Execute(ctx context.Context, run ports.NodeRun) (any, any, error) {
	in, out, err := h.execute(ctx, run)
	if err != nil {
		return in.redacted(), nil, err
	}
	return in.redacted(), out, nil
}

func (h *HTTPRequest) execute(ctx context.Context, run ports.NodeRun) (httpInput, any, error) {
	cfg, err := domain.DecodeHTTPRequestConfig(run.Node.Config)
	if err != nil {
		return httpInput{}, nil, ports.Permanent("invalid_config", err)
	}
	tc := run.Context
	tc.Budget = domain.NewTemplateBudget(h.cfg.TemplateBudget)
	in, err := resolveRequest(cfg, tc)
	if err != nil {
		return in, nil, err
	}
	// what names the request in errors, without its secrets.
	what := in.Method + " " + domain.RedactURL(in.URL)
	var body io.Reader
	if in.Body != nil {
		raw, encodeErr := domain.EncodeJSON(in.Body)
		if encodeErr != nil {
			return in, nil, ports.Permanent("invalid_body", encodeErr)
		}
		body = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout.Std())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, in.Method, in.URL, body)
	if err != nil {
		return in, nil, ports.Permanent("invalid_request", fmt.Errorf("http %s: %s", what, domain.RedactURLsIn(err.Error(), in.URL)))
	}
	if err = h.guard.checkURL(req.URL); err != nil {
		return in, nil, ports.Permanent("refused_target", fmt.Errorf("http %s: %w", what, err))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range in.Headers {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return in, nil, h.requestError(what, err)
	}
	defer resp.Body.Close()
	raw, err := h.readBody(resp)
	if err != nil {
		return in, nil, fmt.Errorf("http %s: %w", what, err)
	}
	out := HTTPOutput{Status: resp.StatusCode, Headers: map[string]string{}, Body: parseBody(resp.Header.Get("Content-Type"), raw)}
	for k := range resp.Header {
		out.Headers[strings.ToLower(k)] = resp.Header.Get(k)
	}
	out.Headers = domain.RedactHeaders(out.Headers)
	if err := retryAfter(resp, req.URL, what, time.Now()); err != nil {
		return in, nil, err
	}
	switch {
	case resp.StatusCode >= 400 && run.Node.Retry.FinalHTTPStatus(resp.StatusCode):
		return in, nil, ports.Permanent(statusKind(resp.StatusCode), fmt.Errorf("http %s: %s %d", what, statusClass(resp.StatusCode), resp.StatusCode))
	case resp.StatusCode >= 400:
		return in, nil, fmt.Errorf("http %s: %s %d", what, statusClass(resp.StatusCode), resp.StatusCode)
	}
	return in, out, nil
}

// statusKind is the error kind of a final error status.
func statusKind(status int) string {
	if status >= 500 {
		return "http_5xx"
	}
	return "http_4xx"
}

// statusClass names an error status's class in messages.
func statusClass(status int) string {
	if status >= 500 {
		return "server error"
	}
	return "client error"
}

// errTooManyRedirects fails a request on its redirect past MaxRedirects.
var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", MaxRedirects)

// errBodyRedirect refuses a 307 or 308 that would resend a request's body
// to another origin.
var errBodyRedirect = errors.New("refused: a 307/308 redirect to another origin would resend the request body")

// requestError classifies a failed round trip. The client's own error
// quotes the full URL, so only its cause is kept, under the redacted one.
func (h *HTTPRequest) requestError(what string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		return ports.Permanent("refused_target", fmt.Errorf("http %s: %w", what, refused))
	case errors.Is(err, errTooManyRedirects):
		return ports.Permanent("too_many_redirects", fmt.Errorf("http %s: %w", what, err))
	case errors.Is(err, errBodyRedirect):
		return ports.Permanent("refused_redirect", fmt.Errorf("http %s: %w", what, err))
	case strings.Contains(err.Error(), "server response headers exceeded"):
		return ports.Permanent("response_too_large", fmt.Errorf("http %s: response headers are over %d bytes (%s)",
			what, h.cfg.ResponseHeadersMax, EnvResponseHeadersMax))
	}
	// Timeouts and network errors: worth another try.
	return fmt.Errorf("http %s: %w", what, err)
}

// readBody reads the whole body, failing (permanently) rather than cutting
// one that is over the limit: a cut JSON body would not parse, and a cut
// text would pass for the whole answer.
func (h *HTTPRequest) readBody(resp *http.Response) ([]byte, error) {
	limit := h.cfg.ResponseBodyMax
	tooLarge := func(size string) error {
		return ports.Permanent("response_too_large", fmt.Errorf("response body of %s is over the limit of %d bytes (%s)", size, limit, EnvResponseBodyMax))
	}
	if resp.ContentLength > limit && resp.Request.Method != http.MethodHead {
		return nil, tooLarge(fmt.Sprintf("%d bytes", resp.ContentLength))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if int64(len(raw)) > limit {
		return nil, tooLarge("more than " + fmt.Sprint(limit) + " bytes")
	}
	return raw, nil
}

// checkRedirect follows at most MaxRedirects redirects, each to a target
// the guard accepts, and drops the sensitive headers (domain.SensitiveHeader)
// when one leaves the first request's origin: a token meant for one service
// is not handed to whichever host it redirects to.
func (h *HTTPRequest) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return errTooManyRedirects
	}
	if err := h.guard.checkURL(req.URL); err != nil {
		return err
	}
	if origin(req.URL) != origin(via[0].URL) {
		// A 307 or 308 repeats the method and the body: sent to another
		// origin, a body built for the first could carry its data (and
		// secrets templated into it) to a host the tenant never named.
		if code := req.Response.StatusCode; (code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect) && req.GetBody != nil && req.ContentLength != 0 {
			return errBodyRedirect
		}
		for name := range req.Header {
			if domain.SensitiveHeader(name) {
				req.Header.Del(name)
			}
		}
	}
	return nil
}

// origin is a URL's scheme, host and port, the port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// resolveRequest resolves the request's templates, all charged to tc's
// budget, and checks what they produced. Every error is permanent: the same
// templates over the same outputs resolve the same way on every attempt.
func resolveRequest(cfg domain.HTTPRequestConfig, tc domain.TemplateContext) (httpInput, error) {
	in := httpInput{Method: cfg.Method, Headers: map[string]string{}}
	rawURL, err := domain.Resolve(cfg.URL, tc)
	if err != nil {
		return in, templateError("url", err)
	}
	if in.URL, err = domain.TemplateText(rawURL); err != nil {
		return in, templateError("url", err)
	}
	// Validation only checks URLs without templates; a resolved one is
	// checked here, or a bad scheme would fail in the client as a
	// "network error" and be retried for nothing.
	if u, err := url.Parse(in.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return in, ports.Permanent("invalid_url", fmt.Errorf("url %q is not an absolute http(s) URL", domain.RedactURL(in.URL)))
	}
	if u, _ := url.Parse(in.URL); domain.AmbiguousIPv4Host(u.Hostname()) {
		return in, ports.Permanent("invalid_url", errors.New(domain.AmbiguousIPv4Problem(u.Hostname())))
	}
	for k, v := range cfg.Headers {
		rv, err := domain.Resolve(v, tc)
		if err != nil {
			return in, templateError("header "+k, err)
		}
		if in.Headers[k], err = domain.TemplateText(rv); err != nil {
			return in, templateError("header "+k, err)
		}
		if strings.ContainsAny(in.Headers[k], "\r\n") {
			return in, ports.Permanent("invalid_header", fmt.Errorf("header %s: resolved value contains a line break", k))
		}
	}
	if len(cfg.Body) > 0 {
		b, err := domain.ResolveJSON(cfg.Body, tc)
		if err != nil {
			return in, templateError("body", err)
		}
		in.Body = b
	}
	return in, nil
}

func parseBody(contentType string, raw []byte) any {
	if strings.Contains(contentType, "json") || json.Valid(raw) && len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') {
		if v, err := domain.DecodeJSON(raw); err == nil {
			return v
		}
	}
	return string(raw)
}

// retryAfterMax caps a Retry-After as read, far past any configured
// maximum pause, so that no answer overflows a duration.
const retryAfterMax = 24 * time.Hour

// retryAfter is the RetryAfterError of a 429 or 503 that carries a
// Retry-After the node can wait for: delay-seconds, or an HTTP date (a
// date already passed asks for no wait). Any other answer gives nil and is
// classified as before.
func retryAfter(resp *http.Response, target *url.URL, what string, now time.Time) error {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return nil
	}
	value := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if value == "" {
		return nil
	}
	var wait time.Duration
	if secs, err := strconv.ParseUint(value, 10, 64); err == nil {
		wait = time.Duration(min(secs, uint64(retryAfterMax/time.Second))) * time.Second
	} else if at, err := http.ParseTime(value); err == nil {
		wait = min(max(at.Sub(now), 0), retryAfterMax)
	} else {
		return nil
	}
	return &ports.RetryAfterError{
		Host: domain.OutboundHostOf(target.Hostname()), Status: resp.StatusCode, Wait: wait,
		Err: fmt.Errorf("http %s: %d with Retry-After %s", what, resp.StatusCode, value),
	}
}

// TargetHost resolves the node's URL, as Execute would, and names its
// host.
func (h *HTTPRequest) TargetHost(run ports.NodeRun) (string, bool) {
	cfg, err := domain.DecodeHTTPRequestConfig(run.Node.Config)
	if err != nil {
		return "", false
	}
	tc := run.Context
	tc.Budget = domain.NewTemplateBudget(h.cfg.TemplateBudget)
	in, err := resolveRequest(cfg, tc)
	if err != nil {
		return "", false
	}
	u, err := url.Parse(in.URL)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	return domain.OutboundHostOf(u.Hostname()), true
}
