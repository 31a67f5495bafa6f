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
	"github.com/openclaw-go/openclaw/proxy"
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

// TestMCPProxyTraceAcrossReplicas: two replicas on one Redis, traced to a
// real OpenTelemetry Collector. A session opened on replica A makes a
// call carrying the client's trace context in _meta; A is killed
// (SIGKILL) and the session's next call, in the same trace, goes to
// replica B, which takes the session over. The collector shows, in the
// client's trace, the request → call → policy and upstream spans of both
// calls, each from its own replica (service.instance.id), a Redis span
// under each call's rate_limit span, and B's session_takeover span (a
// child of the client's span) with the read of the session's record as
// its child. No Redis span carries the command's arguments.
func TestMCPProxyTraceAcrossReplicas(t *testing.T) {
	t.Parallel()
	col := testkit.StartCollector(t)
	const tool = "one__test_simple_text"
	rs := newReplicaSet(t, map[string]any{"modules": replicaPolicy["modules"], "rate_limits": []any{
		map[string]any{"name": "per-agent", "tool": tool, "requests": 1000, "interval_s": 3600},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	env := []string{"OTEL_BSP_SCHEDULE_DELAY=50"}
	a, b := rs.startEnv("a", env, "--otlp-endpoint", col.Endpoint), rs.startEnv("b", env, "--otlp-endpoint", col.Endpoint)
	st := &switchTransport{token: "token-of-agent-a"}
	st.to(a.base)
	client := mcp.NewClient(&mcp.Implementation{Name: "trace-replicas-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.base + proxy.PathMCP, HTTPClient: &http.Client{Transport: st}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to A: %v\n%s", err, a.stderr.String())
	}
	defer cs.Close()
	const traceID, parentA, parentB = "5bf92f3577b34da6a3ce929d0e0e4737", "00f067aa0ba902b1", "00f067aa0ba902b2"
	call := func(parent string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + parent + "-01"}, Name: tool})
		if err != nil || res.IsError {
			t.Fatalf("the call with parent %s: %v, %+v\nA's stderr:\n%s\nB's stderr:\n%s", parent, err, res, a.stderr.String(), b.stderr.String())
		}
	}
	request := "tools/call " + tool
	// byParent is the request span of the client's span parent, "" when
	// the collector has none yet.
	byParent := func(spans []testkit.Span, parent string) testkit.Span {
		for _, s := range spans {
			if s.TraceID == traceID && s.Name == request && s.ParentSpanID == parent {
				return s
			}
		}
		return testkit.Span{}
	}
	call(parentA)
	// A's spans are exported before it dies.
	col.WaitSpans(t, func(spans []testkit.Span) bool {
		r := byParent(spans, parentA)
		return r.SpanID != "" && len(children(spans, r.SpanID)) > 0
	})
	_ = a.cmd.Process.Kill()
	<-a.exited
	st.to(b.base)
	call(parentB)

	var takeover testkit.Span
	spans := col.WaitSpans(t, func(spans []testkit.Span) bool {
		takeover = testkit.Span{}
		for _, s := range spans {
			if s.TraceID == traceID && s.Name == "session_takeover" {
				takeover = s
			}
		}
		r := byParent(spans, parentB)
		return takeover.SpanID != "" && len(children(spans, takeover.SpanID)) > 0 && r.SpanID != "" && len(children(spans, r.SpanID)) > 0
	})
	if takeover.ParentSpanID != parentB || takeover.Attributes["openclaw.session.takeover"] != "taken_over" ||
		takeover.Attributes["mcp.session.id"] != cs.ID() || takeover.Attributes["enduser.id"] != "agent-a" {
		t.Errorf("session_takeover span %+v: want a child of the client's span %s, taken_over, session %s, enduser.id agent-a", takeover, parentB, cs.ID())
	}
	if got := redisChildren(spans, takeover.SpanID); len(got) != 1 || got[0].Name != "get" {
		t.Errorf("the takeover's Redis spans: %+v, want one get (the session's record)", got)
	}
	instances := map[string]string{}
	for replica, parent := range map[string]string{"A": parentA, "B": parentB} {
		req := byParent(spans, parent)
		instances[replica] = req.Resource["service.instance.id"]
		var callSpan testkit.Span
		for _, c := range children(spans, req.SpanID) {
			if c.Name == "call_tool "+tool {
				callSpan = c
			}
		}
		names := map[string]testkit.Span{}
		for _, c := range children(spans, callSpan.SpanID) {
			names[c.Name] = c
		}
		for _, want := range []string{"before_tool_call rules", "rate_limit", "tools/call test_simple_text"} {
			if s, ok := names[want]; !ok || s.Resource["service.instance.id"] != instances[replica] {
				t.Errorf("replica %s's call: no span %q under its call span (%v)", replica, want, names)
			}
		}
		if got := redisChildren(spans, names["rate_limit"].SpanID); len(got) == 0 || got[len(got)-1].StatusCode == 2 {
			t.Errorf("replica %s's rate_limit span has Redis spans %+v, want the counters' script, answered", replica, got)
		}
	}
	if instances["A"] == "" || instances["A"] == instances["B"] || takeover.Resource["service.instance.id"] != instances["B"] {
		t.Errorf("service.instance.id: A %q, B %q, the takeover's %q; want two ids, the takeover B's", instances["A"], instances["B"], takeover.Resource["service.instance.id"])
	}
	// The session's later requests on B are not in the takeover's trace.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool}); err != nil || res.IsError {
		t.Fatalf("a call without trace context on B: %v, %+v", err, res)
	}
	spans = col.WaitSpans(t, func(spans []testkit.Span) bool {
		for _, s := range spans {
			if s.Name == request && s.TraceID != traceID {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if s.Name == request && s.TraceID != traceID && (s.ParentSpanID != "" || s.Resource["service.instance.id"] != instances["B"]) {
			t.Errorf("B's request span of a call without trace context: parent %q, instance %q; want a root span of B", s.ParentSpanID, s.Resource["service.instance.id"])
		}
	}
	for _, s := range spans {
		if s.Attributes["db.system.name"] == "redis" && (strings.Contains(s.Raw, cs.ID()) || strings.Contains(s.Raw, "openclaw:")) {
			t.Errorf("Redis span %q carries a key or an argument: %s", s.Name, s.Raw)
		}
	}
}

// children are the spans whose parent is id.
func children(spans []testkit.Span, id string) []testkit.Span {
	var out []testkit.Span
	for _, s := range spans {
		if id != "" && s.ParentSpanID == id {
			out = append(out, s)
		}
	}
	return out
}

// redisChildren are the Redis command spans whose parent is id, in the
// order received.
func redisChildren(spans []testkit.Span, id string) []testkit.Span {
	var out []testkit.Span
	for _, s := range children(spans, id) {
		if s.Attributes["db.system.name"] == "redis" && s.Kind == 3 {
			out = append(out, s)
		}
	}
	return out
}
