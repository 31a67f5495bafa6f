package sharedstate

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the Redis command spans.
const tracerName = "github.com/openclaw-go/openclaw/proxy/sharedstate"

// The attributes of a Redis command span (OpenTelemetry's semantic
// conventions for databases).
const (
	attrDBSystem    = attribute.Key("db.system.name")
	attrDBOperation = attribute.Key("db.operation.name")
	attrBatchSize   = attribute.Key("db.operation.batch.size")
	attrServerAddr  = attribute.Key("server.address")
	attrServerPort  = attribute.Key("server.port")
)

// traceHook makes a client span of each Redis command (or pipeline) made
// within a traced operation: a child of the span in the command's
// context, named after the command in lower case ("evalsha", "get",
// "pipeline"), with the database system, the command and the server's
// address. A command made outside any span (the readiness ping, the
// events subscription, the records written again after a reconnection)
// makes none. A span never carries the command's arguments (keys hold
// session ids, values identities) nor an error's text: a failed command's
// status says only that it failed. (go-redis's redisotel records both.)
type traceHook struct {
	tracer trace.Tracer
	attrs  []attribute.KeyValue // the server's
}

func newTraceHook(tp trace.TracerProvider, addr string) traceHook {
	h := traceHook{tracer: tp.Tracer(tracerName), attrs: []attribute.KeyValue{attrDBSystem.String("redis")}}
	if host, port, err := net.SplitHostPort(addr); err == nil {
		h.attrs = append(h.attrs, attrServerAddr.String(host))
		if n, err := strconv.Atoi(port); err == nil {
			h.attrs = append(h.attrs, attrServerPort.Int(n))
		}
	}
	return h
}

func (h traceHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h traceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return next(ctx, cmd)
		}
		op := strings.ToLower(cmd.Name())
		ctx, span := h.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(h.attrs...), trace.WithAttributes(attrDBOperation.String(strings.ToUpper(op))))
		err := next(ctx, cmd)
		endCommandSpan(span, err)
		return err
	}
}

func (h traceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return next(ctx, cmds)
		}
		ctx, span := h.tracer.Start(ctx, "pipeline", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(h.attrs...), trace.WithAttributes(attrBatchSize.Int(len(cmds))))
		err := next(ctx, cmds)
		endCommandSpan(span, err)
		return err
	}
}

// endCommandSpan ends span, failed when err is an error: a missing key
// (redis.Nil) is an answer, and so is NOSCRIPT, on which go-redis sends
// the script itself (EVAL, a span of its own).
func endCommandSpan(span trace.Span, err error) {
	if err = redisErr(err); err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		span.SetStatus(codes.Error, "Redis command failed")
	}
	span.End()
}
