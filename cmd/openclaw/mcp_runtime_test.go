package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/runtime"
)

// tinyServerSource is a Go stdio MCP server the test builds: echo (text),
// fail (isError) and point (structuredContent).
const tinyServerSource = `package main

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Message string ` + "`json:\"message\"`" + `
}

type point struct {
	X int ` + "`json:\"x\"`" + `
	Y int ` + "`json:\"y\"`" + `
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "tiny", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the message.\nSecond line."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "tiny says " + in.Message}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is on fire"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "point", Description: "A point."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, point, error) {
			return nil, point{X: 3, Y: 4}, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}
`

// runtimeCLI builds the openclaw binary and the tiny server once; each
// case gets its own OpenClaw home through newHome.
type runtimeCLI struct {
	bin, tiny string
}

func newRuntimeCLI(t *testing.T) *runtimeCLI {
	t.Helper()
	dir := t.TempDir()
	c := &runtimeCLI{bin: testBinary(t), tiny: filepath.Join(dir, "tiny")}
	src := filepath.Join(dir, "tiny.go")
	if err := os.WriteFile(src, []byte(tinyServerSource), 0o600); err != nil {
		t.Fatal(err)
	}
	// Built from the module's directory so that go-sdk resolves through
	// go.mod.
	if out, err := exec.Command("go", "build", "-o", c.tiny, src).CombinedOutput(); err != nil {
		t.Fatalf("go build tiny server: %v\n%s", err, out)
	}
	return c
}

// newHome returns a registryCLI whose openclaw.json holds servers (the
// mcp.servers object) and whose work folder holds files.
func (c *runtimeCLI) newHome(t *testing.T, servers map[string]any, files map[string]string) *registryCLI {
	t.Helper()
	dir := t.TempDir()
	r := &registryCLI{bin: c.bin, home: filepath.Join(dir, "home"), work: filepath.Join(dir, "work")}
	for _, d := range []string{filepath.Join(r.home, ".openclaw"), r.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(map[string]any{"mcp": map[string]any{"servers": servers}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.configPath(), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(r.work, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// everythingEntry returns the mcp.servers entry of server-everything over
// stdio, or "" when it is not installed (a failure in CI).
func everythingEntry(t *testing.T) map[string]any {
	t.Helper()
	script := filepath.Join(testkit.PeersDir(), testkit.ServerEverything)
	_, statErr := os.Stat(script)
	_, nodeErr := exec.LookPath("node")
	if statErr != nil || nodeErr != nil {
		if testkit.InCI() {
			testkit.Missing(t, "node and "+script)
		}
		return nil
	}
	return map[string]any{"command": "node", "args": []string{script, "stdio"}}
}

const (
	// sanitizerModule keeps catalogs named when a policy file replaces the
	// default modules.
	sanitizerModule = `{"name": "sanitizer", "source": "builtin:sanitizer"}`
	blockEchoPolicy = `{"modules": [` + sanitizerModule + `, {"name": "rules", "source": "builtin:rules", "config": {"default": "allow", "rules": [
		{"tool": "tiny__echo", "decision": "block", "reason": "echo is off limits"}]}}]}`
	approveEchoPolicy = `{"modules": [` + sanitizerModule + `, {"name": "rules", "source": "builtin:rules", "config": {"default": "allow", "rules": [
		{"tool": "tiny__echo", "decision": "require_approval", "reason": "echo needs a human", "title": "Echo?"}]}}]}`
	auditOnlyPolicy = `{"modules": [` + sanitizerModule + `, {"name": "rules", "source": "builtin:rules", "mode": "audit", "config": {"default": "block"}}]}`
	rulesOnlyPolicy = `{"modules": [{"name": "rules", "source": "builtin:rules"}]}`
)

// runtimeCase is one run of the binary and what the user must see.
type runtimeCase struct {
	name    string
	servers map[string]any    // mcp.servers
	tools   map[string]any    // the top-level tools object (profile, allow, deny, sandbox), if any
	files   map[string]string // files in the working folder
	args    []string
	code    int
	stdout  []string // substrings stdout must hold
	stderr  []string // substrings stderr must hold
	noOut   []string // substrings stdout must not hold
	noErr   []string // substrings stderr must not hold
	audit   []string // substrings the audit log must hold
}

func TestMCPToolsAndCall(t *testing.T) {
	t.Parallel()
	cli := newRuntimeCLI(t)
	tiny := map[string]any{"command": cli.tiny}
	broken := map[string]any{"command": "/nonexistent/openclaw-test-server"}
	blockedEnv := map[string]any{"command": cli.tiny, "env": map[string]string{"LD_PRELOAD": "/tmp/x.so"}}
	audit := []string{"--audit-log", os.DevNull}
	hostile, err := filepath.Abs(testdataWasm + "hostile.wasm")
	if err != nil {
		t.Fatal(err)
	}
	loudPolicy := `{"modules": [` + sanitizerModule + `, {"name": "loud", "source": ` + strconv.Quote(hostile) + `}]}`

	tests := []runtimeCase{
		{
			name:    "tools lists the catalog with first description lines",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "tools"},
			stdout:  []string{"TOOL", "tiny__echo", "tiny__fail", "tiny__point", "Echo the message."},
			noOut:   []string{"Second line."},
		},
		{
			name:    "a server that fails to start is a diagnostic, not a failure",
			servers: map[string]any{"broken": broken, "tiny": tiny},
			args:    []string{"mcp", "tools"},
			stdout:  []string{"tiny__echo"},
			stderr:  []string{`server "broken" failed`, "/nonexistent/openclaw-test-server"},
			noOut:   []string{"broken"},
		},
		{
			name:    "a blocked env key is named and the server is not started",
			servers: map[string]any{"risky": blockedEnv, "tiny": tiny},
			args:    []string{"mcp", "tools"},
			stdout:  []string{"tiny__echo"},
			stderr:  []string{`server "risky" failed`, "LD_PRELOAD"},
			noOut:   []string{"risky__"},
		},
		{
			name:    "only failing servers still give an (empty) catalog",
			servers: map[string]any{"broken": broken},
			args:    []string{"mcp", "tools"},
			stdout:  []string{"No MCP tools."},
			stderr:  []string{`server "broken" failed`},
		},
		{
			name:    "--server starts only that server",
			servers: map[string]any{"broken": broken, "tiny": tiny},
			args:    []string{"mcp", "tools", "--server", "tiny"},
			stdout:  []string{"tiny__echo"},
			noOut:   []string{"broken"},
			noErr:   []string{"broken"},
		},
		{
			name:    "--upstream-protocol pins the revision offered",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "tools", "--upstream-protocol", "2025-06-18"},
			stdout:  []string{"tiny__echo"},
		},
		{
			name:    "--upstream-protocol refuses what is not a revision",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__echo", "--upstream-protocol", "2025-13-01"},
			code:    2,
			stderr:  []string{`--upstream-protocol "2025-13-01" is not an MCP revision`, "2026-07-28"},
		},
		{
			name:    "an entry's protocolVersion that is not a revision is that server's diagnostic",
			servers: map[string]any{"tiny": tiny, "odd": map[string]any{"command": cli.tiny, "protocolVersion": "latest"}},
			args:    []string{"mcp", "tools"},
			stdout:  []string{"tiny__echo"},
			stderr:  []string{`server "odd" failed`, `mcp.servers.odd.protocolVersion: "latest" is not an MCP revision`},
			noOut:   []string{"odd__"},
		},
		{
			name:    "--server with an unknown name",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "tools", "--server", "nope"},
			code:    1,
			stderr:  []string{`No usable MCP server named "nope"`},
		},
		{
			name:    "a policy file with no naming module keeps OpenClaw's names",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"policy.json": rulesOnlyPolicy},
			args:    []string{"mcp", "tools", "-v", "--policy-config", "policy.json"},
			stdout:  []string{"tiny__echo"},
			stderr:  []string{"policy active: sanitizer (builtin:sanitizer", "OpenClaw's tool names"},
		},
		{
			name:    "a module's log line shows with -v, attributed to it",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"policy.json": loudPolicy},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"hostile_log"}`, "--policy-config", "policy.json", "-v"},
			stdout:  []string{"hostile_log"},
			stderr:  []string{`level=INFO msg="hello from the guest" module=loud`},
		},
		{
			name:    "without -v a module's info line is not shown",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"policy.json": loudPolicy},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"hostile_log"}`, "--policy-config", "policy.json"},
			stdout:  []string{"hostile_log"},
			noErr:   []string{"hello from the guest"},
		},
		{
			name:    "call prints the text content",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"hello"}`},
			stdout:  []string{"tiny says hello"},
		},
		{
			name:    "call reads arguments from @file",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"args.json": `{"message":"from a file"}`},
			args:    []string{"mcp", "call", "tiny__echo", "--args", "@args.json"},
			stdout:  []string{"tiny says from a file"},
		},
		{
			name:    "call with arguments that are not an object",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `[1]`},
			code:    1,
			stderr:  []string{"--args: want a JSON object"},
		},
		{
			name:    "call --json prints structuredContent",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__point", "--json"},
			stdout:  []string{"{\n  \"x\": 3,\n  \"y\": 4\n}"},
		},
		{
			name:    "an isError result exits 1 with its text on stderr",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__fail"},
			code:    1,
			stderr:  []string{"the disk is on fire"},
			noOut:   []string{"the disk is on fire"},
		},
		{
			name:    "an unknown tool",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__nope"},
			code:    1,
			stderr:  []string{`unknown tool "tiny__nope"`},
		},
		{
			name:    "a call blocked by the rules module prints its reason",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"policy.json": blockEchoPolicy},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"x"}`, "--policy-config", "policy.json"},
			code:    1,
			stderr:  []string{`blocked by policy "rules": echo is off limits`},
			noOut:   []string{"tiny says"},
		},
		{
			name:    "a bad rate limit refuses the policy file (fail closed)",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"policy.json": `{"modules": [], "rate_limits": [{"name": "burst", "requests": 5}]}`},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"x"}`, "--policy-config", "policy.json"},
			code:    1,
			stderr:  []string{"rate_limits[0] (burst): requests needs interval_s"},
			noOut:   []string{"tiny says"},
		},
		{
			name:    "an audit-only policy warns that nothing is enforced, and does not block",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"policy.json": auditOnlyPolicy},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"x"}`, "--policy-config", "policy.json"},
			stdout:  []string{"tiny says x"},
			stderr:  []string{"WARNING: no module enforces before_tool_call"},
		},
		{
			name:    "the default modules enforce before_tool_call",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"x"}`},
			stdout:  []string{"tiny says x"},
			noErr:   []string{"WARNING"},
		},
		{
			name:    "arguments given as a second word point at --args",
			servers: map[string]any{"tiny": tiny},
			args:    []string{"mcp", "call", "tiny__echo", `{"message":"it's"}`},
			code:    1,
			stderr:  []string{`openclaw mcp call: the tool's arguments go in --args: openclaw mcp call tiny__echo --args '{"message":"it'\''s"}'`},
			noOut:   []string{"tiny says"},
		},
		{
			name:    "require_approval without a terminal is refused",
			servers: map[string]any{"tiny": tiny},
			files:   map[string]string{"policy.json": approveEchoPolicy},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"x"}`, "--policy-config", "policy.json"},
			code:    1,
			stderr:  []string{"tiny__echo: approval denied by the approver: module", "stdin is not a terminal", "echo needs a human"},
			noOut:   []string{"tiny says"},
			audit: []string{`"hook":"before_tool_call","surface":"embedded","caller":"openclaw-go-cli","tool":"tiny__echo","server":"tiny","module":"rules","module_sha256":"`,
				`","mode":"enforce","decision":"require_approval"`,
				`"hook":"decide_approval","surface":"embedded","caller":"openclaw-go-cli","tool":"tiny__echo","server":"tiny","module":"approve:nobody","mode":"enforce","decision":"deny","reason":"module \"rules\" asks for approval (echo needs a human), and stdin is not a terminal`},
		},
		{
			name:    "a call to a server that failed",
			servers: map[string]any{"broken": broken, "tiny": tiny},
			args:    []string{"mcp", "call", "broken__echo"},
			code:    1,
			stderr:  []string{`unknown tool "broken__echo"`, `server "broken" failed`},
		},
		{
			name:    "tools.deny hides a tool from the catalog",
			servers: map[string]any{"tiny": tiny},
			tools:   map[string]any{"deny": []string{"tiny__f*"}},
			args:    []string{"mcp", "tools"},
			stdout:  []string{"tiny__echo", "tiny__point"},
			noOut:   []string{"tiny__fail"},
		},
		{
			name:    "a hidden tool cannot be called and the rule is named",
			servers: map[string]any{"tiny": tiny},
			tools:   map[string]any{"deny": []string{"tiny__echo"}},
			args:    []string{"mcp", "call", "tiny__echo", "--args", `{"message":"hello"}`},
			code:    1,
			stderr:  []string{`unknown tool "tiny__echo"`, `tools.deny entry "tiny__echo"`},
			noOut:   []string{"tiny says"},
		},
		{
			name:    "the minimal profile hides every MCP tool",
			servers: map[string]any{"tiny": tiny},
			tools:   map[string]any{"profile": "minimal"},
			args:    []string{"mcp", "tools"},
			stdout:  []string{"No MCP tools."},
		},
		{
			name:    "a typo in the tool policy is an error naming the key",
			servers: map[string]any{"tiny": tiny},
			tools:   map[string]any{"profile": "minimul"},
			args:    []string{"mcp", "tools"},
			code:    1,
			stderr:  []string{"tools.profile", "minimul"},
		},
	}
	if ev := everythingEntry(t); ev != nil {
		tests = append(tests,
			runtimeCase{
				name:    "server-everything tools",
				servers: map[string]any{"everything": ev, "tiny": tiny},
				args:    []string{"mcp", "tools", "--json"},
				stdout:  []string{`"name": "everything__echo"`, `"tool": "echo"`, `"server": "everything"`, `"name": "tiny__echo"`},
			},
			runtimeCase{
				name:    "utility tools are said to be what the proxy does not list",
				servers: map[string]any{"everything": ev},
				args:    []string{"mcp", "tools"},
				stdout:  []string{"everything__resources_read", "4 of these are utility tools (UPSTREAM resources_list, resources_read, prompts_list, prompts_get)", "openclaw mcp proxy serves resources and prompts themselves instead and does not list them"},
			},
			runtimeCase{
				name:    "server-everything echo",
				servers: map[string]any{"everything": ev},
				args:    []string{"mcp", "call", "everything__echo", "--args", `{"message":"hi from go"}`},
				stdout:  []string{"Echo: hi from go"},
			})
	} else {
		t.Log("server-everything or node not installed (make peers, or set PEERS_DIR): its cases are skipped")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := cli.newHome(t, tc.servers, tc.files)
			if tc.tools != nil {
				b, err := json.Marshal(map[string]any{"mcp": map[string]any{"servers": tc.servers}, "tools": tc.tools})
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(r.configPath(), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			args := append(tc.args, audit...)
			auditLog := filepath.Join(r.work, "audit.jsonl")
			if tc.audit != nil {
				args = append(tc.args, "--audit-log", auditLog)
			}
			stdout, stderr, code := r.run(t, args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.noOut {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout holds %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			for _, s := range tc.noErr {
				if strings.Contains(stderr, s) {
					t.Errorf("stderr holds %q:\n%s", s, stderr)
				}
			}
			if tc.audit != nil {
				log, err := os.ReadFile(auditLog)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range tc.audit {
					if !strings.Contains(string(log), s) {
						t.Errorf("audit log lacks %q:\n%s", s, log)
					}
				}
			}
		})
	}
}

// TestMCPToolsJSONShape checks the --json array field by field: it is the
// stable interface scripts read.
func TestMCPToolsJSONShape(t *testing.T) {
	t.Parallel()
	cli := newRuntimeCLI(t)
	r := cli.newHome(t, map[string]any{"tiny": map[string]any{"command": cli.tiny}}, nil)
	stdout, stderr, code := r.run(t, "mcp", "tools", "--json", "--audit-log", os.DevNull)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, stdout)
	}
	var names []string
	for _, e := range got {
		names = append(names, e["name"].(string))
		for _, k := range []string{"name", "server", "tool", "description", "inputSchema"} {
			if _, ok := e[k]; !ok {
				t.Errorf("entry %v lacks %q", e["name"], k)
			}
		}
	}
	if want := "tiny__echo,tiny__fail,tiny__point"; strings.Join(names, ",") != want {
		t.Errorf("names %v, want %s", names, want)
	}
	if got[0]["description"] != "Echo the message.\nSecond line." || got[0]["tool"] != "echo" || got[0]["server"] != "tiny" {
		t.Errorf("first entry %v", got[0])
	}
}

// TestReadCallArgs covers the --args forms.
func TestReadCallArgs(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "a.json")
	if err := os.WriteFile(file, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in, want, err string
	}{
		{in: "", want: "{}"},
		{in: "  ", want: "{}"},
		{in: `{"m":"x"}`, want: `{"m":"x"}`},
		{in: "@" + file, want: `{"a":1}`},
		{in: "@/nonexistent/args.json", err: "no such file"},
		{in: "null", err: "want a JSON object"},
		{in: `"s"`, err: "want a JSON object"},
		{in: `{`, err: "want a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := readCallArgs(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("readCallArgs(%q) = %s, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("readCallArgs(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestTerminalApproval answers the prompt through a pipe: what a user types
// on the terminal decides, and an expired deadline refuses.
func TestTerminalApproval(t *testing.T) {
	t.Parallel()
	req := &runtime.ApprovalRequest{
		Tool:   runtime.Tool{Name: "tiny__echo"},
		Module: "rules", Reason: "echo needs a human", Arguments: json.RawMessage(`{"message":"x"}`),
	}
	tests := []struct {
		name, typed string
		approved    bool
		err         string
	}{
		{name: "yes", typed: "y\n", approved: true},
		{name: "YES", typed: " YES \n", approved: true},
		{name: "no", typed: "n\n", err: "refused on the terminal"},
		{name: "empty line", typed: "\n", err: "refused on the terminal"},
		{name: "end of input", typed: "", err: "refused on the terminal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var prompt strings.Builder
			ok, err := terminalApproval(strings.NewReader(tc.typed), &prompt)(context.Background(), req)
			if ok != tc.approved || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("got %v, %v; want %v, %q", ok, err, tc.approved, tc.err)
			}
			for _, s := range []string{"Run tool tiny__echo", `module "rules": echo needs a human`, `{"message":"x"}`, "Approve? [y/N]"} {
				if !strings.Contains(prompt.String(), s) {
					t.Errorf("prompt lacks %q:\n%s", s, prompt.String())
				}
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		pr, pw := io.Pipe()
		defer pw.Close() // ends the reading goroutine
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ok, err := terminalApproval(pr, io.Discard)(ctx, req)
		if ok || err == nil || !strings.Contains(err.Error(), "no answer in time") {
			t.Fatalf("got %v, %v; want a refusal for no answer", ok, err)
		}
	})
}

// TestMCPDoctorProbe: doctor connects only with --probe; a server that
// starts but speaks no MCP is an error, a working one an info line.
func TestMCPDoctorProbe(t *testing.T) {
	t.Parallel()
	cli := newRuntimeCLI(t)
	servers := map[string]any{
		"mute": map[string]any{"command": "true"}, // exits at once: no MCP server
		"tiny": map[string]any{"command": cli.tiny},
	}
	r := cli.newHome(t, servers, nil)
	stdout, stderr, code := r.run(t, "mcp", "doctor", "--json")
	if code != 0 || strings.Contains(stdout, "probe") {
		t.Fatalf("doctor without --probe: exit %d, want 0 and no probe\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = r.run(t, "mcp", "doctor", "--probe", "--json")
	if code != 1 {
		t.Fatalf("doctor --probe: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var got struct {
		OK      bool `json:"ok"`
		Servers []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Issues []struct{ Level, Message string }
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("doctor --probe --json: %v\n%s", err, stdout)
	}
	want := map[string]struct {
		ok           bool
		level, start string
	}{"mute": {false, "error", "probe failed: "}, "tiny": {true, "info", "probe: 3 tools"}}
	if got.OK || len(got.Servers) != 2 {
		t.Fatalf("doctor --probe: ok=%v with %d servers, want false with 2\n%s", got.OK, len(got.Servers), stdout)
	}
	for _, s := range got.Servers {
		w := want[s.Name]
		n := len(s.Issues)
		if s.OK != w.ok || n == 0 || s.Issues[n-1].Level != w.level || !strings.HasPrefix(s.Issues[n-1].Message, w.start) {
			t.Errorf("server %q: ok=%v issues=%+v; want ok=%v and a last %s issue starting %q", s.Name, s.OK, s.Issues, w.ok, w.level, w.start)
		}
	}
}
