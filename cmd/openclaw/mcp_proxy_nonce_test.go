package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/proxy"
)

// countingReplicas is a replicaSet whose one server, "count", is
// testdata/countpeer noting the start and the end of every call it runs
// in calls (one countpeer per replica, one file), whose policy asks approval of
// count__danger, and whose replicas share a request-state key.
type countingReplicas struct {
	*replicaSet
	calls string // countpeer's notes: "start|ran <id> <ancestor pids>", one a line
	key   string // --request-state-key-file
}

func newCountingReplicas(t *testing.T) *countingReplicas {
	t.Helper()
	rs := newReplicaSet(t, map[string]any{"modules": []any{
		map[string]any{"name": "sanitizer", "source": "builtin:sanitizer"},
		map[string]any{"name": "rules", "source": "builtin:rules", "config": map[string]any{"default": "allow", "rules": []any{
			map[string]any{"tool": "count__danger", "decision": "require_approval", "reason": "danger needs a human", "title": "Danger?"},
		}}},
	}})
	peer := filepath.Join(rs.dir, "countpeer")
	if out, err := exec.Command("go", "build", "-o", peer, "./testdata/countpeer").CombinedOutput(); err != nil {
		t.Fatalf("go build countpeer: %v\n%s", err, out)
	}
	cr := &countingReplicas{replicaSet: rs, calls: filepath.Join(rs.dir, "calls"), key: filepath.Join(rs.dir, "state.key")}
	writeJSON(t, rs.cfgPath, map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"count": map[string]any{"command": peer, "args": []string{cr.calls}},
	}}})
	if err := os.WriteFile(cr.key, []byte(strings.Repeat("s", proxy.MinStateKeyBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cr
}

// start starts replica name with the shared request-state key.
func (cr *countingReplicas) start(name string, args ...string) *httpProxy {
	cr.t.Helper()
	return cr.replicaSet.start(name, append([]string{"--request-state-key-file", cr.key}, args...)...)
}

// ran returns how many times the upstream ran each call id.
func (cr *countingReplicas) ran() map[string]int {
	cr.t.Helper()
	b, err := os.ReadFile(cr.calls)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		cr.t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "ran" {
			n[f[1]]++
		}
	}
	return n
}

// started returns, for each call id, the process ids above the countpeer
// that started it (its replica among them), one list per start.
func (cr *countingReplicas) started() map[string][]string {
	cr.t.Helper()
	b, err := os.ReadFile(cr.calls)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		cr.t.Fatal(err)
	}
	n := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "start" {
			n[f[1]] = append(n[f[1]], f[2])
		}
	}
	return n
}

// inputClient26 connects a 2026-07-28 client to endpoint (an /mcp URL)
// as agent-a, declaring elicitation, that hands input requests back to
// the caller (go-sdk's own retry loop off).
func inputClient26(t *testing.T, ctx context.Context, endpoint string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "mrtr-test", Version: "1"}, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token: "token-of-agent-a"}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connect to %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	return cs
}

// askApproval calls count__danger for id through cs and returns the
// retry that answers its approval question with approve.
func askApproval(t *testing.T, ctx context.Context, cs *mcp.ClientSession, id string, approve bool) *mcp.CallToolParams {
	t.Helper()
	args := map[string]any{"id": id}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count__danger", Arguments: args})
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 {
		t.Fatalf("count__danger %s: %+v, %v; want one input request, the approval", id, res, err)
	}
	retry := &mcp.CallToolParams{Name: "count__danger", Arguments: args, RequestState: res.RequestState, InputResponses: mcp.InputResponseMap{}}
	for key, ask := range res.InputRequests {
		if e, ok := ask.(*mcp.ElicitParams); !ok || !strings.HasPrefix(e.Message, "Approve") {
			t.Fatalf("count__danger %s: input request %+v, want the approval form", id, ask)
		}
		retry.InputResponses[key] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}
	}
	return retry
}

// jsonrpcCode returns err's JSON-RPC error code and message, or 0.
func jsonrpcCode(err error) (int64, string) {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code, je.Message
	}
	return 0, ""
}

// TestMCPProxyStateRequestStateOnce: two replicas (two proxy processes,
// one Redis, one request-state key) run an approved call once. Approved
// through A, the same retry through B is refused; asked through A and
// approved through B (which runs it: A does not hold it for B), the same
// retry through A, which still holds the call waiting for its approval,
// is refused too. With Redis down the retry fails closed, naming Redis,
// and runs nothing; with Redis back it runs. The upstream counts each
// call id it ran.
func TestMCPProxyStateRequestStateOnce(t *testing.T) {
	t.Parallel()
	cr := newCountingReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	a, b := cr.start("a"), cr.start("b")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("A's stderr:\n%s\nB's stderr:\n%s", a.stderr.String(), b.stderr.String())
		}
	})
	ca, cb := inputClient26(t, ctx, a.base+proxy.PathMCP), inputClient26(t, ctx, b.base+proxy.PathMCP)
	refused := func(what string, err error) {
		t.Helper()
		if code, msg := jsonrpcCode(err); code != jsonrpc.CodeInvalidParams || !strings.Contains(msg, "already used") {
			t.Errorf("%s: %v, want invalid params saying the requestState was already used", what, err)
		}
	}
	ran := func(cs *mcp.ClientSession, what string, p *mcp.CallToolParams) {
		t.Helper()
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "counted "+p.Arguments.(map[string]any)["id"].(string) {
			t.Fatalf("%s: %+v, %v; want the call run", what, res, err)
		}
	}

	yes := askApproval(t, ctx, ca, "d1", true)
	ran(ca, "d1 approved through A", yes)
	_, err := cb.CallTool(ctx, yes)
	refused("d1's approved retry again, through B", err)
	_, err = ca.CallTool(ctx, yes)
	refused("d1's approved retry again, through A", err)

	yes = askApproval(t, ctx, ca, "d2", true)
	ran(cb, "d2 asked through A, approved through B", yes)
	_, err = ca.CallTool(ctx, yes)
	refused("d2's approved retry again, through A (which holds the call)", err)

	yes = askApproval(t, ctx, ca, "d3", true)
	cr.redis.Stop()
	_, err = cb.CallTool(ctx, yes)
	if code, msg := jsonrpcCode(err); code != proxy.CodeSharedState || !strings.Contains(msg, "Redis at "+cr.redis.Addr()) {
		t.Errorf("d3 approved through B with Redis down: %v, want -32005 naming Redis at %s", err, cr.redis.Addr())
	}
	cr.redis.Start()
	ran(cb, "d3 approved through B with Redis back", yes)

	want := map[string]int{"d1": 1, "d2": 1, "d3": 1}
	if got := cr.ran(); len(got) != len(want) || got["d1"] != 1 || got["d2"] != 1 || got["d3"] != 1 {
		t.Errorf("the upstream ran %v, want each call once: %v", got, want)
	}
}
