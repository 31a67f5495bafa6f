package sharedstate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

// tracedState opens a State on r traced by tp.
func tracedState(t testing.TB, r *testkit.Redis, tp *sdktrace.TracerProvider) *sharedstate.State {
	t.Helper()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s, err := sharedstate.Open(r.URL(), &sharedstate.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestTraceHook: with a TracerProvider, a Redis command made within a
// span is a client span, its child, named after the command, with the
// database system, the command and the server, and neither the command's
// arguments nor, when it fails, the error's text; a missing key is no
// failure; a command made outside any span makes none.
func TestTraceHook(t *testing.T) {
	t.Parallel()
	r := testkit.StartRedis(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	s := tracedState(t, r, tp)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("a command outside any span made %d spans", n)
	}
	pctx, parent := tp.Tracer("test").Start(ctx, "parent")
	const sid = "session-id-never-in-a-span"
	if _, found, err := s.GetSession(pctx, sid); err != nil || found {
		t.Fatalf("GetSession of a missing record: %v, %v", found, err)
	}
	if _, _, err := s.Counters().TakeAll(pctx, []ratelimit.Take{{Key: "k", Max: 5, TTL: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	r.Stop()
	if _, _, err := s.GetSession(pctx, sid); err == nil {
		t.Fatal("GetSession with Redis stopped: no error")
	}
	parent.End()
	var names []string
	var spans tracetest.SpanStubs
	for _, sp := range exp.GetSpans() {
		if sp.Name == "parent" {
			continue
		}
		spans = append(spans, sp)
		names = append(names, sp.Name)
		if sp.Parent.SpanID() != parent.SpanContext().SpanID() || sp.SpanKind != trace.SpanKindClient {
			t.Errorf("span %q: parent %s, kind %v; want a client span under the caller's", sp.Name, sp.Parent.SpanID(), sp.SpanKind)
		}
		attrs := map[string]string{}
		for _, kv := range sp.Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if attrs["db.system.name"] != "redis" || attrs["db.operation.name"] != strings.ToUpper(sp.Name) || attrs["server.address"] != "127.0.0.1" {
			t.Errorf("span %q: attributes %v", sp.Name, attrs)
		}
		if dump := fmt.Sprint(sp.Attributes, sp.Events, sp.Status); strings.Contains(dump, sid) || strings.Contains(dump, "openclaw:") || strings.Contains(dump, "refused") {
			t.Errorf("span %q carries an argument or an error's text: %s", sp.Name, dump)
		}
	}
	if want := "get evalsha eval get"; strings.Join(names, " ") != want {
		t.Fatalf("spans %v, want %s (the script unknown at first: EVALSHA, then EVAL)", names, want)
	}
	for i, sp := range spans[:len(spans)-1] {
		if sp.Status.Code != codes.Unset {
			t.Errorf("span %d %q: status %v, want unset (a missing key and NOSCRIPT are answers)", i, sp.Name, sp.Status)
		}
	}
	if last := spans[len(spans)-1]; last.Status.Code != codes.Error || last.Status.Description != "Redis command failed" {
		t.Errorf("the failed get's status: %+v", last.Status)
	}
}

// BenchmarkTakeAll measures one call's counters (TakeAll, one script) on
// a local Redis: without tracing (no hook), traced but outside any span
// (the hook passes it on), and within a span (a child span each).
func BenchmarkTakeAll(b *testing.B) {
	r := testkit.StartRedis(b)
	takes := []ratelimit.Take{{Key: "bench", Max: 1 << 62, TTL: time.Hour}}
	for _, mode := range []string{"off", "on, no span", "on, in a span"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			var s *sharedstate.State
			if mode == "off" {
				var err error
				if s, err = sharedstate.Open(r.URL(), nil); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
			} else {
				// Batched to an exporter that drops them: the caller's share.
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				s = tracedState(b, r, tp)
				if mode == "on, in a span" {
					var span trace.Span
					ctx, span = tp.Tracer("bench").Start(ctx, "call")
					defer span.End()
				}
			}
			for b.Loop() {
				if _, _, err := s.Counters().TakeAll(ctx, takes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
