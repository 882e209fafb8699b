package domain

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDecodeHTTPRequestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want HTTPRequestConfig
		errs []Problem
	}{
		{
			name: "defaults",
			in:   `{"url":"https://api.example.com/users"}`,
			want: HTTPRequestConfig{Method: "GET", URL: "https://api.example.com/users", Timeout: Duration(30 * time.Second)},
		},
		{
			name: "everything set",
			in:   `{"method":"POST","url":"https://x.test/{{ input.id }}","headers":{"Authorization":"Bearer {{ input.token }}"},"body":{"n":"{{ steps.a.output.n }}"},"timeout":"2m"}`,
			want: HTTPRequestConfig{
				Method: "POST", URL: "https://x.test/{{ input.id }}",
				Headers: map[string]string{"Authorization": "Bearer {{ input.token }}"},
				Body:    json.RawMessage(`{"n":"{{ steps.a.output.n }}"}`),
				Timeout: Duration(2 * time.Minute),
			},
		},
		{name: "url may be one template", in: `{"url":"{{ input.url }}"}`, want: HTTPRequestConfig{Method: "GET", URL: "{{ input.url }}", Timeout: Duration(DefaultHTTPTimeout)}},
		{name: "timeout in milliseconds", in: `{"url":"http://x.test","timeout":1500}`, want: HTTPRequestConfig{Method: "GET", URL: "http://x.test", Timeout: Duration(1500 * time.Millisecond)}},
		{name: "zero timeout means default", in: `{"url":"http://x.test","timeout":"0s"}`, want: HTTPRequestConfig{Method: "GET", URL: "http://x.test", Timeout: Duration(DefaultHTTPTimeout)}},
		{name: "maximum timeout", in: `{"url":"http://x.test","timeout":"10m"}`, want: HTTPRequestConfig{Method: "GET", URL: "http://x.test", Timeout: Duration(MaxHTTPTimeout)}},
		{name: "missing config", in: ``, errs: []Problem{{"", "config is required"}}},
		{name: "null config", in: `null`, errs: []Problem{{"", "config is required"}}},
		{name: "missing url", in: `{}`, errs: []Problem{{"/url", "required"}}},
		{name: "blank url", in: `{"url":"  "}`, errs: []Problem{{"/url", "required"}}},
		{name: "relative url", in: `{"url":"/users"}`, errs: []Problem{{"/url", "http:// or https://"}}},
		{name: "other scheme", in: `{"url":"file:///etc/passwd"}`, errs: []Problem{{"/url", "http:// or https://"}}},
		{name: "bad template in url", in: `{"url":"https://x.test/{{ secrets.key }}"}`, errs: []Problem{{"/url", `unknown root "secrets"`}}},
		{name: "lower-case method", in: `{"method":"post","url":"http://x.test"}`, errs: []Problem{{"/method", `unknown method "post"`}}},
		{name: "TRACE is refused", in: `{"method":"TRACE","url":"http://x.test"}`, errs: []Problem{{"/method", "unknown method"}}},
		{name: "template in method", in: `{"method":"{{ input.m }}","url":"http://x.test"}`, errs: []Problem{{"/method", "templates are not allowed in method"}}},
		{name: "bad header name and value", in: `{"url":"http://x.test","headers":{"Bad Name":"x","X-A":"a\r\nb","X-B":1,"X-C":"{{ nope }}"}}`,
			errs: []Problem{{"/headers/Bad Name", "invalid header name"}, {"/headers/X-A", "line breaks"}, {"/headers/X-B", "must be a string"}, {"/headers/X-C", `unknown root "nope"`}}},
		{name: "header name with slash is escaped in the path", in: `{"url":"http://x.test","headers":{"a/b":"x"}}`, errs: []Problem{{"/headers/a~1b", "invalid header name"}}},
		{name: "bad template deep in body", in: `{"url":"http://x.test","body":{"items":[{"id":"{{ input.id"}]}}`, errs: []Problem{{"/body/items/0/id", "not closed"}}},
		{name: "negative timeout", in: `{"url":"http://x.test","timeout":"-1s"}`, errs: []Problem{{"/timeout", "negative"}}},
		{name: "timeout too long", in: `{"url":"http://x.test","timeout":"11m"}`, errs: []Problem{{"/timeout", "longer than the maximum"}}},
		{name: "timeout not a duration", in: `{"url":"http://x.test","timeout":"soon"}`, errs: []Problem{{"/timeout", `invalid duration "soon"`}}},
		{name: "unknown field", in: `{"url":"http://x.test","retries":3}`, errs: []Problem{{"/retries", "unknown field"}}},
		{name: "all problems at once", in: `{"method":"GO","timeout":true}`, errs: []Problem{{"/method", "unknown method"}, {"/url", "required"}, {"/timeout", "must be a string"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeHTTPRequestConfig(json.RawMessage(tt.in))
			if tt.errs != nil {
				assertProblems(t, problems(t, err), tt.errs)
				if !reflect.DeepEqual(got, HTTPRequestConfig{}) {
					t.Errorf("config returned with an error: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeTransformConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want TransformConfig
		errs []Problem
	}{
		{name: "object with templates", in: `{"output":{"id":"{{ input.id }}","n":[1,"{{ steps.a.output }}"]}}`, want: TransformConfig{Output: json.RawMessage(`{"id":"{{ input.id }}","n":[1,"{{ steps.a.output }}"]}`)}},
		{name: "null output is a value", in: `{"output":null}`, want: TransformConfig{Output: json.RawMessage(`null`)}},
		{name: "scalar output", in: `{"output":"x"}`, want: TransformConfig{Output: json.RawMessage(`"x"`)}},
		{name: "missing output", in: `{}`, errs: []Problem{{"/output", "required"}}},
		{name: "bad template", in: `{"output":{"a":"{{ steps.a }}"}}`, errs: []Problem{{"/output/a", "want steps.a.output"}}},
		{name: "unknown field", in: `{"output":1,"extra":2}`, errs: []Problem{{"/extra", "unknown field"}}},
		{name: "not an object", in: `[]`, errs: []Problem{{"", "must be a JSON object"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeTransformConfig(json.RawMessage(tt.in))
			if tt.errs != nil {
				assertProblems(t, problems(t, err), tt.errs)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %s, want %s", got.Output, tt.want.Output)
			}
		})
	}
}

func TestDecodeConditionConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want ConditionConfig
		errs []Problem
	}{
		{name: "comparison", in: `{"left":"{{ input.n }}","op":">=","right":3}`, want: ConditionConfig{Left: json.RawMessage(`"{{ input.n }}"`), Op: OpGe, Right: json.RawMessage(`3`)}},
		{name: "exists without right", in: `{"left":"{{ input.n }}","op":"exists"}`, want: ConditionConfig{Left: json.RawMessage(`"{{ input.n }}"`), Op: OpExists}},
		{name: "comparison with null", in: `{"left":"{{ input.n }}","op":"==","right":null}`, want: ConditionConfig{Left: json.RawMessage(`"{{ input.n }}"`), Op: OpEq, Right: json.RawMessage(`null`)}},
		{name: "missing everything", in: `{}`, errs: []Problem{{"/left", "required"}, {"/op", "required"}}},
		{name: "unknown operator", in: `{"left":1,"op":"~=","right":1}`, errs: []Problem{{"/op", `unknown operator "~="`}}},
		{name: "missing right", in: `{"left":1,"op":"contains"}`, errs: []Problem{{"/right", "required for the contains operator"}}},
		{name: "right with exists", in: `{"left":1,"op":"exists","right":1}`, errs: []Problem{{"/right", "must be omitted"}}},
		{name: "bad template in right", in: `{"left":1,"op":"==","right":"{{ input..a }}"}`, errs: []Problem{{"/right", "expected a name after '.'"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeConditionConfig(json.RawMessage(tt.in))
			if tt.errs != nil {
				assertProblems(t, problems(t, err), tt.errs)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeDelayConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want time.Duration
		errs []Problem
	}{
		{name: "string", in: `{"duration":"1.5s"}`, want: 1500 * time.Millisecond},
		{name: "milliseconds", in: `{"duration":250}`, want: 250 * time.Millisecond},
		{name: "fractional milliseconds", in: `{"duration":0.5}`, want: 500 * time.Microsecond},
		{name: "thirty days", in: `{"duration":"720h"}`, want: MaxDelay},
		{name: "missing", in: `{}`, errs: []Problem{{"/duration", "required"}}},
		{name: "zero", in: `{"duration":"0s"}`, want: 0},
		{name: "negative", in: `{"duration":-5}`, errs: []Problem{{"/duration", "must not be negative"}}},
		{name: "too long", in: `{"duration":"721h"}`, errs: []Problem{{"/duration", "longer than the maximum"}}},
		{name: "huge number", in: `{"duration":1e300}`, errs: []Problem{{"/duration", "out of range"}}},
		{name: "wrong type", in: `{"duration":true}`, errs: []Problem{{"/duration", "must be a string"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeDelayConfig(json.RawMessage(tt.in))
			if tt.errs != nil {
				assertProblems(t, problems(t, err), tt.errs)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Duration.Std() != tt.want {
				t.Fatalf("got %s, want %s", got.Duration, tt.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	data, err := json.Marshal(DelayConfig{Duration: Duration(90 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"duration":"1m30s"}` {
		t.Fatalf("Marshal = %s", data)
	}
	var back DelayConfig
	if err := json.Unmarshal(data, &back); err != nil || back.Duration.Std() != 90*time.Second {
		t.Fatalf("Unmarshal = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"duration":"later"}`), &back); err == nil {
		t.Fatal("bad duration accepted")
	}
}

func TestHostsOtherResolversReadAsIPv4AreRefusedAtSave(t *testing.T) {
	t.Parallel()
	for host, ambiguous := range map[string]bool{
		"127.1": true, "2130706433": true, "0x7f000001": true, "0177.0.0.1": true, "127.000.000.001": true,
		"foo.0x7f": true, "a.b.12": true, "0x": true,
		"127.0.0.1": false, "::1": false, "example.com": false, "api.v2.example": false, "0xcafe.example": false, "1a.example": false,
	} {
		if got := AmbiguousIPv4Host(host); got != ambiguous {
			t.Errorf("AmbiguousIPv4Host(%q) = %v, want %v", host, got, ambiguous)
		}
		_, err := DecodeHTTPRequestConfig([]byte(`{"url": "http://` + host + `/"}`))
		if ambiguous != (err != nil && strings.Contains(err.Error(), "read as an IPv4 address")) {
			t.Errorf("saving a node for %q: %v", host, err)
		}
	}
}
