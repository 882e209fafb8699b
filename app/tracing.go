package app

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice/ports"
)

const tracerName = "github.com/sluicehq/sluice/app"

// SetTracerProvider makes the dispatcher take its spans from tp instead of
// the global provider. Call it before Run.
func (d *Dispatcher) SetTracerProvider(tp trace.TracerProvider) {
	d.tracer = tp.Tracer(tracerName)
}

func (d *Dispatcher) tracerOrGlobal() trace.Tracer {
	if d.tracer == nil {
		return otel.Tracer(tracerName)
	}
	return d.tracer
}

// claim runs the admission transaction inside a span of its own, linked to
// the trace of every item it claims: one batch serves many requests, so it
// belongs to none of their traces.
func (d *Dispatcher) claim(ctx context.Context) (ports.ClaimResult, trace.SpanContext, error) {
	ctx, span := d.tracerOrGlobal().Start(ctx, "queue claim")
	defer span.End()
	claim, err := d.store.Claim(ctx, d.fence(), d.tiers.Limits(), d.admit, RejectUnrunnable)
	if err != nil {
		span.SetStatus(codes.Error, "claim failed")
		return claim, span.SpanContext(), err
	}
	span.SetAttributes(attribute.Int("sluice.claimed", len(claim.Claimed)), attribute.Int("sluice.failed", claim.Failed))
	for _, item := range claim.Claimed {
		if sc := enqueueSpan(item); sc.IsValid() {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
	return claim, span.SpanContext(), nil
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
	return d.tracerOrGlobal().Start(ctx, "queue dispatch", opts...)
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
