// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) through
// `openclaw mcp proxy`: the suite's tasks-* scenarios against
// testdata/tasksserver directly and through the proxy, and the proxy's own
// rules for tasks (the policy sees a task-augmented call, a task belongs to
// the identity that created it).

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/policies/ratelimit"
	"github.com/openclaw-go/openclaw/runtime"
)

// buildTasksServer builds testdata/tasksserver, the fixture with the tools
// of the suite's tasks-* scenarios.
func buildTasksServer(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tasksserver")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./testdata/tasksserver").CombinedOutput(); err != nil {
		t.Fatalf("go build tasksserver: %v\n%s", err, out)
	}
	return bin
}

// TestServerConformanceNextTasks runs the 2026-07-28 requirements against
// testdata/tasksserver (stateless streamable HTTP) directly and through the
// proxy (stdio to the fixture, on 2026-07-28), and requires every check of
// the tasks-* scenarios to pass in both (tasks-status-notifications is
// skipped by the suite itself). The fixture has no other scenario's tools:
// those are scored against go-sdk's everything-server
// (TestServerConformanceNext).
func TestServerConformanceNextTasks(t *testing.T) {
	peers := findServerPeers(t)
	peers.suite = testkit.ConformanceNextArgs(t)
	peers.selection = []string{"--requirements", "2026-07-28"}
	peers.fixture = []string{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	peers.everything = buildTasksServer(ctx, t)

	direct := runDirect(ctx, t, peers)
	bin, _ := buildServerProxy(ctx, t)
	proxied := runProxied(ctx, t, peers, bin, "--upstream-protocol", "2026-07-28")
	tasksOnly := func(r serverResults) serverResults {
		out := serverResults{}
		for k, v := range r {
			if lacks(k) {
				out[k] = v
			}
		}
		return out
	}
	direct, proxied = tasksOnly(direct), tasksOnly(proxied)
	compareServerRuns(t, "proxy-tasks", direct, proxied, nil)
	for name, run := range map[string]serverResults{"direct": direct, "proxy": proxied} {
		passed, failed := 0, []string{}
		for _, k := range run.keys() {
			switch run[k].Status {
			case "SUCCESS":
				passed++
			case "INFO", "SKIPPED":
			default:
				failed = append(failed, k+": "+run[k].Status+": "+run[k].ErrorMessage)
			}
		}
		// 44 checks of 9 scenarios pass (docs/conformance.md); far fewer
		// means the suite or the fixture changed under us.
		if passed < 40 {
			t.Errorf("%s: %d tasks-* checks pass, want at least 40", name, passed)
		}
		if len(failed) > 0 {
			t.Errorf("%s: %d tasks-* checks fail:\n  %s", name, len(failed), strings.Join(failed, "\n  "))
		}
	}
	t.Logf("conformance suite %s, server mode, --requirements 2026-07-28, tasks-* against testdata/tasksserver:\n%s",
		testkit.ConformanceNext, serverTable(direct.keys(), []string{"direct", "proxy"}, direct, proxied))
}

// taskClient makes 2026-07-28 requests to a proxy by hand (go-sdk's client
// has no tasks), with a bearer token, declaring the tasks extension.
type taskClient struct {
	t     *testing.T
	url   string
	token string
	tasks bool // declare the extension
}

// rpcAnswer is a JSON-RPC answer: a result or an error.
type rpcAnswer struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends method with params (name is the Mcp-Name header, "" for none)
// and returns the answer.
func (c taskClient) call(method, name string, params map[string]any) rpcAnswer {
	c.t.Helper()
	caps := map[string]any{}
	if c.tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{mcp.MetaKeyProtocolVersion: "2026-07-28", mcp.MetaKeyClientCapabilities: caps,
		mcp.MetaKeyClientInfo: map[string]any{"name": "task-client", "version": "1"}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans rpcAnswer
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id":1`) {
				if err := json.Unmarshal([]byte(data), &ans); err != nil {
					c.t.Fatalf("%s: %v: %s", method, err, data)
				}
				return ans
			}
		}
		c.t.Fatalf("%s: HTTP %d: no answer in the event stream", method, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		c.t.Fatalf("%s: HTTP %d: %v", method, resp.StatusCode, err)
	}
	return ans
}

// TestServerProxyTasks: through the proxy (two tokens-file identities,
// builtin:rules blocking slow_compute with the label "blocked"), a
// task-augmented tools/call passes before_tool_call like any call (the
// blocked one is a tool error and creates no task), and a task is reached
// only by the identity that created it: another's tasks/get and
// tasks/cancel are answered as for an unknown task (-32602) and leave it
// running, a forged taskId too, and a client that does not declare the
// extension is refused the tasks methods (-32021).
func TestServerProxyTasks(t *testing.T) {
	peers := findServerPeers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	peers.everything = buildTasksServer(ctx, t)
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, []byte(`{"tokens":[{"name":"alice","token":"alice-token"},{"name":"bob","token":"bob-token"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	peers.auth = []string{"--tokens-file", tokens}
	peers.rules = map[string]any{"default": "allow", "rules": []any{map[string]any{
		"tool": "slow_compute", "args": map[string]any{"label": map[string]any{"glob": "blocked"}},
		"decision": "block", "reason": "no blocked computations"}}}
	bin, _ := buildServerProxy(ctx, t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	base, logs := startProxied(ctx, t, peers, bin, "--upstream-protocol", "2026-07-28", "--audit-log", audit)
	defer func() {
		if t.Failed() {
			t.Logf("proxy output:\n%s", logs.String())
		}
	}()
	alice := taskClient{t: t, url: base + "/mcp", token: "alice-token", tasks: true}
	bob := taskClient{t: t, url: base + "/mcp", token: "bob-token", tasks: true}

	blocked := alice.call("tools/call", "slow_compute", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60, "label": "blocked"}})
	if blocked.Error != nil || blocked.Result["resultType"] == "task" || blocked.Result["taskId"] != nil || blocked.Result["isError"] != true ||
		!strings.Contains(mustJSON(blocked.Result["content"]), "no blocked computations") {
		t.Fatalf("the blocked task-augmented call = %+v, want the policy's tool error and no task", blocked)
	}

	created := alice.call("tools/call", "slow_compute", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60, "label": "allowed"}})
	id, _ := created.Result["taskId"].(string)
	if created.Error != nil || created.Result["resultType"] != "task" || id == "" {
		t.Fatalf("the allowed task-augmented call = %+v, want a CreateTaskResult", created)
	}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		if got := bob.call(method, id, map[string]any{"taskId": id}); got.Error == nil || got.Error.Code != -32602 {
			t.Errorf("bob's %s of alice's task = %+v, want -32602 (unknown task)", method, got)
		}
	}
	if got := alice.call("tasks/get", id, map[string]any{"taskId": id}); got.Error != nil || got.Result["taskId"] != id || got.Result["status"] != "working" {
		t.Errorf("alice's tasks/get after bob's tries = %+v, want her task, still working", got)
	}
	if got := alice.call("tasks/get", "task-1", map[string]any{"taskId": "task-1"}); got.Error == nil || got.Error.Code != -32602 {
		t.Errorf("tasks/get of the server's own taskId = %+v, want -32602 (not a taskId the proxy issued)", got)
	}
	undeclared := taskClient{t: t, url: base + "/mcp", token: "alice-token"}
	if got := undeclared.call("tasks/get", id, map[string]any{"taskId": id}); got.Error == nil || got.Error.Code != mcp.CodeMissingRequiredClientCapabilities {
		t.Errorf("tasks/get without the extension = %+v, want -32021", got)
	}
	if got := alice.call("tasks/cancel", id, map[string]any{"taskId": id}); got.Error != nil || got.Result["resultType"] != "complete" {
		t.Errorf("alice's tasks/cancel = %+v, want the empty ack", got)
	}
	if got := alice.call("tasks/get", id, map[string]any{"taskId": id}); got.Error != nil || got.Result["status"] != "cancelled" {
		t.Errorf("alice's tasks/get after her cancel = %+v, want cancelled", got)
	}

	// Every tasks method that reached the relay is audited: who, which
	// method, which server and the server's taskId (what the sealed id
	// holds), allowed; another's or a forged taskId is a block naming no
	// task.
	payload, _, _ := strings.Cut(id, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	var ref struct{ S, T string }
	if err := json.Unmarshal(raw, &ref); err != nil || ref.S == "" || ref.T == "" {
		t.Fatalf("the taskId's payload %s (%v), want the server and its taskId", raw, err)
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct{ Hook, Subject, Method, Server, Task, Module, Decision, Reason string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Hook == "tasks" {
			got = append(got, strings.Join([]string{rec.Subject, rec.Method, rec.Server, rec.Task, rec.Module, rec.Decision, rec.Reason}, " "))
		}
	}
	want := []string{
		"bob tasks/get   host:tasks block unknown task",
		"bob tasks/cancel   host:tasks block unknown task",
		"alice tasks/get " + ref.S + " " + ref.T + " host:tasks allow ",
		"alice tasks/get   host:tasks block unknown task",
		"alice tasks/cancel " + ref.S + " " + ref.T + " host:tasks allow ",
		"alice tasks/get " + ref.S + " " + ref.T + " host:tasks allow ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tasks audit records (subject method server task module decision reason):\n%s\nwant:\n%s\nlog:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), b)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRuntimeTasks: the runtime, on 2026-07-28, in front of
// testdata/tasksserver over stdio and over streamable HTTP, hands a call
// whose client capabilities declare the tasks extension the server's
// CreateTaskResult (runtime.TaskCreated: go-sdk's CallToolResult cannot hold
// it), relays tasks/get to the server that owns the task, and gives a call
// without the declaration the synchronous result.
func TestRuntimeTasks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fixture := buildTasksServer(ctx, t)
	addr := fmt.Sprintf("127.0.0.1:%d", freeServerPort(t))
	if _, _, err := startServerProcess(t, exec.CommandContext(ctx, fixture, "-http", addr), accepting(addr)); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, entry := range map[string]config.ServerEntry{
		"stdio": {Command: fixture},
		"http":  {URL: "http://" + addr + "/mcp", Transport: "streamable-http"},
	} {
		t.Run(name, func(t *testing.T) {
			eng, err := engine.Load(ctx, &engine.Options{DefaultModules: []string{"builtin:rules", "builtin:sanitizer"},
				AuditLog: filepath.Join(t.TempDir(), "audit.jsonl"), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close(context.Background())
			sess, err := runtime.New([]runtime.Server{{Name: "tasks", Entry: entry}},
				&runtime.Options{Enforcer: eng, Sanitizer: eng, Logger: quiet, ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close(context.Background())
			if err := sess.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			if sess.Capabilities().Extensions[runtime.TasksExtension] == nil {
				t.Errorf("capabilities %+v, want the tasks extension the server offers", sess.Capabilities())
			}
			args := []byte(`{"seconds":0.2,"label":"rt"}`)
			declared := runtime.WithClientCapabilities(ctx, &mcp.ClientCapabilities{Extensions: map[string]any{runtime.TasksExtension: map[string]any{}}})
			res, err := sess.CallTool(declared, "tasks__slow_compute", args)
			if err != nil {
				t.Fatal(err)
			}
			task, ok := runtime.TaskCreated(res)
			if !ok || task.Server != "tasks" {
				t.Fatalf("call with the extension = %+v, want a CreatedTask of server tasks", res)
			}
			var created struct{ ResultType, TaskID, Status string }
			if err := json.Unmarshal(task.Result, &created); err != nil || created.ResultType != "task" || created.TaskID == "" {
				t.Fatalf("CreateTaskResult %s (%v), want resultType task and a taskId", task.Result, err)
			}
			id, _ := json.Marshal(created.TaskID)
			got, err := sess.TaskRequest(declared, task.Server, "tasks/get", &runtime.TaskParams{Fields: map[string]json.RawMessage{"taskId": id}})
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Fields["taskId"]) != string(id) || got.Fields["status"] == nil {
				t.Errorf("tasks/get = %v, want the task's status", got.Fields)
			}
			sync, err := sess.CallTool(runtime.WithClientCapabilities(ctx, &mcp.ClientCapabilities{}), "tasks__slow_compute", args)
			if _, isTask := runtime.TaskCreated(sync); err != nil || isTask || len(sync.Content) == 0 {
				t.Errorf("call without the extension = %+v, %v; want the synchronous result", sync, err)
			}
		})
	}
}

// TestRuntimeTaskHoldsLimiterSlot: with a limit of one concurrent call,
// a task-augmented call's slot stays taken while its task runs (a second
// call is refused with the limit's error, though the first tools/call has
// returned its CreateTaskResult), and is given back when the task ends: by
// tasks/cancel, and by a tasks/get that reads a terminal status.
func TestRuntimeTaskHoldsLimiterSlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fixture := buildTasksServer(ctx, t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Load(ctx, &engine.Options{DefaultModules: []string{"builtin:rules", "builtin:sanitizer"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	limiter, err := ratelimit.New([]config.PolicyRateLimit{{Name: "one-at-a-time", Tool: "tasks__slow_compute", Concurrent: 1}}, ratelimit.NewMemoryStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := runtime.New([]runtime.Server{{Name: "tasks", Entry: config.ServerEntry{Command: fixture}}},
		&runtime.Options{Enforcer: eng, Sanitizer: eng, Limiter: limiter, Logger: quiet, ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	if err := sess.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	declared := runtime.WithClientCapabilities(ctx, &mcp.ClientCapabilities{Extensions: map[string]any{runtime.TasksExtension: map[string]any{}}})
	start := func(seconds float64) json.RawMessage {
		t.Helper()
		res, err := sess.CallTool(declared, "tasks__slow_compute", []byte(fmt.Sprintf(`{"seconds":%g,"label":"slot"}`, seconds)))
		if err != nil {
			t.Fatalf("a call while no task runs: %v", err)
		}
		task, ok := runtime.TaskCreated(res)
		if !ok {
			t.Fatalf("call = %+v, want a task", res)
		}
		var created struct{ TaskID string }
		_ = json.Unmarshal(task.Result, &created)
		id, _ := json.Marshal(created.TaskID)
		return id
	}
	refused := func(when string) {
		t.Helper()
		_, err := sess.CallTool(declared, "tasks__slow_compute", []byte(`{"seconds":60,"label":"second"}`))
		var le *policies.LimitError
		if !errors.As(err, &le) || le.Limit != "one-at-a-time" {
			t.Fatalf("a second call %s = %v, want the limit's refusal", when, err)
		}
	}
	taskRequest := func(method string, id json.RawMessage) string {
		t.Helper()
		res, err := sess.TaskRequest(declared, "tasks", method, &runtime.TaskParams{Fields: map[string]json.RawMessage{"taskId": id}})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var status string
		_ = json.Unmarshal(res.Fields["status"], &status)
		return status
	}

	first := start(60)
	refused("while the first task works")
	taskRequest("tasks/cancel", first)
	second := start(0.05)
	refused("while the second task works")
	for taskRequest("tasks/get", second) != "completed" {
		select {
		case <-ctx.Done():
			t.Fatal("the second task never completed")
		case <-time.After(20 * time.Millisecond):
		}
	}
	taskRequest("tasks/cancel", start(60)) // admitted: the completed task gave its slot back
}
