package domain

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// oneProblemAt checks err is a ValidationError of exactly one problem at
// want, or nil when want is "".
func oneProblemAt(t *testing.T, err error, want string) {
	t.Helper()
	var ve *ValidationError
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want == "":
	case !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != want:
		t.Fatalf("got %v, want one problem at %s", err, want)
	}
}

func TestTemporalWorkflowConfigIsDecodedStrictlyWithLiteralNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("q", MaxTemporalNameLength+1)
	cases := []struct {
		name   string
		config string
		want   string
	}{
		{name: "full", config: `{"workflowType":"Fulfil","taskQueue":"team-orders","input":{"order":"{{ input.id }}"},"workflowIdSuffix":"{{ input.id }}","executionTimeout":"10m","runTimeout":"5m","retryPolicy":{"maxAttempts":3,"initialInterval":"1s"}}`},
		{name: "minimal", config: `{"workflowType":"Fulfil","taskQueue":"team-orders"}`},
		{name: "no type", config: `{"taskQueue":"team-orders"}`, want: "/nodes/0/config/workflowType"},
		{name: "no queue", config: `{"workflowType":"Fulfil"}`, want: "/nodes/0/config/taskQueue"},
		{name: "queue a template", config: `{"workflowType":"Fulfil","taskQueue":"{{ input.queue }}"}`, want: "/nodes/0/config/taskQueue"},
		{name: "type a template", config: `{"workflowType":"{{ input.t }}","taskQueue":"q"}`, want: "/nodes/0/config/workflowType"},
		{name: "queue too long", config: `{"workflowType":"Fulfil","taskQueue":"` + long + `"}`, want: "/nodes/0/config/taskQueue"},
		{name: "queue with a space", config: `{"workflowType":"Fulfil","taskQueue":"team orders"}`, want: "/nodes/0/config/taskQueue"},
		{name: "unknown field", config: `{"workflowType":"Fulfil","taskQueue":"q","workflowId":"x"}`, want: "/nodes/0/config/workflowId"},
		{name: "bad input template", config: `{"workflowType":"Fulfil","taskQueue":"q","input":"{{ input."}`, want: "/nodes/0/config/input"},
		{name: "empty suffix", config: `{"workflowType":"Fulfil","taskQueue":"q","workflowIdSuffix":""}`, want: "/nodes/0/config/workflowIdSuffix"},
		{name: "negative timeout", config: `{"workflowType":"Fulfil","taskQueue":"q","executionTimeout":"-1s"}`, want: "/nodes/0/config/executionTimeout"},
		{name: "run past execution", config: `{"workflowType":"Fulfil","taskQueue":"q","executionTimeout":"1m","runTimeout":"2m"}`, want: "/nodes/0/config/runTimeout"},
		{name: "statuses in retry", config: `{"workflowType":"Fulfil","taskQueue":"q","retryPolicy":{"finalStatuses":[400]}}`, want: "/nodes/0/config/retryPolicy/finalStatuses"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := DecodeGraph([]byte(`{"nodes":[{"key":"team","type":"TEMPORAL_WORKFLOW","config":` + tc.config + `}]}`))
			if err == nil {
				err = g.Validate()
			}
			oneProblemAt(t, err, tc.want)
		})
	}
}

func TestTemporalWorkflowTakesItsPoliciesInItsConfigWithinThePlansCaps(t *testing.T) {
	t.Parallel()
	caps := PolicyCaps{NodeAttempts: 5, NodeTimeout: 30 * time.Minute}
	cases := []struct {
		name string
		node string
		// validate is where Validate refuses it, caps where CheckPolicies does.
		validate, caps string
	}{
		{name: "node retry refused", node: `{"key":"a","type":"TEMPORAL_WORKFLOW","config":{"workflowType":"T","taskQueue":"q"},"retry":{"maxAttempts":2}}`, validate: "/nodes/0/retry"},
		{name: "node timeout refused", node: `{"key":"a","type":"TEMPORAL_WORKFLOW","config":{"workflowType":"T","taskQueue":"q"},"timeout":"5s"}`, validate: "/nodes/0/timeout"},
		{name: "within caps", node: `{"key":"a","type":"TEMPORAL_WORKFLOW","config":{"workflowType":"T","taskQueue":"q","executionTimeout":"30m","retryPolicy":{"maxAttempts":5}}}`},
		{name: "attempts past cap", node: `{"key":"a","type":"TEMPORAL_WORKFLOW","config":{"workflowType":"T","taskQueue":"q","retryPolicy":{"maxAttempts":6}}}`, caps: "/nodes/0/config/retryPolicy/maxAttempts"},
		{name: "execution timeout past cap", node: `{"key":"a","type":"TEMPORAL_WORKFLOW","config":{"workflowType":"T","taskQueue":"q","executionTimeout":"31m"}}`, caps: "/nodes/0/config/executionTimeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := DecodeGraph([]byte(`{"nodes":[` + tc.node + `]}`))
			if err == nil {
				err = g.Validate()
			}
			oneProblemAt(t, err, tc.validate)
			if tc.validate == "" {
				oneProblemAt(t, g.CheckPolicies(caps), tc.caps)
			}
		})
	}
	// The default execution timeout is held to the plan's cap too.
	g := Graph{Nodes: []Node{{Key: "a", Type: NodeTemporalWorkflow, Config: []byte(`{"workflowType":"T","taskQueue":"q"}`)}}}
	oneProblemAt(t, g.CheckPolicies(PolicyCaps{NodeTimeout: time.Minute}), "/nodes/0/config/executionTimeout")
}

func TestTemporalWorkflowIDIsTheRunsIDTheNodeAndTheSuffix(t *testing.T) {
	t.Parallel()
	if got := TemporalWorkflowID("execution-1", "team", ""); got != "execution-1/team" {
		t.Errorf("no suffix: %q", got)
	}
	if got := TemporalWorkflowID("execution-1", "sub/team", "order-7"); got != "execution-1/sub/team/order-7" {
		t.Errorf("suffix: %q", got)
	}
	ctx := TemplateContext{Input: map[string]any{"id": "order-7", "n": json.Number("42"), "sp": "a b", "big": strings.Repeat("s", MaxTemporalNameLength+1), "obj": map[string]any{}}}
	for suffix, want := range map[string]string{"{{ input.id }}": "order-7", "o-{{ input.n }}": "o-42", "{{ input.n }}": "42"} {
		if got, err := ResolveTemporalWorkflowSuffix(suffix, ctx); err != nil || got != want {
			t.Errorf("%s resolved to %q, %v; want %q", suffix, got, err, want)
		}
	}
	for _, suffix := range []string{"{{ input.sp }}", "{{ input.big }}", "{{ input.obj }}", "{{ input.missing }}"} {
		if got, err := ResolveTemporalWorkflowSuffix(suffix, ctx); err == nil {
			t.Errorf("%s resolved to %q, want refused", suffix, got)
		}
	}
}

func TestAllowListPermitsListedQueuesAndTypesButNeverSluicesOwn(t *testing.T) {
	t.Parallel()
	l := AllowList{
		Entries:  []AllowListEntry{{TaskQueue: "orders"}, {TaskQueue: "billing", WorkflowType: "Invoice"}, {TaskQueue: "sluice.workflows.default"}},
		Reserved: ReservedTaskQueues{Queues: []string{"sluice.workflows.default", "sluice.activities.external-api"}},
	}
	for _, tc := range []struct {
		queue, typ string
		want       bool
	}{
		{"orders", "Anything", true},
		{"billing", "Invoice", true},
		{"billing", "Refund", false},
		{"shipping", "Ship", false},
		{"sluice.workflows.default", "SluiceExecution", false},
		{"sluice.activities.external-api", "X", false},
	} {
		if got := l.Permits(tc.queue, tc.typ); got != tc.want {
			t.Errorf("Permits(%q, %q) = %v, want %v", tc.queue, tc.typ, got, tc.want)
		}
		if refusal := l.Refusal(tc.queue, tc.typ); (refusal == "") != tc.want {
			t.Errorf("Refusal(%q, %q) = %q with Permits %v", tc.queue, tc.typ, refusal, tc.want)
		}
	}
}

func TestAGraphStartingWhatTheAllowListRefusesIsRefusedByField(t *testing.T) {
	t.Parallel()
	l := AllowList{Entries: []AllowListEntry{{TaskQueue: "billing", WorkflowType: "Invoice"}}}
	node := func(queue, typ string) Node {
		return Node{Key: "n", Type: NodeTemporalWorkflow, Config: []byte(`{"workflowType":"` + typ + `","taskQueue":"` + queue + `"}`)}
	}
	oneProblemAt(t, Graph{Nodes: []Node{node("billing", "Invoice")}}.CheckAllowList(l), "")
	oneProblemAt(t, Graph{Nodes: []Node{node("billing", "Refund")}}.CheckAllowList(l), "/nodes/0/config/workflowType")
	oneProblemAt(t, Graph{Nodes: []Node{node("orders", "Invoice")}}.CheckAllowList(l), "/nodes/0/config/taskQueue")
}

func TestAllowListEntriesNamingSluicesQueuesOrBadNamesAreRefused(t *testing.T) {
	t.Parallel()
	reserved := ReservedTaskQueues{Queues: []string{"workflows.default", "activities.external-api"}}
	oneProblemAt(t, CheckAllowListEntry(AllowListEntry{TaskQueue: "orders"}, reserved), "")
	oneProblemAt(t, CheckAllowListEntry(AllowListEntry{TaskQueue: "workflows.default"}, reserved), "/taskQueue")
	oneProblemAt(t, CheckAllowListEntry(AllowListEntry{TaskQueue: ""}, reserved), "/taskQueue")
	oneProblemAt(t, CheckAllowListEntry(AllowListEntry{TaskQueue: "q", WorkflowType: "{{ x }}"}, reserved), "/workflowType")
}
