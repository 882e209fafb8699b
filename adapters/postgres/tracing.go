package postgres

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// traceParent is the W3C traceparent of the span in ctx, stored with a
// queue item so the dispatcher can continue the enqueue request's trace;
// nil when ctx carries no sampled or unsampled span.
func traceParent(ctx context.Context) *string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tp, ok := carrier["traceparent"]
	if !ok || tp == "" {
		return nil
	}
	return &tp
}
