package engine

import (
	"bytes"
	"context"
	"encoding/json"
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

// fakeExecutors are the node executors the engine's tests run. They keep
// the contract of ports.NodeExecutor that the engine relies on (templates
// resolved by the domain's rules, a permanent error for what no retry can
// fix, a plain one for what a retry might, the context honoured) and
// nothing of adapters/nodes' network guard, size limits or redaction,
// which adapters/nodes tests itself.
func fakeExecutors() []ports.NodeExecutor {
	return []ports.NodeExecutor{fakeHTTPRequest{client: &http.Client{}}, fakeTransform{}, fakeCondition{}}
}

// fakeTransform outputs a TRANSFORM node's output tree with its templates
// resolved.
type fakeTransform struct{}

func (fakeTransform) Type() domain.NodeType { return domain.NodeTransform }

func (fakeTransform) Execute(_ context.Context, run ports.NodeRun) (any, any, error) {
	cfg, err := domain.DecodeTransformConfig(run.Node.Config)
	if err != nil {
		return nil, nil, ports.Permanent("invalid_config", err)
	}
	out, err := domain.ResolveJSON(cfg.Output, run.Context)
	if err != nil {
		return nil, nil, ports.Permanent("template", err)
	}
	return nil, out, nil
}

// fakeCondition outputs a CONDITION node's comparison result.
type fakeCondition struct{}

func (fakeCondition) Type() domain.NodeType { return domain.NodeCondition }

func (fakeCondition) Execute(_ context.Context, run ports.NodeRun) (any, any, error) {
	cfg, err := domain.DecodeConditionConfig(run.Node.Config)
	if err != nil {
		return nil, nil, ports.Permanent("invalid_config", err)
	}
	ok, err := domain.EvaluateCondition(cfg, run.Context)
	if err != nil {
		return nil, nil, ports.Permanent("condition", err)
	}
	return nil, ok, nil
}

// fakeHTTPRequest sends an HTTP_REQUEST node's request with net/http, for
// the tests' httptest servers. A 4xx answer is permanent; a 5xx answer or
// a failed round trip (a refused connection, the node's timeout, a
// cancelled activity) is retryable. Its output is {status, headers, body},
// the header names lower-cased and the body parsed when it is JSON.
type fakeHTTPRequest struct {
	client *http.Client
}

func (fakeHTTPRequest) Type() domain.NodeType { return domain.NodeHTTPRequest }

func (e fakeHTTPRequest) Execute(ctx context.Context, run ports.NodeRun) (any, any, error) {
	cfg, err := domain.DecodeHTTPRequestConfig(run.Node.Config)
	if err != nil {
		return nil, nil, ports.Permanent("invalid_config", err)
	}
	in := map[string]any{"method": cfg.Method}
	target, err := domain.Resolve(cfg.URL, run.Context)
	if err != nil {
		return in, nil, ports.Permanent("template", fmt.Errorf("url: %w", err))
	}
	in["url"] = asText(target)
	headers := map[string]string{}
	for name, value := range cfg.Headers {
		v, err := domain.Resolve(value, run.Context)
		if err != nil {
			return in, nil, ports.Permanent("template", fmt.Errorf("header %s: %w", name, err))
		}
		headers[name] = asText(v)
	}
	in["headers"] = headers
	var body io.Reader
	if len(cfg.Body) > 0 {
		b, err := domain.ResolveJSON(cfg.Body, run.Context)
		if err != nil {
			return in, nil, ports.Permanent("template", fmt.Errorf("body: %w", err))
		}
		in["body"] = b
		raw, err := json.Marshal(b)
		if err != nil {
			return in, nil, ports.Permanent("invalid_body", err)
		}
		body = bytes.NewReader(raw)
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout.Std())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, cfg.Method, asText(target), body)
	if err != nil {
		return in, nil, ports.Permanent("invalid_request", err)
	}
	for name, value := range headers {
		req.Header.Set(name, value)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return in, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return in, nil, err
	}
	what := cfg.Method + " " + req.URL.String()
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 &&
		(resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		return in, nil, &ports.RetryAfterError{Host: req.URL.Hostname(), Status: resp.StatusCode, Wait: time.Duration(secs) * time.Second,
			Err: fmt.Errorf("%s: status %d, Retry-After %d", what, resp.StatusCode, secs)}
	}
	switch {
	case resp.StatusCode >= 500:
		return in, nil, fmt.Errorf("%s: status %d", what, resp.StatusCode)
	case resp.StatusCode >= 400:
		return in, nil, ports.Permanent("http_4xx", fmt.Errorf("%s: status %d", what, resp.StatusCode))
	}
	respHeaders := map[string]any{}
	for name := range resp.Header {
		respHeaders[strings.ToLower(name)] = resp.Header.Get(name)
	}
	var parsed any = string(raw)
	var v any
	if json.Unmarshal(raw, &v) == nil {
		parsed = v
	}
	return in, map[string]any{"status": resp.StatusCode, "headers": respHeaders, "body": parsed}, nil
}

// TargetHost names the host of the node's URL as it resolves.
func (fakeHTTPRequest) TargetHost(run ports.NodeRun) (string, bool) {
	cfg, err := domain.DecodeHTTPRequestConfig(run.Node.Config)
	if err != nil {
		return "", false
	}
	v, err := domain.Resolve(cfg.URL, run.Context)
	if err != nil {
		return "", false
	}
	u, err := url.Parse(asText(v))
	if err != nil {
		return "", false
	}
	return u.Hostname(), true
}

// asText renders a resolved template value for a URL or a header: a string
// as it is, anything else as JSON.
func asText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}
