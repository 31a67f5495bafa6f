package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

// memorySessions is a SessionStore in the test's process, shared by two
// handlers as Redis is by two replicas; fail makes every call fail.
type memorySessions struct {
	mu   sync.Mutex
	recs map[string]sharedstate.Session
	fail atomic.Bool
}

var errStoreDown = errors.New("the store is down")

func (m *memorySessions) PutSession(_ context.Context, id string, rec sharedstate.Session, _ time.Duration) error {
	if m.fail.Load() {
		return errStoreDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[id] = rec
	return nil
}

func (m *memorySessions) GetSession(_ context.Context, id string) (sharedstate.Session, bool, error) {
	if m.fail.Load() {
		return sharedstate.Session{}, false, errStoreDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[id]
	return rec, ok, nil
}

func (m *memorySessions) TouchSession(context.Context, string, time.Duration) error {
	if m.fail.Load() {
		return errStoreDown
	}
	return nil
}

func (m *memorySessions) DeleteSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, id)
	return nil
}

// TestSessionTakeoverSpans: traced, a handler that takes over a session
// another opened (their records shared) makes a session_takeover span in
// the trace of the request's _meta, with the session and the outcome:
// taken_over; no_record for an id without a record; failed, with an
// error status, when the records cannot be read. The record written at
// initialize is a session_record span. The request that brought the
// session is then served under its id.
func TestSessionTakeoverSpans(t *testing.T) {
	t.Parallel()
	store := &memorySessions{recs: map[string]sharedstate.Session{}}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	a := newTracedHTTPFixture(t, HTTPOptions{NoAuth: true, Sessions: store}, tp)
	b := newTracedHTTPFixture(t, HTTPOptions{NoAuth: true, Sessions: store}, tp)
	ctx := context.Background()
	cs := a.connect(t, ctx, &mcp.StreamableClientTransport{Endpoint: a.url + PathMCP}, "2025-11-25")

	const traceID, parent = "6bf92f3577b34da6a3ce929d0e0e4738", "00f067aa0ba902b3"
	post := func(sid string) int {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"traceparent":"00-` + traceID + `-` + parent + `-01"}}}`
		req, _ := http.NewRequest(http.MethodPost, b.url+PathMCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", sid)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	takeovers := func() []tracetest.SpanStub {
		var out []tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			if s.Name == "session_takeover" {
				out = append(out, s)
			}
		}
		return out
	}
	attr := func(s tracetest.SpanStub, key string) string {
		for _, kv := range s.Attributes {
			if string(kv.Key) == key {
				return kv.Value.String()
			}
		}
		return ""
	}

	recorded := false
	for _, s := range exp.GetSpans() {
		recorded = recorded || (s.Name == "session_record" && attr(s, "mcp.method.name") == "initialize" && attr(s, "mcp.session.id") == cs.ID())
	}
	if !recorded {
		t.Error("no session_record span for the initialize on A")
	}
	if code := post(cs.ID()); code != http.StatusOK {
		t.Fatalf("B, the session opened on A: %d", code)
	}
	if code := post("no-such-session"); code != http.StatusNotFound {
		t.Fatalf("B, a session without a record: %d, want 404", code)
	}
	store.fail.Store(true)
	if code := post("another-session"); code != http.StatusServiceUnavailable {
		t.Fatalf("B, the records unreadable: %d, want 503", code)
	}
	got := takeovers()
	if len(got) != 3 {
		t.Fatalf("%d session_takeover spans, want 3", len(got))
	}
	for i, want := range []struct{ sid, outcome string }{{cs.ID(), "taken_over"}, {"no-such-session", "no_record"}, {"another-session", "failed"}} {
		s := got[i]
		if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != parent ||
			attr(s, "mcp.session.id") != want.sid || attr(s, "openclaw.session.takeover") != want.outcome {
			t.Errorf("takeover %d: trace %s parent %s, attributes %v; want the client's trace, session %s, %s",
				i, s.SpanContext.TraceID(), s.Parent.SpanID(), s.Attributes, want.sid, want.outcome)
		}
		if failed := s.Status.Code == codes.Error; failed != (want.outcome == "failed") || strings.Contains(s.Status.Description, errStoreDown.Error()) {
			t.Errorf("takeover %d (%s): status %+v", i, want.outcome, s.Status)
		}
	}
}
