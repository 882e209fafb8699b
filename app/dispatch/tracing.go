package dispatch

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/ports"
)

const tracerName = "github.com/sluicehq/sluice/app"

// startClaimSpan starts the span of one admission transaction. One batch
// serves many requests, so it belongs to none of their traces: endClaimSpan
// links it to each claimed item's instead.
func (d *Dispatcher) startClaimSpan(ctx context.Context) (context.Context, trace.Span) {
	return d.tracer.Start(ctx, "queue claim")
}

// endClaimSpan records what the claim did and links the span to the trace
// of every item it claimed.
func endClaimSpan(span trace.Span, claim ports.ClaimResult, err error) {
	defer span.End()
	if err != nil {
		span.SetStatus(codes.Error, "claim failed")
		return
	}
	span.SetAttributes(attribute.Int("sluice.claimed", len(claim.Claimed)), attribute.Int("sluice.failed", claim.Failed))
	for _, item := range claim.Claimed {
		if sc := enqueueSpan(item); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
}

// startSpan starts the span of one item's workflow start as a child of the
// request that enqueued it, so that one trace runs from the HTTP request
// through the queue into Temporal, whose interceptor continues it into the
// workflow. It links back to the batch's claim.
func (d *Dispatcher) startSpan(ctx context.Context, item ports.ClaimedItem, claim trace.SpanContext) (context.Context, trace.Span) {
	if sc := enqueueSpan(item); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attribute.String("sluice.queue_item.id", item.ID.String()),
		attribute.String("sluice.execution.id", item.ExecutionID.String()),
		attribute.Int("sluice.dispatch_failures", item.DispatchFailures),
	)}
	if claim.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: claim}))
	}
	return d.tracer.Start(ctx, "queue dispatch", opts...)
}

// endStartSpan records how the start went.
func endStartSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, startFailureReason(err))
	}
	span.End()
}

// enqueueSpan is the span context stored with the item at enqueue.
func enqueueSpan(item ports.ClaimedItem) trace.SpanContext {
	if item.TraceParent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": item.TraceParent})
	return trace.SpanContextFromContext(ctx)
}
