package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// redisValues returns every string key of r and its value.
func redisValues(t *testing.T, r *testkit.Redis) map[string]string {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rc.Close()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("listing Redis keys: %v", err)
	}
	out := map[string]string{}
	for _, k := range keys {
		if v, err := rc.Get(ctx, k).Result(); err == nil {
			out[k] = v
		}
	}
	return out
}

// noPlaintext fails if a key or value of r holds one of secrets.
func noPlaintext(t *testing.T, r *testkit.Redis, secrets ...string) {
	t.Helper()
	for k, v := range redisValues(t, r) {
		for _, s := range secrets {
			if strings.Contains(k+" "+v, s) {
				t.Errorf("Redis holds %q in plaintext: %s = %s", s, k, v)
			}
		}
	}
}

// waitListed lists cs's tools until server "team"'s echo is among them
// (a per-requester server is listed over the connection of the first
// principal that uses the catalog; a failed listing is retried on a use
// at least 5 s later).
func waitListed(t *testing.T, ctx context.Context, cs *mcp.ClientSession, hp *httpProxy) {
	t.Helper()
	for {
		if slices.Contains(toolNames(t, ctx, cs), "team__echo") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("team__echo never listed; proxy stderr:\n%s", hp.stderr.String())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestMCPProxyStateOAuth: two `mcp proxy` replicas on one Redis in front
// of a per-requester OAuth server. A principal logged in for the fleet
// (`mcp login --state`), or imported from the token files (`--import`),
// is served by both replicas; a token refreshed through replica A is the
// one replica B then sends, with no second refresh; an expired token hit
// through both replicas at once is refreshed once at the authorization
// server (which rotates refresh tokens: a second refresh would fail). No
// token is readable in Redis; a record moved to another principal's key
// is refused, naming why; with Redis down a principal whose token is not
// in memory gets a tool error naming Redis while the others are served.
// --state without a key file refuses to start.
func TestMCPProxyStateOAuth(t *testing.T) {
	t.Parallel()
	f := newLoginFixture(t)
	f.mu.Lock()
	f.rotate = true
	f.mu.Unlock()
	dir := t.TempDir()
	rs := &replicaSet{t: t, redis: testkit.StartRedis(t), dir: dir, home: filepath.Join(dir, "home")}
	rs.bin = buildOpenclaw(t, dir)
	rs.cfgPath = filepath.Join(rs.home, ".openclaw", "openclaw.json")
	serverURL := f.srv.URL + "/mcp"
	writeJSON(t, rs.cfgPath, map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"team": map[string]any{"url": serverURL, "transport": "streamable-http", "auth": "oauth", "oauth": map[string]any{"identity": "per-requester"}},
		"docs": map[string]any{"url": serverURL, "transport": "streamable-http", "auth": "oauth"},
	}}})
	rs.policy = filepath.Join(dir, "policy.json")
	writeJSON(t, rs.policy, replicaPolicy)
	rs.tokens = filepath.Join(dir, "tokens.json")
	var entries []any
	for _, who := range []string{"alice", "bob", "carol", "dave"} {
		entries = append(entries, map[string]any{"name": who, "token": "proxy-token-" + who})
	}
	writeJSON(t, rs.tokens, map[string]any{"tokens": entries})
	key := filepath.Join(dir, "state.key")
	if err := os.WriteFile(key, []byte(hex.EncodeToString([]byte(rand.Text()))), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := &registryCLI{bin: rs.bin, home: rs.home, work: dir}
	state := []string{"--state", rs.redis.URL(), "--request-state-key-file", key}

	// Without the key: the proxy does not start, login refuses.
	refused := exec.Command(rs.bin, "mcp", "proxy", "--listen", "127.0.0.1:0", "--state", rs.redis.URL(), "--tokens-file", rs.tokens)
	refused.Env = append(os.Environ(), rs.env("refused")...)
	out, err := refused.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--state keeps the OAuth tokens of per-requester MCP servers in Redis, encrypted under the replicas' --request-state-key-file key, and none is given") || !strings.Contains(string(out), "(per-requester: team)") {
		t.Errorf("mcp proxy --state without a key file: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "login", "team", "--principal", "tokens-file#alice", "--state", rs.redis.URL()}, "--state needs --request-state-key-file"},
		{append([]string{"mcp", "login", "docs"}, state...), `MCP server "docs" uses the shared OAuth identity: --state keeps the tokens of per-requester servers`},
		{[]string{"mcp", "login", "team", "--import"}, "--import copies the tokens in files into the Redis of the mcp proxy replicas"},
	} {
		if _, stderr, code := cli.run(t, tc.args...); code != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}

	// alice logs in for the fleet; bob logs in to files, then is imported.
	stdout, stderr, code := login(t, cli, append([]string{"team", "--principal", "tokens-file#alice", "--timeout", "30s"}, state...)...)
	if code != 0 || stdout != `Logged in to MCP server "team" as principal "tokens-file#alice", for every mcp proxy replica on `+rs.redis.URL()+".\n" {
		t.Fatalf("login --state: exit %d, %q\n%s", code, stdout, stderr)
	}
	aliceTok := f.lastIssued(t)
	if files, _ := filepath.Glob(filepath.Join(rs.home, ".openclaw", "state", "mcp-oauth", "team-*")); len(files) != 0 {
		t.Errorf("login --state wrote token files: %q", files)
	}
	if stdout, stderr, code := login(t, cli, "team", "--principal", "tokens-file#bob", "--timeout", "30s"); code != 0 {
		t.Fatalf("login bob: exit %d, %q\n%s", code, stdout, stderr)
	}
	bobTok := f.lastIssued(t)
	stdout, stderr, code = cli.run(t, append([]string{"mcp", "login", "team", "--import"}, state...)...)
	if code != 0 || stdout != `Imported the OAuth credentials of 1 principal of MCP server "team" ("tokens-file#bob") into `+rs.redis.URL()+".\n" {
		t.Fatalf("login --import: exit %d, %q\n%s", code, stdout, stderr)
	}
	noPlaintext(t, rs.redis, aliceTok, bobTok, "cli-refresh-", "tokens-file#")

	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	a, b := rs.start("a", "--request-state-key-file", key), rs.start("b", "--request-state-key-file", key)
	aliceA, _ := connectReplica(t, ctx, a, "proxy-token-alice")
	aliceB, _ := connectReplica(t, ctx, b, "proxy-token-alice")
	bobB, _ := connectReplica(t, ctx, b, "proxy-token-bob")
	var wg sync.WaitGroup
	wg.Go(func() { waitListed(t, ctx, aliceA, a) })
	wg.Go(func() { waitListed(t, ctx, aliceB, b) })
	wg.Wait()
	call := func(cs *mcp.ClientSession, who string) {
		t.Helper()
		if isErr, text := callText(t, ctx, cs, "team__echo"); isErr || text != "protected ok" {
			t.Errorf("team__echo as %s: error %v, %q", who, isErr, text)
		}
	}
	before := len(f.callTokens())
	call(aliceA, "alice through A")
	call(aliceB, "alice through B")
	call(bobB, "bob through B")
	if got, want := f.callTokens()[before:], []string{aliceTok, aliceTok, bobTok}; !slices.Equal(got, want) {
		t.Fatalf("upstream tokens %v, want %v", got, want)
	}

	// alice's token expires: A refreshes it, B sends A's new token.
	f.revoke(aliceTok)
	call(aliceA, "alice through A, after her token expired")
	if n := f.refreshCount(); n != 1 {
		t.Fatalf("%d refreshes after alice's token expired, want 1", n)
	}
	refreshed := f.lastIssued(t)
	call(aliceB, "alice through B, after A refreshed")
	if n := f.refreshCount(); n != 1 {
		t.Errorf("%d refreshes after B's call, want still 1 (B reads A's token)", n)
	}
	if got := f.callTokens()[len(f.callTokens())-2:]; !slices.Equal(got, []string{refreshed, refreshed}) {
		t.Errorf("upstream tokens after the refresh %v, want A's refreshed %s twice", got, refreshed)
	}

	// It expires again and both replicas hit it at once: one refresh.
	f.revoke(refreshed)
	var calls sync.WaitGroup
	for i := range 6 {
		cs := aliceA
		if i%2 == 1 {
			cs = aliceB
		}
		calls.Go(func() { call(cs, "alice, concurrently") })
	}
	calls.Wait()
	if n := f.refreshCount(); n != 2 {
		t.Errorf("%d refreshes in all after both replicas met the expired token at once, want 2", n)
	}
	final := f.lastIssued(t)
	for _, tok := range f.callTokens()[len(f.callTokens())-6:] {
		if tok != final {
			t.Errorf("a concurrent call sent %s upstream, want the one refreshed token %s", tok, final)
		}
	}
	noPlaintext(t, rs.redis, aliceTok, refreshed, final, bobTok, "cli-refresh-", "tokens-file#")

	// carol's record replaced by alice's: refused.
	keysBefore := redisValues(t, rs.redis)
	if stdout, stderr, code := login(t, cli, append([]string{"team", "--principal", "tokens-file#carol", "--timeout", "30s"}, state...)...); code != 0 {
		t.Fatalf("login carol: exit %d, %q\n%s", code, stdout, stderr)
	}
	var carolKey, aliceRecord string
	for k := range redisValues(t, rs.redis) {
		if _, ok := keysBefore[k]; !ok && strings.HasPrefix(k, "openclaw:oauth:") {
			carolKey = k
		}
	}
	for k, v := range keysBefore {
		if strings.HasPrefix(k, "openclaw:oauth:") && k != carolKey && strings.Contains(v, `"sealed"`) {
			aliceRecord = v // alice's or bob's: either is another principal's
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: rs.redis.Addr()})
	defer rc.Close()
	if carolKey == "" || aliceRecord == "" || rc.Set(ctx, carolKey, aliceRecord, 0).Err() != nil {
		t.Fatalf("carol's key %q, another record %q", carolKey, aliceRecord)
	}
	carolA, _ := connectReplica(t, ctx, a, "proxy-token-carol")
	upstream := len(f.callTokens())
	isErr, text := callText(t, ctx, carolA, "team__echo")
	if !isErr || !strings.Contains(text, "the OAuth token record "+carolKey+" in Redis is refused: it does not decrypt: altered, or moved from another key") {
		t.Errorf("carol with another principal's record: error %v, %q; want it refused", isErr, text)
	}

	// Logout for the fleet: carol, then everyone; the replicas keep the
	// tokens they hold in memory until they need a refresh.
	stdout, _, code = cli.run(t, append([]string{"mcp", "logout", "team", "--principal", "tokens-file#carol"}, state...)...)
	if code != 0 || stdout != "Logged out principal \"tokens-file#carol\" of MCP server \"team\".\n" {
		t.Errorf("logout carol --state: exit %d, %q", code, stdout)
	}
	stdout, _, code = cli.run(t, append([]string{"mcp", "logout", "team", "--all"}, state...)...)
	if code != 0 || stdout != "Logged out of MCP server \"team\": deleted 2 sets of OAuth credentials.\n" {
		t.Errorf("logout --all --state: exit %d, %q", code, stdout)
	}
	for k := range redisValues(t, rs.redis) {
		if strings.HasPrefix(k, "openclaw:oauth:") {
			t.Errorf("%s is still in Redis after logout --all", k)
		}
	}

	// Redis down: dave, whose tokens are not in memory, is told Redis
	// failed; alice, whose token is, is served.
	daveB, _ := connectReplica(t, ctx, b, "proxy-token-dave")
	rs.redis.Stop()
	isErr, text = callText(t, ctx, daveB, "team__echo")
	if !isErr || !strings.Contains(text, "shared state (Redis at "+rs.redis.Addr()+"): OAuth token:") {
		t.Errorf("dave with Redis down: error %v, %q; want a tool error naming Redis", isErr, text)
	}
	call(aliceB, "alice through B with Redis down")
	if got := f.callTokens()[upstream:]; !slices.Equal(got, []string{final}) {
		t.Errorf("upstream calls after alice's last: %v, want only alice's %s", got, final)
	}
}
