package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/domain"
	"github.com/sluicehq/sluice/ports"
)

// maxResponseBody bounds what a node keeps of a response, since outputs
// are stored and passed through Temporal's history.
const maxResponseBody = 1 << 20

// HTTPRequest runs HTTP_REQUEST nodes. A 4xx answer is a permanent failure;
// a 5xx, a timeout or a network error is returned as retryable so that
// Temporal retries it with backoff.
type HTTPRequest struct {
	Client *http.Client
}

// NewHTTPRequest builds the executor on a client without its own timeout:
// each node's config sets one.
func NewHTTPRequest() *HTTPRequest {
	return &HTTPRequest{Client: &http.Client{}}
}

// Type is HTTP_REQUEST.
func (*HTTPRequest) Type() domain.NodeType { return domain.NodeHTTPRequest }

// HTTPOutput is an HTTP node's output, available to later templates as
// steps.<key>.output.status, .headers and .body.
type HTTPOutput struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the parsed JSON when the response is JSON, else the text.
	Body any `json:"body"`
}

// httpInput is the resolved request, kept on the node record.
type httpInput struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    any               `json:"body,omitempty"`
}

// Execute resolves the request's templates, sends it and classifies the
// answer.
func (h *HTTPRequest) Execute(ctx context.Context, run ports.NodeRun) (any, any, error) {
	cfg, err := domain.DecodeHTTPRequestConfig(run.Node.Config)
	if err != nil {
		return nil, nil, ports.Permanent("invalid_config", err)
	}
	in, err := resolveRequest(cfg, run.Context)
	if err != nil {
		return in, nil, err
	}
	var body io.Reader
	if in.Body != nil {
		raw, err := json.Marshal(in.Body)
		if err != nil {
			return in, nil, ports.Permanent("invalid_body", err)
		}
		body = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout.Std())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, in.Method, in.URL, body)
	if err != nil {
		return in, nil, ports.Permanent("invalid_request", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range in.Headers {
		req.Header.Set(k, v)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		// Timeouts and network errors: worth another try.
		return in, nil, fmt.Errorf("http %s %s: %w", in.Method, in.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return in, nil, fmt.Errorf("http %s %s: reading body: %w", in.Method, in.URL, err)
	}
	out := HTTPOutput{Status: resp.StatusCode, Headers: map[string]string{}, Body: parseBody(resp.Header.Get("Content-Type"), raw)}
	for k := range resp.Header {
		out.Headers[strings.ToLower(k)] = resp.Header.Get(k)
	}
	switch {
	case resp.StatusCode >= 500:
		return in, nil, fmt.Errorf("http %s %s: server error %d", in.Method, in.URL, resp.StatusCode)
	case resp.StatusCode >= 400:
		return in, nil, ports.Permanent("http_4xx", fmt.Errorf("http %s %s: client error %d", in.Method, in.URL, resp.StatusCode))
	}
	return in, out, nil
}

// resolveRequest resolves the request's templates and checks what they
// produced. Every error is permanent: the same templates over the same
// outputs resolve the same way on every attempt.
func resolveRequest(cfg domain.HTTPRequestConfig, tc domain.TemplateContext) (httpInput, error) {
	in := httpInput{Method: cfg.Method, Headers: map[string]string{}}
	rawURL, err := domain.Resolve(cfg.URL, tc)
	if err != nil {
		return in, ports.Permanent(templateKind(err), fmt.Errorf("url: %w", err))
	}
	in.URL = text(rawURL)
	// Validation only checks URLs without templates; a resolved one is
	// checked here, or a bad scheme would fail in the client as a
	// "network error" and be retried for nothing.
	if u, err := url.Parse(in.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return in, ports.Permanent("invalid_url", fmt.Errorf("url %q is not an absolute http(s) URL", in.URL))
	}
	for k, v := range cfg.Headers {
		rv, err := domain.Resolve(v, tc)
		if err != nil {
			return in, ports.Permanent(templateKind(err), fmt.Errorf("header %s: %w", k, err))
		}
		in.Headers[k] = text(rv)
		if strings.ContainsAny(in.Headers[k], "\r\n") {
			return in, ports.Permanent("invalid_header", fmt.Errorf("header %s: resolved value contains a line break", k))
		}
	}
	if len(cfg.Body) > 0 {
		b, err := domain.ResolveJSON(cfg.Body, tc)
		if err != nil {
			return in, ports.Permanent(templateKind(err), fmt.Errorf("body: %w", err))
		}
		in.Body = b
	}
	return in, nil
}

// text renders a resolved template value for a URL or a header: strings as
// they are, anything else (a number, an object) as compact JSON, which is
// what a template interpolated into a longer string gives too.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

func parseBody(contentType string, raw []byte) any {
	if strings.Contains(contentType, "json") || json.Valid(raw) && len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') {
		var v any
		if err := json.Unmarshal(raw, &v); err == nil {
			return v
		}
	}
	return string(raw)
}
