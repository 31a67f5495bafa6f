package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestSpansBoundTheToolName: a client's tools/call names a tool of any
// length (up to the message limit, 16 MiB); a span keeps at most
// runtime.MaxSpanToolName bytes of it, in its name and in
// gen_ai.tool.name, so requests naming huge tools cannot fill the span
// queue (2048 spans) with megabytes each while a collector is slow.
func TestSpansBoundTheToolName(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	f := newTracedHTTPFixture(t, HTTPOptions{Token: "t"}, tp)
	ctx := context.Background()
	hc := &http.Client{Transport: bearer{token: "t", base: http.DefaultTransport}}
	cs := f.connect(t, ctx, &mcp.StreamableClientTransport{Endpoint: f.url + PathMCP, HTTPClient: hc}, "2025-11-25")
	huge := "up__" + strings.Repeat("x", 1<<20)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: huge}); err == nil && !res.IsError {
		t.Fatal("a call of an unknown tool succeeded")
	}
	spans := rec.Ended()
	if len(spans) == 0 {
		t.Fatal("no span recorded")
	}
	for _, s := range spans {
		if len(s.Name()) > 256 {
			t.Errorf("span name of %d bytes (%.40s…)", len(s.Name()), s.Name())
		}
		for _, a := range s.Attributes() {
			if v := a.Value.String(); len(v) > 256 {
				t.Errorf("span %.40s: attribute %s of %d bytes", s.Name(), a.Key, len(v))
			}
		}
	}
}
