package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// TestCallToolTraces traces a call whose context carries a client's trace
// context: the call's span is the client span's child, each policy module
// run and the upstream tools/call are the call's children, the upstream
// server receives the upstream span's traceparent in _meta, and no span
// carries the argument value.
func TestCallToolTraces(t *testing.T) {
	t.Parallel()
	upServer, upstreamMeta := metaServer(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	chain := policies.NewChain([]policies.ChainEntry{
		{Hook: &policiestest.BeforeToolCallHook{Module: "first"}},
		{Hook: &policiestest.BeforeToolCallHook{Module: "second"}, Mode: policies.AuditOnly},
	}, nil)
	s := open(t, []Server{upServer}, &Options{Enforcer: chain, TracerProvider: tp, Limiter: admitAll{}})

	client := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx := TraceContextFromMeta(context.Background(), map[string]any{"traceparent": "00-" + client.TraceID().String() + "-" + client.SpanID().String() + "-01"})
	ctx = WithIdentity(ctx, &policies.Identity{Issuer: "https://idp.test", Subject: "alice"})
	const secret = "argument-value-never-traced"
	if _, err := s.CallTool(ctx, "up__echo", []byte(`{"message":"`+secret+`"}`)); err != nil {
		t.Fatal(err)
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		spans[sp.Name()] = sp
		for _, a := range sp.Attributes() {
			if strings.Contains(a.Value.String(), secret) {
				t.Errorf("span %q attribute %s carries the argument value", sp.Name(), a.Key)
			}
		}
		if sp.SpanContext().TraceID() != client.TraceID() {
			t.Errorf("span %q is in trace %s, want the client's %s", sp.Name(), sp.SpanContext().TraceID(), client.TraceID())
		}
	}
	call, up, limit := spans["call_tool up__echo"], spans["tools/call echo"], spans["rate_limit"]
	first, second := spans["before_tool_call first"], spans["before_tool_call second"]
	if call == nil || up == nil || first == nil || second == nil || limit == nil {
		t.Fatalf("spans %v: want call_tool up__echo, tools/call echo, rate_limit and before_tool_call of first and second", keys(spans))
	}
	if call.Parent().SpanID() != client.SpanID() {
		t.Errorf("call span's parent %s, want the client's span %s", call.Parent().SpanID(), client.SpanID())
	}
	for _, child := range []sdktrace.ReadOnlySpan{up, first, second, limit} {
		if child.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Errorf("span %q's parent %s, want the call span %s", child.Name(), child.Parent().SpanID(), call.SpanContext().SpanID())
		}
	}
	if up.SpanKind() != trace.SpanKindClient {
		t.Errorf("upstream span kind %v, want client", up.SpanKind())
	}
	want := map[string]string{"enduser.id": "alice", "openclaw.identity.issuer": "https://idp.test", "openclaw.decision": "allow", "openclaw.server": "up", "gen_ai.tool.name": "up__echo"}
	assertAttrs(t, call, want)
	assertAttrs(t, second, map[string]string{"openclaw.policy.module": "second", "openclaw.policy.mode": "audit", "openclaw.policy.decision": "allow", "openclaw.policy.hook": "before_tool_call"})
	assertAttrs(t, limit, map[string]string{"openclaw.server": "up", "openclaw.rate_limit.limited": "false"})
	assertAttrs(t, up, map[string]string{"openclaw.server": "up", "gen_ai.tool.name": "echo", "mcp.method.name": "tools/call"})

	gotMeta := upstreamMeta()
	wantParent := "00-" + client.TraceID().String() + "-" + up.SpanContext().SpanID().String() + "-01"
	if gotMeta["traceparent"] != wantParent {
		t.Errorf("upstream _meta %v: want traceparent %s (the upstream span)", gotMeta, wantParent)
	}
}

// TestCallToolUntraced: without a TracerProvider nothing is added to the
// upstream request's _meta, even when the caller sent a trace context.
func TestCallToolUntraced(t *testing.T) {
	t.Parallel()
	upServer, upstreamMeta := metaServer(t)
	s := open(t, []Server{upServer}, &Options{})
	ctx := TraceContextFromMeta(context.Background(), map[string]any{"traceparent": "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"})
	if _, err := s.CallTool(ctx, "up__echo", nil); err != nil {
		t.Fatal(err)
	}
	if gotMeta := upstreamMeta(); gotMeta["traceparent"] != nil {
		t.Errorf("untraced call sent _meta %v upstream", gotMeta)
	}
}

// admitAll is a policies.Limiter that admits every call.
type admitAll struct{}

func (admitAll) Acquire(context.Context, *policies.ToolCall) (func(), error) { return func() {}, nil }

// metaServer is an in-process server "up" whose tool echo records the
// _meta of the last call, which the returned function reports.
func metaServer(t *testing.T) (Server, func() map[string]any) {
	var mu sync.Mutex
	var meta map[string]any
	srv := newServer("up", nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			meta = req.Params.GetMeta()
			mu.Unlock()
			return textResult("ok"), nil
		})
	return inProcess(t, "up", srv), func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return meta
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func assertAttrs(t *testing.T, sp sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, a := range sp.Attributes() {
		got[string(a.Key)] = a.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (attributes %v)", sp.Name(), k, got[k], v, got)
		}
	}
}

// TestSpanToolName: a long name is cut to MaxSpanToolName bytes at a
// character boundary (an OTLP string must be valid UTF-8, or the whole
// batch fails to encode); a short one is kept.
func TestSpanToolName(t *testing.T) {
	t.Parallel()
	if got := SpanToolName("fs__read"); got != "fs__read" {
		t.Fatalf("short name: %q", got)
	}
	long := strings.Repeat("x", MaxSpanToolName-1) + strings.Repeat("é", 100)
	got := SpanToolName(long)
	if !utf8.ValidString(got) || len(got) > MaxSpanToolName+len("…") || !strings.HasSuffix(got, "…") {
		t.Fatalf("long name: %d bytes, valid UTF-8 %v: %q", len(got), utf8.ValidString(got), got)
	}
}
