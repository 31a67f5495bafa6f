package bridge

import (
	"context"
	"regexp"
	"testing"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
)

// mcp serve passes the same limits: a bridge tool call over its limit is
// a tool error naming the limit and the retry, audited, and never reaches
// the Gateway.
func TestRateLimitedBridgeCall(t *testing.T) {
	t.Parallel()
	audit := &policiestest.AuditRecorder{}
	lim, err := ratelimit.New([]config.PolicyRateLimit{{Name: "sends", Tool: "messages_*", Requests: 1, IntervalS: 60}},
		ratelimit.NewMemoryStore(), audit)
	if err != nil {
		t.Fatal(err)
	}
	gw := &fixtureGateway{t: t}
	b := New(gw, &Options{Enforcer: policiestest.AllowAll{}, Limiter: lim})
	cs := connectClient(t, b, "")
	ctx := context.Background()
	args := map[string]any{"session_key": "agent:main:main"}
	if res, err := cs.CallTool(ctx, toolParams(ToolConversationGet, args)); err != nil || res.IsError {
		t.Fatalf("conversation_get (not limited): %v %+v", err, res)
	}
	if res, err := cs.CallTool(ctx, toolParams(ToolMessagesRead, args)); err != nil || res.IsError {
		t.Fatalf("first messages_read: %v %+v", err, res)
	}
	before := len(gw.recorded())
	res, err := cs.CallTool(ctx, toolParams(ToolMessagesRead, args))
	if err != nil {
		t.Fatal(err)
	}
	// The retry is the window's rest in whole seconds: 60 unless the
	// machine took over a second between the two calls.
	want := regexp.MustCompile(`^rate limit "sends" reached: at most 1 call per 60 s; retry after ([1-9]|[1-5][0-9]|60) s$`)
	if !res.IsError || !want.MatchString(resultText(res)) {
		t.Fatalf("second messages_read: %q (isError %v), want the tool error %s", resultText(res), res.IsError, want)
	}
	if after := len(gw.recorded()); after != before {
		t.Errorf("the limited call made %d Gateway calls, want none", after-before)
	}
	r := audit.Find("sends")
	if r == nil || r.Hook != policies.HookRateLimit || r.Surface != policies.SurfaceServe || r.Tool != ToolMessagesRead || r.Decision != "block" {
		t.Errorf("audit %+v: want the serve surface's rate_limit record of messages_read", r)
	}
}
