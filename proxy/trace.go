package proxy

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/runtime"
)

// tracerName is the instrumentation scope of the proxy's spans.
const tracerName = "github.com/openclaw-go/openclaw/proxy"

// traceRequests is the receiving middleware that makes one server span
// per MCP request a client sends (Options.TracerProvider): named after
// the method and, for tools/call, the tool; a child of the client's span
// when the request's _meta carries a W3C trace context (traceparent,
// tracestate). Its attributes are the method, the tool, the MCP session
// and the authenticated caller, never argument values nor error texts.
// Notifications are not traced.
func (p *Proxy) traceRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		params := req.GetParams()
		if params != nil {
			ctx = runtime.TraceContextFromMeta(ctx, params.GetMeta())
		}
		name := method
		attrs := append(runtime.IdentityAttributes(identityFromExtra(req.GetExtra())), runtime.AttrMCPMethod.String(method))
		if cp, ok := params.(*mcp.CallToolParamsRaw); ok && cp != nil {
			tool := runtime.SpanToolName(cp.Name)
			name += " " + tool
			attrs = append(attrs, runtime.AttrToolName.String(tool))
		}
		if ss, _ := req.GetSession().(*mcp.ServerSession); ss != nil && ss.ID() != "" { // none on the lean path
			attrs = append(attrs, runtime.AttrMCPSession.String(ss.ID()))
		}
		ctx, span := p.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		res, err := next(ctx, method, req)
		switch r := res.(type) {
		case *mcp.CallToolResult:
			if r != nil && r.IsError {
				span.SetAttributes(runtime.AttrToolIsError.Bool(true))
			}
		}
		if err != nil {
			desc := "request failed"
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				desc = "JSON-RPC error " + strconv.FormatInt(je.Code, 10)
			}
			span.SetStatus(codes.Error, desc)
		}
		return res, err
	}
}
