package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/fx"
)

// tracingConfigured says whether the standard OTEL_* variables ask for
// traces. Unset, tracing is off: no exporter, no spans recorded.
func tracingConfigured(lookup func(string) (string, bool)) bool {
	for _, name := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v, ok := lookup(name); ok && v != "" {
			return true
		}
	}
	return false
}

// newTracerProvider builds the process's tracer provider from the standard
// OTEL_* variables through OpenTelemetry's autoexport (OTLP over gRPC or
// HTTP, the console, or none), and makes it and the W3C trace-context
// propagator the global ones. Spans are batched and flushed on stop.
func newTracerProvider(lc fx.Lifecycle, log *slog.Logger) (trace.TracerProvider, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !tracingConfigured(osLookup) {
		return noop.NewTracerProvider(), nil
	}
	ctx := context.Background()
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "sluice")),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(),
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	lc.Append(fx.StopHook(tp.Shutdown))
	log.Info("tracing on", "exporter", os.Getenv("OTEL_TRACES_EXPORTER"))
	return tp, nil
}
