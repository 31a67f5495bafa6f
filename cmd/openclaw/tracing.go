package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingFlags choose where traces go (docs/tracing.md): --otlp-endpoint,
// else the standard OpenTelemetry environment variables
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_ENDPOINT.
// With none of them tracing is off.
type tracingFlags struct {
	endpoint string // --otlp-endpoint URL
}

func (f *tracingFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.endpoint, "otlp-endpoint", "", "send traces over OTLP/HTTP to the collector at this base URL, e.g. http://127.0.0.1:4318 (/v1/traces is appended; default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT, else no tracing)")
}

// tracing is a started OpenTelemetry tracer provider; its zero value (and
// nil) is tracing off.
type tracing struct {
	tp *sdktrace.TracerProvider
}

// Provider returns the tracer provider to hand to the runtime and the
// proxy, nil when tracing is off.
func (t *tracing) Provider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp
}

// Shutdown exports the spans still buffered and stops the exporter,
// within ctx.
func (t *tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// start returns the tracer provider the flags and the environment ask
// for: off (a zero tracing) unless --otlp-endpoint or an OTLP endpoint
// variable is set, and OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none do
// not turn it off. The exporter is OTLP over HTTP (protobuf); the
// batching, sampler, headers, timeout and TLS follow the standard
// OTEL_* variables. service.name is "openclaw" and service.instance.id a
// random UUID per process (each replica's spans tell it apart) unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise. Nothing is sent until a span
// ends: a collector that is down costs no start time.
func (f *tracingFlags) start(ctx context.Context, flagPrefix string, getenv func(string) string) (*tracing, error) {
	var opts []otlptracehttp.Option
	switch {
	case f.endpoint != "":
		u, err := url.Parse(f.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &exitError{code: 2, err: fmt.Errorf("%s: --otlp-endpoint %q: want the collector's OTLP/HTTP base URL, e.g. http://127.0.0.1:4318", flagPrefix, f.endpoint)}
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	case getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		// otlptracehttp reads them itself.
	default:
		return &tracing{}, nil
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") || strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "none" {
		return &tracing{}, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: the OTLP trace exporter: %w", flagPrefix, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "openclaw"), attribute.String("service.version", version),
			attribute.String("service.instance.id", uuid.NewString())),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the resource keeps what parsed.
		fmt.Fprintf(os.Stderr, "%s: OpenTelemetry resource: %v\n", flagPrefix, err)
	}
	return &tracing{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}
