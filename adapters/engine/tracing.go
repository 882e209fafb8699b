package engine

import (
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// tracerName names the tracer of Sluice's own spans in this adapter.
const tracerName = "github.com/sluicehq/sluice/adapters/engine"

// NewTracingInterceptor is the Temporal SDK's OpenTelemetry interceptor on
// tp. Set on the client, it traces the workflow start under the caller's
// span and carries the trace in Temporal's headers into the workflow and
// every activity and local activity, on whichever worker runs them.
func NewTracingInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("temporal-sdk-go")})
}
