package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// TestMCPProxyTracesToCollector sends a tools/call carrying a client's W3C
// trace context in _meta through the built proxy, traced with
// --otlp-endpoint to a real OpenTelemetry Collector: the collector
// receives the request span (a child of the client's span, naming the
// authenticated subject), the call's span, the policy module's span and
// the upstream tools/call span, all in the client's trace; no span carries
// the call's argument value.
func TestMCPProxyTracesToCollector(t *testing.T) {
	t.Parallel()
	col := testkit.StartCollector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const token = "alice-token-for-the-trace-test"
	sum := sha256.Sum256([]byte(token))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	writeJSON(t, tokens, map[string]any{"tokens": []any{map[string]any{"name": "alice", "sha256": hex.EncodeToString(sum[:])}}})
	hp := startHTTPProxy(t, ctx, []string{"OTEL_BSP_SCHEDULE_DELAY=50"}, "--tokens-file", tokens, "--otlp-endpoint", col.Endpoint)

	hc := &http.Client{Transport: bearerTransport{token: token}}
	client := mcp.NewClient(&mcp.Implementation{Name: "trace-test-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hp.base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const secret = "argument-value-never-in-a-span"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + parentID + "-01"},
		Name: "everything__echo", Arguments: map[string]any{"message": secret},
	})
	if err != nil || res.IsError {
		t.Fatalf("call: %v, %+v", err, res)
	}

	want := []string{"tools/call everything__echo", "call_tool everything__echo", "before_tool_call rules", "tools/call echo"}
	byName := map[string]testkit.Span{}
	spans := col.WaitSpans(t, func(spans []testkit.Span) bool {
		for _, s := range spans {
			if s.TraceID == traceID {
				byName[s.Name] = s
			}
		}
		for _, n := range want {
			if _, ok := byName[n]; !ok {
				return false
			}
		}
		return true
	})
	for _, s := range spans {
		if strings.Contains(s.Raw, secret) {
			t.Errorf("span %q carries the argument value: %s", s.Name, s.Raw)
		}
	}
	request, call, policy, upstream := byName[want[0]], byName[want[1]], byName[want[2]], byName[want[3]]
	for _, link := range []struct {
		child, parent testkit.Span
		parentID      string
	}{
		{request, testkit.Span{Name: "the client's span"}, parentID},
		{call, request, request.SpanID},
		{policy, call, call.SpanID},
		{upstream, call, call.SpanID},
	} {
		if link.child.ParentSpanID != link.parentID {
			t.Errorf("span %q has parent %s, want %q (%s)", link.child.Name, link.child.ParentSpanID, link.parent.Name, link.parentID)
		}
	}
	if request.Kind != 2 || upstream.Kind != 3 {
		t.Errorf("span kinds: request %d, upstream %d; want 2 (server), 3 (client)", request.Kind, upstream.Kind)
	}
	for span, attrs := range map[*testkit.Span]map[string]string{
		&request:  {"enduser.id": "alice", "openclaw.identity.issuer": "tokens-file", "mcp.method.name": "tools/call", "gen_ai.tool.name": "everything__echo"},
		&call:     {"openclaw.decision": "allow", "openclaw.server": "everything"},
		&policy:   {"openclaw.policy.module": "rules", "openclaw.policy.decision": "allow", "openclaw.policy.hook": "before_tool_call"},
		&upstream: {"openclaw.server": "everything", "gen_ai.tool.name": "echo"},
	} {
		for k, v := range attrs {
			if span.Attributes[k] != v {
				t.Errorf("span %q: %s = %q, want %q (attributes %v)", span.Name, k, span.Attributes[k], v, span.Attributes)
			}
		}
		if span.Service != "openclaw" {
			t.Errorf("span %q: service.name %q, want openclaw", span.Name, span.Service)
		}
	}
}

// TestMCPCallTracesToCollector: `mcp call --otlp-endpoint` sends the
// call's trace before it exits: the call's span is the root, the policy
// module's and the upstream tools/call spans are its children, and no span
// carries the argument value.
func TestMCPCallTracesToCollector(t *testing.T) {
	t.Parallel()
	col := testkit.StartCollector(t)
	cli := newRuntimeCLI(t)
	r := cli.newHome(t, map[string]any{"tiny": map[string]any{"command": cli.tiny}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const secret = "argument-value-never-in-a-span"
	cmd, stdout, stderr := r.start(t, ctx, "mcp", "call", "tiny__echo", "--args", `{"message":"`+secret+`"}`, "--audit-log", os.DevNull, "--otlp-endpoint", col.Endpoint)
	if err := cmd.Wait(); err != nil || !strings.Contains(stdout.String(), "tiny says") {
		t.Fatalf("mcp call = %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr.String())
	}
	var call, upstream testkit.Span
	policies := 0
	spans := col.WaitSpans(t, func(spans []testkit.Span) bool {
		policies = 0
		for _, s := range spans {
			switch {
			case s.Name == "call_tool tiny__echo":
				call = s
			case s.Name == "tools/call echo":
				upstream = s
			}
		}
		for _, s := range spans {
			if strings.HasPrefix(s.Name, "before_tool_call ") && call.SpanID != "" && s.ParentSpanID == call.SpanID {
				policies++
			}
		}
		return call.SpanID != "" && upstream.SpanID != "" && policies > 0
	})
	if call.ParentSpanID != "" || upstream.ParentSpanID != call.SpanID || upstream.TraceID != call.TraceID {
		t.Errorf("call span %+v, upstream span %+v: want the call as the root and the upstream as its child", call, upstream)
	}
	for _, s := range spans {
		if strings.Contains(s.Raw, secret) {
			t.Errorf("span %q carries the argument value: %s", s.Name, s.Raw)
		}
	}
}
