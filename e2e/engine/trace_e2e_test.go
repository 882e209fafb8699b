package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/fx"

	sluiceengine "github.com/sluicehq/sluice/adapters/engine"
	"github.com/sluicehq/sluice/e2e/harness"
	"github.com/sluicehq/sluice/ports/porttest"
)

// TestOneTraceFromRequestToCompletion records every span of `sluice all`
// with OpenTelemetry's in-memory exporter, on the real Postgres and
// Temporal, and follows one execution: the enqueue request's trace must go
// through the queue (its span context stored with the item) into the
// dispatcher's start, Temporal's workflow, the node's (local) activity and
// span, and the completion (local) activity. The batch's claim span links to it.
func TestOneTraceFromRequestToCompletion(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	base := harness.StartSluiceWith(t, nil, fx.Decorate(func(trace.TracerProvider) trace.TracerProvider { return tp }))

	graph := map[string]any{"nodes": []any{harness.Node("shape", "TRANSFORM", map[string]any{"output": map[string]any{"y": "{{ input.y }}"}})}}
	traced := harness.NewE2EWithPlan(t, base, "FREE")
	traced.WaitFor(traced.StartIn(graph, map[string]any{"y": 2}), "COMPLETED")

	var request tracetest.SpanStub
	for _, s := range exporter.GetSpans() {
		if s.Name == "POST /api/v1/workflow/executions/start" {
			request = s
		}
	}
	if !request.SpanContext.IsValid() {
		t.Fatalf("no span for the enqueue request among %s", spanNames(exporter.GetSpans()))
	}
	traceID := request.SpanContext.TraceID()

	// In the order the work happens; each must be in the request's trace.
	// The node's activity is checked apart: whether a node runs as an
	// activity or a local activity, and under which name, is the engine's
	// choice.
	want := []string{
		"queue dispatch",
		"StartWorkflow:SluiceExecution",
		"RunWorkflow:SluiceExecution",
		"node shape",
		"RunActivity:CompleteExecution",
	}
	var inTrace map[string]tracetest.SpanStub
	porttest.Eventually(t, 10*time.Second, porttest.Holds("every span of the run to end", func() bool {
		inTrace = map[string]tracetest.SpanStub{}
		for _, s := range exporter.GetSpans() {
			if s.SpanContext.TraceID() == traceID {
				inTrace[s.Name] = s
			}
		}
		for _, name := range want {
			if _, ok := inTrace[name]; !ok {
				return false
			}
		}
		return true
	}))

	spans := make(map[trace.SpanID]tracetest.SpanStub, len(inTrace))
	for _, s := range inTrace {
		spans[s.SpanContext.SpanID()] = s
	}
	// descends says whether s sits under ancestor in the trace.
	descends := func(s, ancestor tracetest.SpanStub) bool {
		for p := s.Parent; p.IsValid(); {
			if p.SpanID() == ancestor.SpanContext.SpanID() {
				return true
			}
			parent, ok := spans[p.SpanID()]
			if !ok {
				return false
			}
			p = parent.Parent
		}
		return false
	}
	dispatch := inTrace["queue dispatch"]
	if dispatch.Parent.SpanID() != request.SpanContext.SpanID() {
		t.Errorf("the dispatch span's parent is %s, want the enqueue request's span", dispatch.Parent.SpanID())
	}
	for _, name := range want[1:] {
		if !descends(inTrace[name], dispatch) {
			t.Errorf("%s does not descend from the dispatch span", name)
		}
	}
	if parent, ok := spans[inTrace["node shape"].Parent.SpanID()]; !ok || !strings.HasPrefix(parent.Name, "RunActivity:") {
		t.Errorf("the node span's parent is %q, want the span of the activity that ran it", parent.Name)
	}
	attrs := map[attribute.Key]string{}
	for _, kv := range inTrace["node shape"].Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	if attrs["sluice.node.key"] != "shape" || attrs["sluice.node.type"] != "TRANSFORM" || attrs["sluice.node.outcome"] != "completed" {
		t.Errorf("node span attributes = %v", attrs)
	}

	linked := false
	for _, s := range exporter.GetSpans() {
		if s.Name != "queue claim" {
			continue
		}
		for _, l := range s.Links {
			linked = linked || l.SpanContext.TraceID() == traceID
		}
	}
	if !linked {
		t.Error("no claim span links to the request's trace")
	}
}

func spanNames(spans tracetest.SpanStubs) string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// TestATemporalWorkflowsChildIsInTheRunsTrace: with tracing on, the
// TEMPORAL_WORKFLOW's child start is a span of the run's trace, and a team
// worker with the same Temporal tracing interceptor continues it: the
// team's workflow runs in the enqueue request's trace, under the start.
func TestATemporalWorkflowsChildIsInTheRunsTrace(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	base := harness.StartSluiceWith(t, nil, fx.Decorate(func(trace.TracerProvider) trace.TracerProvider { return tp }))

	tracing, err := sluiceengine.NewTracingInterceptor(tp)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := client.Dial(client.Options{HostPort: harness.TemporalAddress(t), Namespace: "default", Logger: harness.NopLogger{},
		Interceptors: []interceptor.ClientInterceptor{tracing}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	queue := "traced-team-" + uuid.NewString()[:8]
	tw := worker.New(tc, queue, worker.Options{})
	tw.RegisterWorkflowWithOptions(func(workflow.Context) (string, error) { return "done", nil }, workflow.RegisterOptions{Name: "TracedTeam"})
	if err := tw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Stop)

	traced := harness.NewE2EWithPlan(t, base, "FREE")
	allowQueue(t, base, traced.Ws, queue)
	graph := map[string]any{"nodes": []any{harness.Node("team", "TEMPORAL_WORKFLOW", map[string]any{"workflowType": "TracedTeam", "taskQueue": queue})}}
	traced.WaitFor(traced.StartIn(graph, nil), "COMPLETED")

	var request tracetest.SpanStub
	for _, s := range exporter.GetSpans() {
		if s.Name == "POST /api/v1/workflow/executions/start" {
			request = s
		}
	}
	if !request.SpanContext.IsValid() {
		t.Fatalf("no span for the enqueue request among %s", spanNames(exporter.GetSpans()))
	}
	var start, run tracetest.SpanStub
	porttest.Eventually(t, 10*time.Second, porttest.Holds("the child's start and run spans in the request's trace", func() bool {
		for _, s := range exporter.GetSpans() {
			if s.SpanContext.TraceID() != request.SpanContext.TraceID() {
				continue
			}
			switch s.Name {
			case "StartChildWorkflow:TracedTeam":
				start = s
			case "RunWorkflow:TracedTeam":
				run = s
			}
		}
		return start.SpanContext.IsValid() && run.SpanContext.IsValid()
	}))
	if run.Parent.SpanID() != start.SpanContext.SpanID() {
		t.Errorf("the team workflow's span's parent is %s, want the child start's span %s", run.Parent.SpanID(), start.SpanContext.SpanID())
	}
}
