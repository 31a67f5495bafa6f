package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/proxy"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

// TestMCPProxyStateRedisOutage: two replicas behind HAProxy configured as
// docs/replicas.md says (testkit.HAProxyConfig: requests without a
// session to the replicas whose /readyz answers, a session's requests to
// those whose /healthz does), one Redis. Sessions are opened; Redis stops:
// every replica turns not ready and HAProxy takes it out of "ready" only.
// The sessions' GET streams, cut by HAProxy, reconnect to their replicas;
// their calls go on there, while a call that needs a rate-limit counter
// is a tool error naming Redis; a new session and a 2026-07-28 client are
// served too (no replica is ready: HAProxy sends them to a live one).
// Redis starts again: the replicas are ready again, not restarted, the
// counted call succeeds, the session opened during the outage has its
// record written (it can move), and no session ended, moved or changed
// its id.
func TestMCPProxyStateRedisOutage(t *testing.T) {
	t.Parallel()
	const counted, plain = "one__test_tool_with_logging", "one__test_simple_text"
	policy := map[string]any{"modules": replicaPolicy["modules"], "rate_limits": []any{
		map[string]any{"name": "per-agent", "tool": counted, "requests": 1000, "interval_s": 3600},
	}}
	rs := newReplicaSet(t, policy)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	replicas := []*httpProxy{rs.start("r0"), rs.start("r1")}
	ha, lb := behindHAProxy(t, replicas)
	for i := range replicas {
		ha.WaitStatus(t, testkit.BackendReady, i, "UP")
		ha.WaitStatus(t, testkit.BackendLive, i, "UP")
	}
	var sessions []*mcp.ClientSession
	for range 4 {
		cs, _ := connectReplica(t, ctx, lb, "token-of-agent-a")
		sessions = append(sessions, cs)
	}
	ids := make([]string, len(sessions))
	for i, cs := range sessions {
		ids[i] = cs.ID()
		for _, tool := range []string{plain, counted} {
			if isErr, text := callText(t, ctx, cs, tool); isErr {
				t.Fatalf("session %d's %s with Redis up: %s", i, tool, text)
			}
		}
	}
	// streams counts the connections open to the replicas in "live" (the
	// sessions' GET streams, between calls) and made in all.
	streams := func() (open, total int) {
		t.Helper()
		for i := range replicas {
			o, n, err := ha.ServerSessions(testkit.BackendLive, i)
			if err != nil {
				t.Fatal(err)
			}
			open, total = open+o, total+n
		}
		return open, total
	}
	waitStreams := func(what string, done func(open, total int) bool) {
		t.Helper()
		for {
			open, total := streams()
			if done(open, total) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %d connections open to the replicas, %d in all", what, open, total)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitStreams("every session's GET stream open", func(open, _ int) bool { return open == len(sessions) })

	rs.redis.Stop()
	for i, r := range replicas {
		waitReadyz(t, ctx, r, http.StatusServiceUnavailable, "Redis at "+rs.redis.Addr())
		ha.WaitStatus(t, testkit.BackendReady, i, "DOWN")
		if status, err := ha.ServerStatus(testkit.BackendLive, i); err != nil || !strings.HasPrefix(status, "UP") {
			t.Fatalf("replica r%d in HAProxy's live backend with Redis down: %q, %v; want UP (its /healthz)", i, status, err)
		}
	}
	// The GET streams are cut between HAProxy and the replicas; the
	// clients open them again, through HAProxy, on the replicas that hold
	// their sessions (a refused GET stream would end a go-sdk session).
	_, before := streams()
	for i := range replicas {
		if err := ha.CutConnections(testkit.BackendLive, i); err != nil {
			t.Fatal(err)
		}
	}
	waitStreams("every session's GET stream reconnected with Redis down", func(open, total int) bool {
		return open == len(sessions) && total >= before+len(sessions)
	})
	wantRedis := "shared state (Redis at " + rs.redis.Addr() + ")"
	for i, cs := range sessions {
		if isErr, text := callText(t, ctx, cs, plain); isErr {
			t.Errorf("session %d's %s with Redis down: %s", i, plain, text)
		}
		if isErr, text := callText(t, ctx, cs, counted); !isErr || !strings.Contains(text, wantRedis) || !strings.Contains(text, `rate limit "per-agent": the counter store failed`) {
			t.Errorf("session %d's %s (rate-limited) with Redis down: error %v %q; want a tool error naming Redis", i, counted, isErr, text)
		}
	}
	opened, _ := connectReplica(t, ctx, lb, "token-of-agent-a")
	if isErr, text := callText(t, ctx, opened, plain); isErr {
		t.Errorf("a session opened with Redis down: %s", text)
	}
	stateless := inputClient26(t, ctx, lb.base+proxy.PathMCP)
	if res, err := stateless.CallTool(ctx, &mcp.CallToolParams{Name: plain}); err != nil || res.IsError {
		t.Errorf("a 2026-07-28 client's call with Redis down: %+v, %v", res, err)
	}

	rs.redis.Start()
	for i, r := range replicas {
		waitReadyz(t, ctx, r, http.StatusOK, `{"ready":true}`)
		ha.WaitStatus(t, testkit.BackendReady, i, "UP")
	}
	for i, cs := range append(sessions, opened) {
		for _, tool := range []string{plain, counted} {
			if isErr, text := callText(t, ctx, cs, tool); isErr {
				t.Errorf("session %d's %s once Redis is back: %s", i, tool, text)
			}
		}
	}
	if res, err := stateless.CallTool(ctx, &mcp.CallToolParams{Name: counted}); err != nil || res.IsError {
		t.Errorf("the 2026-07-28 client's rate-limited call once Redis is back: %+v, %v", res, err)
	}
	waitSessionRecord(t, ctx, rs.redis, opened.ID(), "the record of the session opened during the outage, once Redis was back")
	for i, cs := range sessions {
		if cs.ID() != ids[i] {
			t.Errorf("session %d's id changed: %s, was %s", i, cs.ID(), ids[i])
		}
	}
	for i, r := range replicas {
		if strings.Contains(r.stderr.String(), "took over a session") {
			t.Errorf("replica r%d took a session over: a session left its replica during the outage", i)
		}
	}
}

// TestMCPProxyStateLongRedisOutage: Redis stops for longer than go-redis
// takes to stop dialling (its pool, after pool_size failed dials, answers
// with the last dial error until a probe once a second gets through) and
// starts again empty. The replica's subscription comes back first; the
// replica writes the record of the session it holds again all the same,
// and that session, requested on another replica, is served there.
func TestMCPProxyStateLongRedisOutage(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, replicaPolicy)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// pool_size=1: one failed dial (the /readyz monitor's, each second)
	// saturates the pool as twenty do with the default pool of 2 cores.
	holder := rs.start("holder", "--state", rs.redis.URL()+"?pool_size=1")
	cs, _ := connectReplica(t, ctx, holder, "token-of-agent-a")
	if isErr, text := callText(t, ctx, cs, "one__test_simple_text"); isErr {
		t.Fatalf("the call on the holder: %s", text)
	}
	rs.redis.Stop()
	waitReadyz(t, ctx, holder, http.StatusServiceUnavailable, "Redis at "+rs.redis.Addr())
	time.Sleep(3 * time.Second) // several of the monitor's failed dials: the pool gives up dialling
	rs.redis.Start()
	waitReadyz(t, ctx, holder, http.StatusOK, `{"ready":true}`)
	waitSessionRecord(t, ctx, rs.redis, cs.ID(), "the record of the holder's session, written again after a long Redis outage\nits stderr:\n"+holder.stderr.String())
	other := rs.start("other")
	req, _ := http.NewRequest(http.MethodPost, other.base+proxy.PathMCP, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer token-of-agent-a")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the session requested on another replica after the outage: %d, want 200\nits stderr:\n%s", resp.StatusCode, other.stderr.String())
	}
}

// waitSessionRecord waits until r holds the record of session sid; what
// names it in the failure.
func waitSessionRecord(t *testing.T, ctx context.Context, r *testkit.Redis, sid, what string) {
	t.Helper()
	reader, err := sharedstate.Open(r.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for {
		_, found, err := reader.GetSession(ctx, sid)
		if found {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not in Redis: %s (%v)", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
