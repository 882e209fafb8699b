package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("1.5s", "10m"), which people can write and read in a workflow
// definition. A JSON number is also accepted and means milliseconds, for
// clients that only deal in numbers.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string, the form people read best.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(data []byte) error {
	v, err := parseDuration(data)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// parseDuration reads a JSON duration string or number of milliseconds.
func parseDuration(data []byte) (Duration, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return 0, err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q (want e.g. \"1.5s\", \"10m\" or milliseconds as a number)", s)
		}
		return Duration(v), nil
	}
	ms, err := strconv.ParseFloat(string(data), 64)
	if err != nil {
		return 0, fmt.Errorf("duration must be a string like \"1.5s\" or a number of milliseconds, not %s", rawKind(data))
	}
	ns := math.Round(ms * float64(time.Millisecond))
	if math.IsNaN(ns) || ns > math.MaxInt64 || ns < math.MinInt64 {
		return 0, fmt.Errorf("duration of %s ms is out of range", string(data))
	}
	return Duration(ns), nil
}

// Limits and defaults of node configs.
const (
	// DefaultHTTPTimeout applies when an HTTP_REQUEST sets no timeout.
	DefaultHTTPTimeout = 30 * time.Second
	// MaxHTTPTimeout bounds an HTTP_REQUEST timeout, so a stuck endpoint
	// cannot hold a worker slot for long.
	MaxHTTPTimeout = 10 * time.Minute
	// MaxDelay bounds a DELAY node; longer waits belong in a schedule, not
	// in a running execution that holds a concurrency slot.
	MaxDelay = 30 * 24 * time.Hour
)

// httpMethods are the methods an HTTP_REQUEST may use. CONNECT and TRACE are
// left out: the first is for proxies, the second only echoes the request
// back, which can leak credentials from headers.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// HTTPRequestConfig configures an HTTP_REQUEST node. URL, header values and
// strings inside Body may contain templates; Method may not, so the kind of
// request is visible when the graph is reviewed.
type HTTPRequestConfig struct {
	// Method is one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS
	// (case-sensitive); GET when omitted.
	Method string `json:"method"`
	// URL is required. Without templates it must be an absolute http(s) URL.
	URL string `json:"url"`
	// Headers are sent with the request; names must be HTTP tokens.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is any JSON, sent as the request body after template resolution.
	Body json.RawMessage `json:"body,omitempty"`
	// Timeout bounds the request; DefaultHTTPTimeout when omitted or zero, at
	// most MaxHTTPTimeout.
	Timeout Duration `json:"timeout,omitempty"`
}

// TransformConfig configures a TRANSFORM node, which outputs Output with its
// templates resolved. It is how a workflow reshapes data between steps
// without code.
type TransformConfig struct {
	// Output is any JSON value; it is required (null is allowed).
	Output json.RawMessage `json:"output"`
}

// ConditionConfig configures a CONDITION node: "Left Op Right" on resolved
// values. It is deliberately a single comparison, not an expression
// language, so a definition can never run code.
type ConditionConfig struct {
	// Left is any JSON value, usually one template such as "{{ input.n }}".
	Left json.RawMessage `json:"left"`
	// Op is the comparison.
	Op CompareOp `json:"op"`
	// Right is required, except for OpExists where it must be omitted.
	Right json.RawMessage `json:"right,omitempty"`
}

// DelayConfig configures a DELAY node.
type DelayConfig struct {
	// Duration is how long to wait, from 0 to MaxDelay. A zero DELAY waits
	// for nothing; it is a join point that costs no timer.
	Duration Duration `json:"duration"`
}

// DecodeHTTPRequestConfig reads and checks an HTTP_REQUEST config strictly
// (unknown fields rejected) and applies the defaults. Problems are returned
// as a *ValidationError with paths relative to the config, such as "/url".
func DecodeHTTPRequestConfig(raw json.RawMessage) (HTTPRequestConfig, error) {
	return decodeStrict(raw, decodeHTTPRequestConfig)
}

// DecodeTransformConfig reads and checks a TRANSFORM config strictly; see
// DecodeHTTPRequestConfig for the error form.
func DecodeTransformConfig(raw json.RawMessage) (TransformConfig, error) {
	return decodeStrict(raw, decodeTransformConfig)
}

// DecodeConditionConfig reads and checks a CONDITION config strictly; see
// DecodeHTTPRequestConfig for the error form.
func DecodeConditionConfig(raw json.RawMessage) (ConditionConfig, error) {
	return decodeStrict(raw, decodeConditionConfig)
}

// DecodeDelayConfig reads and checks a DELAY config strictly; see
// DecodeHTTPRequestConfig for the error form.
func DecodeDelayConfig(raw json.RawMessage) (DelayConfig, error) {
	return decodeStrict(raw, decodeDelayConfig)
}

// decodeStrict runs one config decoder at the root and turns the problems
// it found into an error, or returns the config when there were none.
func decodeStrict[C any](raw json.RawMessage, decode func(json.RawMessage, string, *ValidationError) C) (C, error) {
	var ve ValidationError
	c := decode(raw, "", &ve)
	if err := ve.errOrNil(); err != nil {
		var zero C
		return zero, err
	}
	return c, nil
}

// configFields opens a config object; a missing or null config is a problem
// because every node type needs some configuration.
func configFields(raw json.RawMessage, path string, ve *ValidationError, allowed []string) map[string]json.RawMessage {
	if isNull(raw) {
		ve.add(path, "config is required (a JSON object)")
		return nil
	}
	f, _ := objectFields(raw, path, ve, allowed)
	return f
}

// present returns the field if it is there and not null.
func present(f map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	v, ok := f[name]
	if !ok || isNull(v) {
		return nil, false
	}
	return v, true
}

// decodeHTTPRequestConfig decodes and checks, reporting problems under path.
func decodeHTTPRequestConfig(raw json.RawMessage, path string, ve *ValidationError) HTTPRequestConfig {
	f := configFields(raw, path, ve, []string{"method", "url", "headers", "body", "timeout"})
	if f == nil {
		return HTTPRequestConfig{}
	}
	c := HTTPRequestConfig{Method: "GET", Timeout: Duration(DefaultHTTPTimeout)}

	if v, ok := present(f, "method"); ok {
		if s, ok := stringField(v, path+"/method", ve); ok {
			switch {
			case strings.Contains(s, "{{"):
				ve.add(path+"/method", "templates are not allowed in method")
			case !contains(httpMethods, s):
				ve.add(path+"/method", "unknown method %q (want one of %s; methods are case-sensitive)", s, strings.Join(httpMethods, ", "))
			default:
				c.Method = s
			}
		}
	}

	if v, ok := present(f, "url"); !ok {
		ve.add(path+"/url", "required")
	} else if s, ok := stringField(v, path+"/url", ve); ok {
		c.URL = s
		checkURL(s, path+"/url", ve)
	}

	if v, ok := present(f, "headers"); ok {
		if hf, _ := objectFields(v, path+"/headers", ve, nil); hf != nil {
			c.Headers = make(map[string]string, len(hf))
			for _, name := range sortedKeys(hf) {
				p := path + "/headers/" + JSONPointerToken(name)
				if !isHTTPToken(name) {
					ve.add(p, "invalid header name %q", name)
					continue
				}
				val, ok := stringField(hf[name], p, ve)
				if !ok {
					continue
				}
				if strings.ContainsAny(val, "\r\n") {
					ve.add(p, "header value may not contain line breaks")
					continue
				}
				if _, err := ParseTemplate(val); err != nil {
					ve.add(p, "%s", err.Error())
					continue
				}
				c.Headers[name] = val
			}
		}
	}

	if v, ok := present(f, "body"); ok {
		c.Body = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
		checkTemplates(v, path+"/body", ve)
	}

	if v, ok := present(f, "timeout"); ok {
		d, err := parseDuration(v)
		switch {
		case err != nil:
			ve.add(path+"/timeout", "%s", err.Error())
		case d < 0:
			ve.add(path+"/timeout", "must not be negative")
		case d.Std() > MaxHTTPTimeout:
			ve.add(path+"/timeout", "%s is longer than the maximum of %s", d, MaxHTTPTimeout)
		case d > 0:
			c.Timeout = d
		}
	}
	return c
}

// checkURL checks a URL template: templates must parse, and a URL without
// templates must be an absolute http or https URL.
func checkURL(s, path string, ve *ValidationError) {
	if strings.TrimSpace(s) == "" {
		ve.add(path, "required")
		return
	}
	parts, err := ParseTemplate(s)
	if err != nil {
		ve.add(path, "%s", err.Error())
		return
	}
	for _, p := range parts {
		if p.Ref != nil {
			return // checked after resolution, at run time
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		ve.add(path, "invalid URL: %s", err.Error())
		return
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		ve.add(path, "URL must start with http:// or https://")
		return
	}
	if u.Host == "" {
		ve.add(path, "URL has no host")
		return
	}
	if AmbiguousIPv4Host(u.Hostname()) {
		ve.add(path, "%s", AmbiguousIPv4Problem(u.Hostname()))
	}
}

// AmbiguousIPv4Host reports whether host is a name that URL parsers and
// resolvers (WHATWG URL, inet_aton) read as an IPv4 address although it is
// not the address's canonical dotted quad: its last label is a number,
// decimal, 0x-hexadecimal or 0-octal, as in 127.1, 2130706433, 0x7f000001
// or 127.000.000.001. Sent by name, a proxy or another resolver could take
// it for an address of its own network; written as a dotted quad, the
// network guard judges it.
func AmbiguousIPv4Host(host string) bool {
	h := strings.TrimSuffix(host, ".")
	if h == "" {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return false
	}
	last := h[strings.LastIndexByte(h, '.')+1:]
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// AmbiguousIPv4Problem is the refusal of a host AmbiguousIPv4Host reports.
func AmbiguousIPv4Problem(host string) string {
	return fmt.Sprintf("host %q is read as an IPv4 address by some resolvers; write the address as a.b.c.d", host)
}

// isHTTPToken reports whether s is a valid HTTP header name (RFC 9110 token).
func isHTTPToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// decodeTransformConfig decodes and checks, reporting problems under path.
func decodeTransformConfig(raw json.RawMessage, path string, ve *ValidationError) TransformConfig {
	f := configFields(raw, path, ve, []string{"output"})
	if f == nil {
		return TransformConfig{}
	}
	v, ok := f["output"]
	if !ok {
		ve.add(path+"/output", "required")
		return TransformConfig{}
	}
	checkTemplates(v, path+"/output", ve)
	return TransformConfig{Output: append(json.RawMessage(nil), bytes.TrimSpace(v)...)}
}

// decodeConditionConfig decodes and checks, reporting problems under path.
func decodeConditionConfig(raw json.RawMessage, path string, ve *ValidationError) ConditionConfig {
	f := configFields(raw, path, ve, []string{"left", "op", "right"})
	if f == nil {
		return ConditionConfig{}
	}
	var c ConditionConfig
	if v, ok := f["left"]; !ok {
		ve.add(path+"/left", "required")
	} else {
		c.Left = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
		checkTemplates(v, path+"/left", ve)
	}
	if v, ok := present(f, "op"); !ok {
		ve.add(path+"/op", "required")
	} else if s, ok := stringField(v, path+"/op", ve); ok {
		c.Op = CompareOp(s)
		if !c.Op.Valid() {
			ve.add(path+"/op", "unknown operator %q (want one of %s)", s, joinOps())
		}
	}
	v, hasRight := f["right"]
	switch {
	case c.Op == OpExists && hasRight:
		ve.add(path+"/right", "must be omitted for the exists operator")
	case c.Op != OpExists && c.Op.Valid() && !hasRight:
		ve.add(path+"/right", "required for the %s operator", c.Op)
	case hasRight:
		c.Right = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
		checkTemplates(v, path+"/right", ve)
	}
	return c
}

// decodeDelayConfig decodes and checks, reporting problems under path.
func decodeDelayConfig(raw json.RawMessage, path string, ve *ValidationError) DelayConfig {
	f := configFields(raw, path, ve, []string{"duration"})
	if f == nil {
		return DelayConfig{}
	}
	v, ok := present(f, "duration")
	if !ok {
		ve.add(path+"/duration", "required")
		return DelayConfig{}
	}
	d, err := parseDuration(v)
	switch {
	case err != nil:
		ve.add(path+"/duration", "%s", err.Error())
	case d < 0:
		ve.add(path+"/duration", "must not be negative")
	case d.Std() > MaxDelay:
		ve.add(path+"/duration", "%s is longer than the maximum of %s", d, MaxDelay)
	default:
		return DelayConfig{Duration: d}
	}
	return DelayConfig{}
}
