package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNodePoliciesAreDecodedAndCheckedStrictly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		node string
		// want is the path of the one problem expected, "" for none.
		want string
	}{
		{name: "full policy", node: `{"key":"a","type":"HTTP_REQUEST","config":{"url":"http://x"},"retry":{"maxAttempts":4,"initialInterval":"1s","backoffCoefficient":1.5,"maxInterval":"10s","finalStatuses":[400,501]},"timeout":"2m"}`},
		{name: "timeout only", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"timeout":"5s"}`},
		{name: "zero attempts", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":0}}`, want: "/nodes/0/retry/maxAttempts"},
		{name: "fractional attempts", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":1.5}}`, want: "/nodes/0/retry/maxAttempts"},
		{name: "unknown retry field", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"attempts":2}}`, want: "/nodes/0/retry/attempts"},
		{name: "coefficient below 1", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"backoffCoefficient":0.5}}`, want: "/nodes/0/retry/backoffCoefficient"},
		{name: "interval past an hour", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"maxInterval":"2h"}}`, want: "/nodes/0/retry/maxInterval"},
		{name: "longest below first", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"initialInterval":"5s","maxInterval":"1s"}}`, want: "/nodes/0/retry/maxInterval"},
		{name: "statuses on a transform", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"finalStatuses":[404]}}`, want: "/nodes/0/retry/finalStatuses"},
		{name: "status not an error", node: `{"key":"a","type":"HTTP_REQUEST","config":{"url":"http://x"},"retry":{"finalStatuses":[404,200]}}`, want: "/nodes/0/retry/finalStatuses/1"},
		{name: "status twice", node: `{"key":"a","type":"HTTP_REQUEST","config":{"url":"http://x"},"retry":{"finalStatuses":[404,404]}}`, want: "/nodes/0/retry/finalStatuses/1"},
		{name: "negative timeout", node: `{"key":"a","type":"TRANSFORM","config":{"output":1},"timeout":"-1s"}`, want: "/nodes/0/timeout"},
		{name: "retry on a delay", node: `{"key":"a","type":"DELAY","config":{"duration":"1s"},"retry":{"maxAttempts":2}}`, want: "/nodes/0/retry"},
		{name: "retry on a wait for event", node: `{"key":"a","type":"WAIT_FOR_EVENT","config":{"event":"go"},"retry":{"maxAttempts":2}}`, want: "/nodes/0/retry"},
		{name: "timeout on a wait for event", node: `{"key":"a","type":"WAIT_FOR_EVENT","config":{"event":"go"},"timeout":"5s"}`, want: "/nodes/0/timeout"},
		{name: "retry on a for each", node: `{"key":"a","type":"FOR_EACH","config":{"items":[1,2],"node":{"type":"TRANSFORM","config":{"output":1}}},"retry":{"maxAttempts":2}}`, want: "/nodes/0/retry"},
		{name: "policies on a for each's template", node: `{"key":"a","type":"FOR_EACH","config":{"items":[1,2],"node":{"type":"HTTP_REQUEST","config":{"url":"http://x/{{ item }}"},"retry":{"maxAttempts":2,"finalStatuses":[400]},"timeout":"5s"}}}`},
		{name: "statuses on a for each's transform template", node: `{"key":"a","type":"FOR_EACH","config":{"items":[1,2],"node":{"type":"TRANSFORM","config":{"output":1},"retry":{"finalStatuses":[404]}}}}`, want: "/nodes/0/config/node/retry/finalStatuses"},
		{name: "negative timeout on a for each's template", node: `{"key":"a","type":"FOR_EACH","config":{"items":[1,2],"node":{"type":"TRANSFORM","config":{"output":1},"timeout":"-1s"}}}`, want: "/nodes/0/config/node/timeout"},
		{name: "timeout on a sub workflow", node: `{"key":"a","type":"SUB_WORKFLOW","config":{"definition":"6f1c0e4e-8a44-4a4e-9a36-1f2b3c4d5e6f"},"timeout":"5s"}`, want: "/nodes/0/timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := DecodeGraph([]byte(`{"nodes":[` + tc.node + `]}`))
			if err == nil {
				err = g.Validate()
			}
			var ve *ValidationError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
				return
			case !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != tc.want:
				t.Fatalf("got %v, want one problem at %s", err, tc.want)
			}
		})
	}
}

func TestPoliciesPastTheWorkspacesCapsAreRefusedByField(t *testing.T) {
	t.Parallel()
	g, err := DecodeGraph([]byte(`{"runTimeout":"48h","nodes":[
		{"key":"ok","type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":5},"timeout":"5m"},
		{"key":"many","type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":6}},
		{"key":"long","type":"TRANSFORM","config":{"output":1},"timeout":"6m"},
		{"key":"each","type":"FOR_EACH","config":{"items":[1],"node":{"type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":6},"timeout":"6m"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	err = g.CheckPolicies(PlanQuotas{NodeAttempts: 5, NodeTimeoutSeconds: 300, RunTimeoutSeconds: 86_400}.PolicyCaps())
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a validation error", err)
	}
	var paths []string
	for _, p := range ve.Problems {
		paths = append(paths, p.Path)
	}
	if got := strings.Join(paths, " "); got != "/nodes/1/retry/maxAttempts /nodes/2/timeout /nodes/3/config/node/retry/maxAttempts /nodes/3/config/node/timeout /runTimeout" {
		t.Fatalf("problems at %s", got)
	}
	if err := g.CheckPolicies(PlanQuotas{NodeAttempts: 25, NodeTimeoutSeconds: 3600, RunTimeoutSeconds: 30 * 86_400}.PolicyCaps()); err != nil {
		t.Fatalf("ENTERPRISE refused: %v", err)
	}
}

func TestFinalHTTPStatusFollowsThePolicysListElseTheDefault(t *testing.T) {
	t.Parallel()
	var none *RetryPolicy
	listed := &RetryPolicy{FinalStatuses: []int{500}}
	for _, tc := range []struct {
		p      *RetryPolicy
		status int
		want   bool
	}{{none, 404, true}, {none, 503, false}, {listed, 500, true}, {listed, 404, false}, {&RetryPolicy{MaxAttempts: 2}, 404, true}} {
		if got := tc.p.FinalHTTPStatus(tc.status); got != tc.want {
			t.Errorf("%+v.FinalHTTPStatus(%d) = %v, want %v", tc.p, tc.status, got, tc.want)
		}
	}
}

func TestEncodedPoliciesDecodeToTheSameGraph(t *testing.T) {
	t.Parallel()
	g, err := DecodeGraph([]byte(`{"runTimeout":"90s","nodes":[{"key":"a","type":"TRANSFORM","config":{"output":1},"retry":{"maxAttempts":3,"initialInterval":"2s"},"timeout":"3s"}],"edges":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := EncodeGraph(g)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeGraph(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if back.RunTimeout.Std() != 90*time.Second || back.Nodes[0].Retry.MaxAttempts != 3 || back.Nodes[0].Timeout.Std() != 3*time.Second {
		t.Fatalf("round trip lost policies: %s", raw)
	}
}
