package runtime

import (
	"context"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/policies"
)

// tracerName is the instrumentation scope of the runtime's spans.
const tracerName = "github.com/openclaw-go/openclaw/runtime"

// Span attribute keys (docs/tracing.md). The MCP ones are OpenTelemetry's
// semantic conventions for MCP (docs/protocol-facts.md, Trace context);
// the openclaw.* ones are this project's. No attribute ever carries an
// argument value, a result or a policy's reason.
const (
	AttrMCPMethod      = attribute.Key("mcp.method.name")
	AttrMCPSession     = attribute.Key("mcp.session.id")
	AttrToolName       = attribute.Key("gen_ai.tool.name")
	AttrServer         = attribute.Key("openclaw.server")
	AttrDecision       = attribute.Key("openclaw.decision")
	AttrSubject        = attribute.Key("enduser.id")
	AttrIssuer         = attribute.Key("openclaw.identity.issuer")
	AttrPolicyHook     = attribute.Key("openclaw.policy.hook")
	AttrPolicyModule   = attribute.Key("openclaw.policy.module")
	AttrPolicyMode     = attribute.Key("openclaw.policy.mode")
	AttrPolicyDecision = attribute.Key("openclaw.policy.decision")
	AttrToolIsError    = attribute.Key("openclaw.tool.is_error")
	AttrLimited        = attribute.Key("openclaw.rate_limit.limited")
)

// MaxSpanToolName bounds, in bytes, the tool name a span carries (in its
// name and in gen_ai.tool.name): a client may name a tool of up to the
// message limit, and each span waits in the exporter's queue.
const MaxSpanToolName = 128

// SpanToolName is name as a span carries it: at most MaxSpanToolName bytes,
// cut at a character boundary and ended with "…" when longer (a longer
// name is no exposed name anyway).
func SpanToolName(name string) string {
	if len(name) <= MaxSpanToolName {
		return name
	}
	n := MaxSpanToolName
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return name[:n] + "…"
}

// traceContext is the W3C Trace Context propagator (traceparent,
// tracestate) that reads and writes a request's _meta.
var traceContext propagation.TraceContext

// metaCarrier is a request's _meta as an OpenTelemetry text map carrier:
// traceparent and tracestate are top-level string members (the MCP
// convention, docs/protocol-facts.md, Trace context).
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string { s, _ := m[key].(string); return s }
func (m metaCarrier) Set(key, value string) { m[key] = value }
func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// TraceContextFromMeta returns ctx carrying the remote span context of
// meta's W3C trace context (its "traceparent" and "tracestate" members),
// the parent of the spans started with it; ctx unchanged when meta has
// none or an invalid one. A surface calls it with the _meta of the
// request it serves.
func TraceContextFromMeta(ctx context.Context, meta map[string]any) context.Context {
	if _, ok := meta["traceparent"]; !ok {
		return ctx
	}
	return traceContext.Extract(ctx, metaCarrier(meta))
}

// injectTraceContext writes ctx's span context into meta (traceparent,
// tracestate) and returns meta, made when nil; meta unchanged when ctx has
// no valid span context.
func injectTraceContext(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = map[string]any{}
	}
	traceContext.Inject(ctx, metaCarrier(meta))
	return meta
}

// IdentityAttributes are the span attributes naming id, the authenticated
// caller: its subject (enduser.id) and issuer; none for a nil id.
func IdentityAttributes(id *policies.Identity) []attribute.KeyValue {
	if id == nil {
		return nil
	}
	return []attribute.KeyValue{AttrSubject.String(id.Subject), AttrIssuer.String(id.Issuer)}
}

// newTracer returns the session's tracer of tp, nil when tracing is off
// (Options.TracerProvider nil).
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// startCallSpan starts the span of a CallTool of the exposed name and
// makes the policy module runs made with the returned context its
// children.
func (s *Session) startCallSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	name = SpanToolName(name)
	attrs := append([]attribute.KeyValue{AttrToolName.String(name)}, IdentityAttributes(IdentityFrom(ctx))...)
	ctx, span := s.tracer.Start(ctx, "call_tool "+name, trace.WithAttributes(attrs...))
	return policies.WithRunObserver(ctx, runSpans{s.tracer}), span
}

// endSpan ends span with err as its status: the error's text is left out
// (it may quote the caller's input), only that the operation failed.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, errorKind(err))
	}
	span.End()
}

// errorKind names the kind of a call's error without its text.
func errorKind(err error) string {
	switch err.(type) {
	case *PolicyError:
		return "refused by policy"
	case *ServerError:
		return "upstream request failed"
	case *PausedError:
		return "server paused"
	}
	return "call failed"
}

// runSpans makes a span of each policy module run (policies.RunObserver),
// a child of the call's span, timed by the run's audit record.
type runSpans struct{ tracer trace.Tracer }

// ObserveRun records r as a finished span: hook, module, mode, decision;
// an error status when the module failed.
func (o runSpans) ObserveRun(ctx context.Context, r *policies.AuditRecord) {
	start := r.Time
	_, span := o.tracer.Start(ctx, string(r.Hook)+" "+r.Module, trace.WithTimestamp(start),
		trace.WithAttributes(AttrPolicyHook.String(string(r.Hook)), AttrPolicyModule.String(r.Module),
			AttrPolicyMode.String(string(r.Mode)), AttrPolicyDecision.String(r.Decision)))
	if r.Error != "" {
		span.SetStatus(codes.Error, "policy module failed")
	}
	span.End(trace.WithTimestamp(start.Add(time.Duration(r.DurationUs) * time.Microsecond)))
}

// acquireLimit admits call through Options.Limiter, whose counters may be
// shared state (a store other replicas use too): traced as a span of its
// own, "rate_limit", a child of the call's span, with whether the call was
// limited.
func (s *Session) acquireLimit(ctx context.Context, call *policies.ToolCall) (func(), error) {
	if s.tracer == nil {
		return s.opts.Limiter.Acquire(ctx, call)
	}
	ctx, span := s.tracer.Start(ctx, "rate_limit", trace.WithAttributes(AttrServer.String(call.Tool.Server)))
	release, err := s.opts.Limiter.Acquire(ctx, call)
	span.SetAttributes(AttrLimited.Bool(err != nil))
	span.End()
	return release, err
}
