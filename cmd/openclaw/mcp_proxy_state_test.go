//lint:file-ignore SA1019 logging is deprecated by SEP-2577 but still served during its deprecation window: the takeover test checks that a session keeps its log level

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/proxy"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
)

// replicaSet is `mcp proxy` replicas sharing one Redis (--state), one
// openclaw.json (go-sdk's everything-server as server "one"), one policy
// file and one tokens file (agent-a, agent-b), each replica with a state
// directory of its own, as on a machine of its own.
type replicaSet struct {
	t       *testing.T
	bin     string
	dir     string
	home    string
	cfgPath string
	policy  string
	tokens  string
	server  string
	redis   *testkit.Redis
}

func newReplicaSet(t *testing.T, policy map[string]any) *replicaSet {
	t.Helper()
	rs := &replicaSet{t: t, server: testkit.Peer(t, testkit.GoEverythingServer), redis: testkit.StartRedis(t), dir: t.TempDir()}
	rs.bin = buildOpenclaw(t, rs.dir)
	rs.home = filepath.Join(rs.dir, "home")
	rs.cfgPath = filepath.Join(rs.home, ".openclaw", "openclaw.json")
	rs.writeServers("one")
	rs.policy = filepath.Join(rs.dir, "policy.json")
	writeJSON(t, rs.policy, policy)
	rs.tokens = filepath.Join(rs.dir, "tokens.json")
	writeJSON(t, rs.tokens, map[string]any{"tokens": []any{
		map[string]any{"name": "agent-a", "token": "token-of-agent-a"},
		map[string]any{"name": "agent-b", "token": "token-of-agent-b"},
	}})
	return rs
}

// writeServers writes openclaw.json with the everything-server under each
// of names.
func (rs *replicaSet) writeServers(names ...string) {
	servers := map[string]any{}
	for _, n := range names {
		servers[n] = map[string]any{"command": rs.server}
	}
	writeJSON(rs.t, rs.cfgPath, map[string]any{"mcp": map[string]any{"servers": servers}})
}

// env is the environment of replica name (and of the CLI run beside it).
func (rs *replicaSet) env(name string) []string {
	return []string{"OPENCLAW_HOME=" + rs.home, "OPENCLAW_STATE_DIR=" + filepath.Join(rs.dir, "state-"+name)}
}

// start starts replica name with --state on the set's Redis.
func (rs *replicaSet) start(name string, args ...string) *httpProxy {
	rs.t.Helper()
	return rs.startEnv(name, nil, args...)
}

// startEnv starts replica name as start does, with the further
// environment variables env.
func (rs *replicaSet) startEnv(name string, env []string, args ...string) *httpProxy {
	rs.t.Helper()
	return runHTTPProxy(rs.t, rs.bin, append(rs.env(name), env...), append([]string{"--state", rs.redis.URL(), "--tokens-file", rs.tokens,
		"--policy-config", rs.policy, "--audit-log", filepath.Join(rs.dir, "audit-"+name+".jsonl")}, args...)...)
}

// connect opens a go-sdk client session on hp with token; changed
// receives notifications/tools/list_changed.
func connectReplica(t *testing.T, ctx context.Context, hp *httpProxy, token string) (cs *mcp.ClientSession, changed chan struct{}) {
	t.Helper()
	changed = make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "replica-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	hc := &http.Client{Transport: bearerTransport{token: token}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hp.base + proxy.PathMCP, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to %s: %v\nstderr:\n%s", hp.base, err, hp.stderr.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, changed
}

// callText calls tool and returns whether it was a tool error and its
// first text.
func callText(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string) (isError bool, text string) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	return res.IsError, text
}

var replicaPolicy = map[string]any{"modules": []any{
	map[string]any{"name": "rules", "source": "builtin:rules"},
	map[string]any{"name": "sanitizer", "source": "builtin:sanitizer"},
}}

// TestMCPProxyStateRateLimit: two replicas on one Redis share the
// policy file's rate-limit counters: agent-a over its limit through
// replica A is limited through replica B, agent-b is not. With Redis
// stopped a call that needs a counter is a tool error naming Redis while
// the replica keeps serving; with Redis back the calls go through again,
// with no restart.
func TestMCPProxyStateRateLimit(t *testing.T) {
	t.Parallel()
	policy := map[string]any{"modules": replicaPolicy["modules"], "rate_limits": []any{
		map[string]any{"name": "per-agent", "tool": "one__test_simple_text", "requests": 2, "interval_s": 3600},
	}}
	rs := newReplicaSet(t, policy)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	a, b := rs.start("a"), rs.start("b")
	aliceA, _ := connectReplica(t, ctx, a, "token-of-agent-a")
	aliceB, _ := connectReplica(t, ctx, b, "token-of-agent-a")
	bobB, _ := connectReplica(t, ctx, b, "token-of-agent-b")
	const tool = "one__test_simple_text"
	for i := range 2 {
		if isErr, text := callText(t, ctx, aliceA, tool); isErr {
			t.Fatalf("agent-a's call %d through A: %s", i+1, text)
		}
	}
	if isErr, text := callText(t, ctx, aliceB, tool); !isErr || !strings.Contains(text, `rate limit "per-agent" reached: at most 2 calls per 3600 s`) {
		t.Fatalf("agent-a's third call, through B: error %v %q; want the limit reached", isErr, text)
	}
	if isErr, text := callText(t, ctx, bobB, tool); isErr {
		t.Fatalf("agent-b's first call through B: %s", text)
	}

	if code, body := b.get(t, proxy.PathReady, nil); code != http.StatusOK {
		t.Fatalf("/readyz of B with Redis up: %d %s", code, body)
	}
	rs.redis.Stop()
	waitReadyz(t, ctx, b, http.StatusServiceUnavailable, `"state":"shared state (Redis at `+rs.redis.Addr()+`): ping: `)
	isErr, text := callText(t, ctx, bobB, tool)
	if !isErr || !strings.Contains(text, "shared state (Redis at "+rs.redis.Addr()+")") || !strings.Contains(text, `rate limit "per-agent": the counter store failed`) {
		t.Fatalf("a call with Redis down: error %v %q; want a tool error naming Redis", isErr, text)
	}
	if _, err := bobB.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list with Redis down: %v", err)
	}
	rs.redis.Start() // empty: the counters start again
	waitReadyz(t, ctx, b, http.StatusOK, `{"ready":true}`)
	if isErr, text := callText(t, ctx, bobB, tool); isErr {
		t.Fatalf("agent-b's call after Redis is back: %s\nstderr of B:\n%s", text, b.stderr.String())
	}
	if isErr, text := callText(t, ctx, aliceA, tool); isErr {
		t.Fatalf("agent-a's call through A after Redis is back: %s", text)
	}
	_, metrics := b.get(t, proxy.PathMetrics, map[string]string{"Authorization": "Bearer token-of-agent-b"})
	for _, want := range []string{`openclaw_state_redis_commands_total{op="evalsha",result="ok"}`, `openclaw_state_redis_commands_total{op="ping",result="error"}`,
		`openclaw_state_redis_command_duration_seconds_count{op="evalsha"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("B's /metrics lacks %s", want)
		}
	}
}

// waitReadyz waits until hp's /readyz answers code with a body holding
// want (the replica pings Redis every second).
func waitReadyz(t *testing.T, ctx context.Context, hp *httpProxy, code int, want string) {
	t.Helper()
	for {
		got, body := hp.get(t, proxy.PathReady, nil)
		if got == code && strings.Contains(body, want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz = %d %s, want %d with %s", got, body, code, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitListChanged waits for notifications/tools/list_changed on changed.
func waitListChanged(t *testing.T, ctx context.Context, changed chan struct{}, what string, hp *httpProxy) {
	t.Helper()
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatalf("no notifications/tools/list_changed %s\nstderr of the replica:\n%s", what, hp.stderr.String())
	}
}

// toolNames lists cs's tools.
func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestMCPProxyStateFanOut: `openclaw mcp reload` reaches replica A alone
// (each replica has its own state directory, as on its own machine); A
// publishes it on Redis, and replica B re-reads openclaw.json and sends
// notifications/tools/list_changed to its client, which then lists the
// added server's tools. After a Redis restart B subscribes again by
// itself, and the next reload through A reaches it too.
func TestMCPProxyStateFanOut(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, replicaPolicy)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	a, b := rs.start("a"), rs.start("b")
	csB, changedB := connectReplica(t, ctx, b, "token-of-agent-b")
	if names := toolNames(t, ctx, csB); slices.Contains(names, "two__test_simple_text") || !slices.Contains(names, "one__test_simple_text") {
		t.Fatalf("B's tools before the reload: %v", names)
	}
	reloadA := func(want string) {
		t.Helper()
		rc := exec.CommandContext(ctx, rs.bin, "mcp", "reload")
		rc.Env = append(os.Environ(), rs.env("a")...)
		out, err := rc.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) || strings.Count(string(out), "reloaded") != 1 {
			t.Fatalf("openclaw mcp reload beside A: %v\n%s\nwant one process %q; A's stderr:\n%s", err, out, want, a.stderr.String())
		}
	}
	rs.writeServers("one", "two")
	reloadA("reloaded: 1 added (two)")
	waitListChanged(t, ctx, changedB, "on B after a reload through A", b)
	if names := toolNames(t, ctx, csB); !slices.Contains(names, "two__test_simple_text") {
		t.Fatalf("B's tools after a reload through A: %v\nB's stderr:\n%s", names, b.stderr.String())
	}
	if isErr, text := callText(t, ctx, csB, "two__test_simple_text"); isErr {
		t.Fatalf("two__test_simple_text through B: %s", text)
	}

	rs.redis.Stop()
	rs.redis.Start()
	// B re-reads everything once subscribed again (events may have been
	// lost meanwhile): its client is told.
	waitListChanged(t, ctx, changedB, "on B after its subscription came back", b)
	rs.writeServers("one", "two", "three")
	reloadA("reloaded: 1 added (three)")
	for !slices.Contains(toolNames(t, ctx, csB), "three__test_simple_text") {
		waitListChanged(t, ctx, changedB, "on B after a reload through A once Redis was back", b)
	}
}

// switchTransport sends every request to the replica base currently
// names, as a load balancer does once the replica a session was on is
// gone.
type switchTransport struct {
	token string
	mu    sync.Mutex
	base  *url.URL
}

func (s *switchTransport) to(base string) {
	u, _ := url.Parse(base)
	s.mu.Lock()
	s.base = u
	s.mu.Unlock()
}

func (s *switchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = base.Scheme, base.Host, base.Host
	r.Header.Set("Authorization", "Bearer "+s.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPProxyStateTakeover: a session opened on replica A, with a log
// level set, survives a Redis restart (A writes its record again) and
// goes on through replica B once A is killed (SIGKILL): B
// takes the session over from its record in Redis, replays the log
// level upstream (the upstream's log lines reach the client again), and
// serves the same session id. Another identity presenting the session id
// is refused with 403.
func TestMCPProxyStateTakeover(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, replicaPolicy)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	a, b := rs.start("a"), rs.start("b")
	st := &switchTransport{token: "token-of-agent-a"}
	st.to(a.base)
	logs := make(chan string, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "takeover-test", Version: "1"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			select {
			case logs <- fmt.Sprint(req.Params.Data):
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.base + proxy.PathMCP, HTTPClient: &http.Client{Transport: st}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect to A: %v\n%s", err, a.stderr.String())
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	const logTool = "one__test_tool_with_logging"
	if isErr, text := callText(t, ctx, cs, logTool); isErr {
		t.Fatalf("%s through A: %s", logTool, text)
	}
	drain := func() int {
		n := 0
		for len(logs) > 0 {
			<-logs
			n++
		}
		return n
	}
	if drain() == 0 {
		t.Fatalf("no log message reached the client through A\n%s", a.stderr.String())
	}

	// Redis restarts empty: the session's record is gone, and A writes it
	// again once its subscription is back.
	rs.redis.Stop()
	rs.redis.Start()
	reader, err := sharedstate.Open(rs.redis.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for {
		rec, found, err := reader.GetSession(ctx, cs.ID())
		if found && rec.LogLevel == "debug" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("A did not write the session's record again after the Redis restart: %v\nA's stderr:\n%s", err, a.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}

	_ = a.cmd.Process.Kill()
	<-a.exited
	st.to(b.base)
	start := time.Now()
	if isErr, text := callText(t, ctx, cs, "one__test_simple_text"); isErr {
		t.Fatalf("the session's next call, through B after A was killed: %s\nB's stderr:\n%s", text, b.stderr.String())
	}
	t.Logf("the first call after the kill, taken over by B, took %v", time.Since(start)) // docs/benchmarks.md
	// The line is written before the call is served, but it reaches the
	// buffer through the stderr pipe's copier, which may run after the
	// answer came back.
	if !waitStderr(ctx, b, "took over a session opened on another replica") {
		t.Errorf("B does not say it took the session over:\n%s", b.stderr.String())
	}
	if isErr, text := callText(t, ctx, cs, logTool); isErr {
		t.Fatalf("%s through B: %s", logTool, text)
	}
	if drain() == 0 {
		t.Fatalf("no log message reached the client through B: the log level was not replayed upstream\nB's stderr:\n%s", b.stderr.String())
	}

	// The session id, presented by another identity, is refused.
	req, _ := http.NewRequest(http.MethodPost, b.base+proxy.PathMCP, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer token-of-agent-b")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("agent-b with agent-a's session id: %d, want 403", res.StatusCode)
	}
}

// TestMCPProxyStateHAProxy: three replicas behind HAProxy (balance by
// Mcp-Session-Id, /readyz as the health check), one Redis. Six go-sdk
// clients, each its own session, make calls; then one replica is killed
// with SIGKILL between calls, and every session goes on, with the same
// id: the killed replica's through the replicas that take them over;
// then a second replica drains on SIGTERM, and every session goes on
// through the last.
func TestMCPProxyStateHAProxy(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, replicaPolicy)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	replicas := []*httpProxy{rs.start("r0"), rs.start("r1"), rs.start("r2")}
	ha, lb := behindHAProxy(t, replicas)
	const clients, calls = 6, 10
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		sessions[i], _ = connectReplica(t, ctx, lb, "token-of-agent-a")
	}
	run := func(phase string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, clients*calls)
		for i, cs := range sessions {
			wg.Go(func() {
				for n := range calls {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "one__test_simple_text"})
					if err == nil && res.IsError {
						err = fmt.Errorf("tool error %v", res.Content)
					}
					if err != nil {
						errs <- fmt.Errorf("%s: client %d, call %d: %w", phase, i, n, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	run("before the kill")
	for i, r := range replicas {
		if strings.Contains(r.stderr.String(), "took over a session") {
			t.Errorf("replica r%d took a session over before any replica went away: HAProxy did not keep the sessions where they opened", i)
		}
	}
	ids := make([]string, clients)
	for i, cs := range sessions {
		ids[i] = cs.ID()
	}
	// HAProxy sends sessionless requests (initialize) round robin: each
	// replica holds some of the sessions.
	const victim = 0
	_ = replicas[victim].cmd.Process.Kill()
	<-replicas[victim].exited
	// Until HAProxy's health check marks it down, a session's hash can
	// still pick the dead replica for every retry.
	ha.WaitDown(t, victim)
	run("after the kill")
	// A second replica drains on SIGTERM and exits; its sessions, and
	// those it took over, go on through the last one.
	const drained = 1
	const takeover = "took over a session opened on another replica"
	before := strings.Count(replicas[2].stderr.String(), takeover)
	_ = replicas[drained].cmd.Process.Signal(syscall.SIGTERM)
	if err := <-replicas[drained].exited; err != nil {
		t.Fatalf("replica r%d after SIGTERM: %v\n%s", drained, err, replicas[drained].stderr.String())
	}
	ha.WaitDown(t, drained)
	run("after the drain")
	if strings.Count(replicas[2].stderr.String(), takeover) == before {
		t.Errorf("the last replica took none of the drained replica's sessions over:\n%s", replicas[2].stderr.String())
	}
	for i, cs := range sessions {
		if cs.ID() != ids[i] {
			t.Errorf("client %d's session id changed: %s, was %s", i, cs.ID(), ids[i])
		}
	}
	took := 0
	for i, r := range replicas {
		if i != victim {
			took += strings.Count(r.stderr.String(), "took over a session opened on another replica")
		}
	}
	if took == 0 {
		t.Errorf("no replica took a session over after replica %d was killed", victim)
	}
}

// behindHAProxy puts replicas behind testkit's HAProxy (r0, r1, … in
// their order) and returns it and its frontend as an httpProxy; a failed
// test logs every replica's stderr.
func behindHAProxy(t *testing.T, replicas []*httpProxy) (*testkit.HAProxy, *httpProxy) {
	t.Helper()
	var backends []string
	for _, r := range replicas {
		backends = append(backends, strings.TrimPrefix(r.base, "http://"))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, r := range replicas {
				t.Logf("replica r%d's stderr:\n%s", i, r.stderr.String())
			}
		}
	})
	ha := testkit.StartHAProxy(t, backends)
	return ha, &httpProxy{base: "http://" + ha.Addr, stderr: replicas[0].stderr}
}

// TestMCPProxyStateTLS: --state rediss:// reaches a Redis that speaks TLS
// only, verifying its certificate: a replica that trusts the test CA
// (SSL_CERT_FILE) is ready and shares the rate limit; one that does not
// is not ready, and says why.
func TestMCPProxyStateTLS(t *testing.T) {
	t.Parallel()
	policy := map[string]any{"modules": replicaPolicy["modules"], "rate_limits": []any{
		map[string]any{"name": "per-agent", "tool": "one__test_simple_text", "requests": 1, "interval_s": 3600},
	}}
	rs := newReplicaSet(t, policy)
	tlsRedis, ca := testkit.StartRedisTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := func(name string, env ...string) *httpProxy {
		return runHTTPProxy(t, rs.bin, append(rs.env(name), env...), "--state", tlsRedis.URL(), "--tokens-file", rs.tokens,
			"--policy-config", rs.policy, "--audit-log", filepath.Join(rs.dir, "audit-"+name+".jsonl"))
	}
	a := start("a", "SSL_CERT_FILE="+ca)
	b := start("b", "SSL_CERT_FILE="+ca)
	untrusting := start("c", "SSL_CERT_FILE="+filepath.Join(rs.dir, "no-such-ca.pem"))
	waitReadyz(t, ctx, a, http.StatusOK, `{"ready":true}`)
	waitReadyz(t, ctx, untrusting, http.StatusServiceUnavailable, `certificate`)
	csA, _ := connectReplica(t, ctx, a, "token-of-agent-a")
	csB, _ := connectReplica(t, ctx, b, "token-of-agent-a")
	if isErr, text := callText(t, ctx, csA, "one__test_simple_text"); isErr {
		t.Fatalf("the first call through A: %s", text)
	}
	if isErr, text := callText(t, ctx, csB, "one__test_simple_text"); !isErr || !strings.Contains(text, `rate limit "per-agent" reached`) {
		t.Fatalf("the second call, through B: error %v %q; want the limit shared over TLS", isErr, text)
	}
}

// waitStderr reports whether hp's stderr holds substr, waiting for the
// pipe's copier until ctx is done.
func waitStderr(ctx context.Context, hp *httpProxy, substr string) bool {
	for !strings.Contains(hp.stderr.String(), substr) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}
