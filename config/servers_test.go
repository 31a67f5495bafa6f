package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func mustObject(t *testing.T, s string) *Object {
	t.Helper()
	v, err := ParseOrdered([]byte(s))
	if err != nil {
		t.Fatalf("parse %s: %v", s, err)
	}
	o, ok := v.(*Object)
	if !ok {
		t.Fatalf("%s is not an object", s)
	}
	return o
}

func TestRoundTripKeepsUnknownKeysAndOrder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "openclaw.json")
	in := `// hand-written, JSON5
{
  zeta: {keep: [1, 2.5, 'x']},
  gateway: {port: 19000, auth: {token: "t"},},
  mcp: {
    sessionIdleTtlMs: 0,
    servers: {
      b: {command: "node", custom: {deep: true}},
      a: {url: "https://a.example/mcp"},
    },
    other: "kept",
  },
  alpha: null,
}`
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := LoadDocument(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.SetServer("c", mustObject(t, `{"command":"uvx","type":"stdio"}`)); err != nil {
		t.Fatal(err)
	}
	if err := doc.SetServer("b", mustObject(t, `{"command":"deno"}`)); err != nil {
		t.Fatal(err)
	}
	if err := doc.Save(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "zeta": {
    "keep": [
      1,
      2.5,
      "x"
    ]
  },
  "gateway": {
    "port": 19000,
    "auth": {
      "token": "t"
    }
  },
  "mcp": {
    "sessionIdleTtlMs": 0,
    "servers": {
      "b": {
        "command": "deno"
      },
      "a": {
        "url": "https://a.example/mcp"
      },
      "c": {
        "command": "uvx"
      }
    },
    "other": "kept"
  },
  "alpha": null
}
`
	if string(got) != want {
		t.Fatalf("written:\n%s\nwant:\n%s", got, want)
	}
	// The file we write is read back by both readers, unchanged.
	if _, err := Load(path); err != nil {
		t.Fatalf("config.Load of our output: %v", err)
	}
	doc2, err := LoadDocument(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(MarshalIndent(doc2.Root))+"\n" != want {
		t.Fatal("second read differs")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
}

func TestSaveRotatesBackups(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".openclaw")
	path := filepath.Join(dir, "openclaw.json")
	var versions []string // versions[i] is the file after write i
	for i := range 8 {
		doc, err := LoadDocument(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := doc.SetServer(fmt.Sprintf("s%d", i), mustObject(t, `{"command":"x"}`)); err != nil {
			t.Fatal(err)
		}
		if err := doc.Save(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, string(b))
	}
	last := len(versions) - 1
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for i := range Backups {
		if got, want := read(BackupPath(path, i)), versions[last-1-i]; got != want {
			t.Fatalf("%s holds\n%s\nwant the version before it:\n%s", BackupPath(path, i), got, want)
		}
	}
	if _, err := os.Stat(BackupPath(path, Backups)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists: only %d backups are kept", BackupPath(path, Backups), Backups)
	}
	if got := read(path + ".last-good"); got != versions[last] {
		t.Fatalf("last-good is not the last written config:\n%s", got)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{"openclaw.json", "openclaw.json.bak", "openclaw.json.bak.1", "openclaw.json.bak.2",
		"openclaw.json.bak.3", "openclaw.json.bak.4", "openclaw.json.last-good"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("folder holds %q, want %q (no temporary files left)", names, want)
	}
}

func TestLoadDocumentErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct{ name, content, want string }{
		{"syntax", `{mcp: `, "not valid JSON5: line 1"},
		{"array top", `[1]`, "top level is not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(dir, tt.name+".json")
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDocument(p)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("LoadDocument = %v, want ErrInvalidConfig naming %s and %q", err, p, tt.want)
			}
		})
	}
	doc, err := LoadDocument(filepath.Join(dir, "missing.json"))
	if err != nil || doc.Servers().Len() != 0 {
		t.Fatalf("missing file: %v", err)
	}
}

func TestNormalizeServer(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"url":"u","type":"http","headers":{"A":"b"}}`, `{"url":"u","headers":{"A":"b"},"transport":"streamable-http"}`},
		{`{"url":"u","type":"Streamable-HTTP"}`, `{"url":"u","transport":"streamable-http"}`},
		{`{"url":"u","type":"SSE"}`, `{"url":"u","transport":"sse"}`},
		{`{"command":"c","type":"stdio"}`, `{"command":"c"}`},
		{`{"url":"u","type":"http","transport":"sse"}`, `{"url":"u","transport":"sse"}`},
		{`{"transport":1,"url":"u","type":"http"}`, `{"transport":"streamable-http","url":"u"}`},
		{`{"url":"u","type":"websocket"}`, `{"url":"u","type":"websocket"}`},
		{`{"command":"c","workingDirectory":"/w","env":{}}`, `{"command":"c","env":{},"cwd":"/w"}`},
		{`{"cwd":"/keep","workingDirectory":"/w"}`, `{"cwd":"/keep"}`},
		{`{"supports_parallel_tool_calls":true,"ssl_verify":false,"client_cert":"c","client_key":"k"}`,
			`{"supportsParallelToolCalls":true,"sslVerify":false,"clientCert":"c","clientKey":"k"}`},
		{`{"sslVerify":true,"ssl_verify":false}`, `{"sslVerify":true}`},
		{`{"codex":{"default_tools_approval_mode":"auto"}}`, `{"codex":{"defaultToolsApprovalMode":"auto"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			o := mustObject(t, tt.in)
			NormalizeServer(o)
			if got := string(MarshalCompact(o)); got != tt.want {
				t.Fatalf("NormalizeServer(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestSetServerValidation(t *testing.T) {
	t.Parallel()
	tests := []struct{ entry, want string }{
		{`{"transport":"stdio"}`, `mcp.servers.x.transport: "stdio" transport requires a non-empty command`},
		{`{"transport":"stdio","command":"  "}`, `mcp.servers.x.transport: "stdio" transport requires a non-empty command`},
		{`{"command":"x","disabled":true}`, `mcp.servers.x.disabled: unsupported key "disabled"; use "enabled": false instead`},
		{`{"command":"x","disabled":false}`, `mcp.servers.x.disabled: unsupported key "disabled"; use "enabled": true instead`},
		{`{"command":"x","disabled":"yes"}`, `mcp.servers.x.disabled: unsupported key "disabled"; use "enabled" instead`},
		{`{"command":"x","connectTimeout":5}`, `mcp.servers.x.connectTimeout: Unrecognized key: "connectTimeout"`},
		{`{"command":"x","connect_timeout":5}`, `mcp.servers.x.connect_timeout: Unrecognized key: "connect_timeout"`},
		{`{"command":"x","timeout":5}`, `mcp.servers.x.timeout: Unrecognized key: "timeout"`},
		{`{"enabled":"yes"}`, `mcp.servers.x.enabled: Invalid input: expected boolean, received string`},
		{`{"command":7}`, `mcp.servers.x.command: Invalid input: expected string, received number`},
		{`{"command":"x","args":"a b"}`, `mcp.servers.x.args: Invalid input: expected array, received string`},
		{`{"command":"x","args":["a",1]}`, `mcp.servers.x.args.1: Invalid input: expected string, received number`},
		{`{"command":"x","env":{"A":{}}}`, `mcp.servers.x.env.A: Invalid input: expected string, number or boolean, received object`},
		{`{"command":"x","env":[]}`, `mcp.servers.x.env: Invalid input: expected record, received array`},
		{`{"command":"x","cwd":null}`, `mcp.servers.x.cwd: Invalid input: expected string, received null`},
		{`{"url":"ftp://h/x"}`, `mcp.servers.x.url: must be an http: or https: URL`},
		{`{"url":"not a url"}`, `mcp.servers.x.url: must be an http: or https: URL`},
		{`{"url":"https://h","transport":"websocket"}`, `mcp.servers.x.transport: Invalid option: expected one of "stdio"|"sse"|"streamable-http"`},
		{`{"url":"https://h","headers":{"X":[1]}}`, `mcp.servers.x.headers.X: Invalid input: expected string, number or boolean, received array`},
		{`{"url":"https://h","connectionTimeoutMs":0}`, `mcp.servers.x.connectionTimeoutMs: Too small: expected number to be >0`},
		{`{"url":"https://h","requestTimeoutMs":"5"}`, `mcp.servers.x.requestTimeoutMs: Invalid input: expected number, received string`},
		{`{"url":"https://h","requestTimeoutMs":Infinity}`, `mcp.servers.x.requestTimeoutMs: Invalid input: expected a finite number`},
		{`{"url":"https://h","supportsParallelToolCalls":1}`, `mcp.servers.x.supportsParallelToolCalls: Invalid input: expected boolean, received number`},
		{`{"url":"https://h","auth":"basic"}`, `mcp.servers.x.auth: Invalid input: expected "oauth"`},
		{`{"url":"https://h","oauth":"x"}`, `mcp.servers.x.oauth: Invalid input: expected object, received string`},
		{`{"url":"https://h","oauth":{"identity":"team"}}`, `mcp.servers.x.oauth.identity: Invalid option: expected one of "shared"|"per-requester"`},
		{`{"url":"https://h","oauth":{"redirectUrl":"file:///x"}}`, `mcp.servers.x.oauth.redirectUrl: must be an http: or https: URL`},
		{`{"url":"https://h","oauth":{"clientMetadataUrl":"http://h/m"}}`, `mcp.servers.x.oauth.clientMetadataUrl: must be an https: URL`},
		{`{"url":"https://h","oauth":{"clientMetadataUrl":"https://h/"}}`, `mcp.servers.x.oauth.clientMetadataUrl: must be an https: URL with a non-root path`},
		{`{"url":"https://h","oauth":{"clientId":"c"}}`, `mcp.servers.x.oauth: Unrecognized key: "clientId"`},
		{`{"url":"https://h","sslVerify":"no"}`, `mcp.servers.x.sslVerify: Invalid input: expected boolean, received string`},
		{`{"url":"https://h","clientCert":1}`, `mcp.servers.x.clientCert: Invalid input: expected string, received number`},
		{`{"url":"https://h","clientKey":false}`, `mcp.servers.x.clientKey: Invalid input: expected string, received boolean`},
		{`{"command":"x","toolFilter":{"include":[]}}`, `mcp.servers.x.toolFilter.include: Too small: expected array to have >=1 items`},
		{`{"command":"x","toolFilter":{"exclude":["  "]}}`, `mcp.servers.x.toolFilter.exclude.0: Too small: expected string to have >=1 characters`},
		{`{"command":"x","toolFilter":{"only":["a"]}}`, `mcp.servers.x.toolFilter: Unrecognized key: "only"`},
		{`{"command":"x","toolFilter":[]}`, `mcp.servers.x.toolFilter: Invalid input: expected object, received array`},
		{`{"command":"x","codex":{"agents":["-bad"]}}`, `mcp.servers.x.codex.agents.0: Invalid string: must match pattern (?i)^[a-z0-9][a-z0-9_-]{0,63}$`},
		{`{"command":"x","codex":{"agents":[]}}`, `mcp.servers.x.codex.agents: Too small: expected array to have >=1 items`},
		{`{"command":"x","codex":{"defaultToolsApprovalMode":"never"}}`, `mcp.servers.x.codex.defaultToolsApprovalMode: Invalid option: expected one of "auto"|"prompt"|"approve"`},
		{`{"command":"x","codex":{"mode":1}}`, `mcp.servers.x.codex: Unrecognized key: "mode"`},
		{`{"url":"https://h","oauth":{"identity":"per-requester"}}`, `mcp.servers.x.oauth.identity: "per-requester" identity requires auth "oauth"`},
		{`{"url":"https://h","auth":"oauth","oauth":{"identity":"per-requester","authProfileId":"p"}}`, `mcp.servers.x.oauth.authProfileId: cannot be combined with the "per-requester" identity`},
		{`{"command":"c","auth":"oauth","oauth":{"identity":"per-requester"}}`, `mcp.servers.x.oauth.identity: "per-requester" identity requires a url`},
		{`{"command":"c","url":"https://h","auth":"oauth","oauth":{"identity":"per-requester"}}`, `mcp.servers.x.oauth.identity: "per-requester" identity cannot be used with a stdio server`},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			t.Parallel()
			doc := &Document{Path: "p", Root: mustObject(t, `{"keep":1}`)}
			before := string(MarshalCompact(doc.Root))
			err := doc.SetServer("x", mustObject(t, tt.entry))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Error() != tt.want {
				t.Fatalf("SetServer(%s) = %v,\nwant %s", tt.entry, err, tt.want)
			}
			if after := string(MarshalCompact(doc.Root)); after != before {
				t.Fatalf("a failed set changed the document: %s", after)
			}
		})
	}
}

func TestSetServerAccepts(t *testing.T) {
	t.Parallel()
	tests := []string{
		`{"command":"node","url":"https://x.example.com"}`,
		`{"url":"http://127.0.0.1:3000/mcp","transport":"streamable-http","headers":{"A":1,"B":true},"connectionTimeoutMs":1.5}`,
		`{"command":"x","env":{"N":1,"B":false},"anythingElse":{"kept":true}}`,
		`{"url":"https://h","auth":"oauth","oauth":{"identity":"per-requester","scope":"s","redirectUrl":"http://127.0.0.1/cb","clientMetadataUrl":"https://h/meta.json"}}`,
		`{"command":"x","toolFilter":{"include":[" a* "]},"codex":{"agents":["main","ops_2"],"defaultToolsApprovalMode":"prompt"}}`,
		`{"command":"x","workingDirectory":"/w","connect_timeout_ms":1}`,
	}
	for _, entry := range tests {
		t.Run(entry, func(t *testing.T) {
			t.Parallel()
			doc := &Document{Path: "p", Root: NewObject()}
			if err := doc.SetServer("x", mustObject(t, entry)); err != nil {
				t.Fatalf("SetServer(%s): %v", entry, err)
			}
		})
	}
	// The schema's one transform: toolFilter patterns are stored trimmed.
	doc := &Document{Path: "p", Root: NewObject()}
	if err := doc.SetServer(" x ", mustObject(t, `{"command":"x","toolFilter":{"include":[" a* "]}}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(MarshalCompact(doc.Root)); got != `{"mcp":{"servers":{"x":{"command":"x","toolFilter":{"include":["a*"]}}}}}` {
		t.Fatalf("stored %s", got)
	}
}

func TestValidateMCPSection(t *testing.T) {
	t.Parallel()
	tests := []struct{ root, want string }{
		{`{"mcp":[]}`, `mcp: Invalid input: expected object, received array`},
		{`{"mcp":{"sessionIdleTtlMs":-1}}`, `mcp.sessionIdleTtlMs: Too small: expected number to be >=0`},
		{`{"mcp":{"sessionIdleTtlMs":"1"}}`, `mcp.sessionIdleTtlMs: Invalid input: expected finite number, received string`},
		{`{"mcp":{"apps":{"enabled":1}}}`, `mcp.apps.enabled: Invalid input: expected boolean, received number`},
		{`{"mcp":{"apps":{"sandboxPort":"80"}}}`, `mcp.apps.sandboxPort: Invalid input: expected number, received string`},
		{`{"mcp":{"servers":[]}}`, `mcp.servers: Invalid input: expected record, received array`},
		{`{"mcp":{"servers":{"a":"b"}}}`, `mcp.servers.a: Invalid input: expected object, received string`},
		{`{"mcp":{"servers":{"__proto__":{"command":"x"}}}}`, `mcp.servers.__proto__: server name "__proto__" is reserved`},
		{`{"mcp":{"servers":{"w":{"command":"x","workingDirectory":"/w"}}}}`, `mcp.servers.w.workingDirectory: Unrecognized key: "workingDirectory"`},
		{`{"mcp":{"servers":{"w":{"command":"x","ssl_verify":true}}}}`, `mcp.servers.w.ssl_verify: Unrecognized key: "ssl_verify"`},
		{`{"mcp":{"servers":{"w":{"command":"x","codex":{"default_tools_approval_mode":"auto"}}}}}`, `mcp.servers.w.codex.default_tools_approval_mode: Unrecognized key: "default_tools_approval_mode"`},
		{`{"mcp":{"servers":{"w":{"command":"x","supports_parallel_tool_calls":true}}}}`, `mcp.servers.w.supports_parallel_tool_calls: Unrecognized key: "supports_parallel_tool_calls"`},
		{`{"mcp":{"servers":{"w":{"command":"x","client_cert":"c"}}}}`, `mcp.servers.w.client_cert: Unrecognized key: "client_cert"`},
		{`{"mcp":{"servers":{"w":{"command":"x","client_key":"k"}}}}`, `mcp.servers.w.client_key: Unrecognized key: "client_key"`},
	}
	for _, tt := range tests {
		t.Run(tt.root, func(t *testing.T) {
			t.Parallel()
			issues := ValidateMCP(mustObject(t, tt.root))
			if len(issues) == 0 || issues[0].Error() != tt.want {
				t.Fatalf("ValidateMCP(%s) = %v, want first %s", tt.root, issues, tt.want)
			}
		})
	}
	if issues := ValidateMCP(mustObject(t, `{"other":[1],"mcp":{"sessionIdleTtlMs":0,"apps":{"enabled":true},"servers":{}}}`)); len(issues) != 0 {
		t.Fatalf("valid config refused: %v", issues)
	}
	// `mcp set __proto__` is refused too.
	doc := &Document{Path: "p", Root: NewObject()}
	if err := doc.SetServer("__proto__", mustObject(t, `{"command":"x"}`)); err == nil {
		t.Fatal("__proto__ accepted")
	}
	if err := doc.SetServer("  ", mustObject(t, `{"command":"x"}`)); !errors.Is(err, ErrEmptyServerName) {
		t.Fatalf("empty name: %v", err)
	}
}

func TestUnsetServer(t *testing.T) {
	t.Parallel()
	doc := &Document{Path: "p", Root: mustObject(t, `{"a":1,"mcp":{"servers":{"x":{"command":"x"},"y":{"command":"y"}}}}`)}
	if ok, err := doc.UnsetServer("nope"); ok || err != nil {
		t.Fatalf("unset of a missing name = %v, %v", ok, err)
	}
	if ok, err := doc.UnsetServer("x"); !ok || err != nil {
		t.Fatalf("unset x = %v, %v", ok, err)
	}
	if got := string(MarshalCompact(doc.Root)); got != `{"a":1,"mcp":{"servers":{"y":{"command":"y"}}}}` {
		t.Fatalf("after unset x: %s", got)
	}
	if ok, _ := doc.UnsetServer("y"); !ok {
		t.Fatal("unset y failed")
	}
	// The last server takes mcp.servers and an empty mcp with it.
	if got := string(MarshalCompact(doc.Root)); got != `{"a":1}` {
		t.Fatalf("after unset y: %s", got)
	}
	doc = &Document{Path: "p", Root: mustObject(t, `{"mcp":{"sessionIdleTtlMs":5,"servers":{"x":{"command":"x"}}}}`)}
	doc.UnsetServer("x")
	if got := string(MarshalCompact(doc.Root)); got != `{"mcp":{"sessionIdleTtlMs":5}}` {
		t.Fatalf("mcp with other keys: %s", got)
	}
}

func TestResolveServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		entry                  string
		transport, launch, err string
	}{
		{`{"command":"node","url":"https://x.example.com"}`, "stdio", "node", ""},
		{`{"command":"node","cwd":"/tmp/w"}`, "stdio", "node (cwd=/tmp/w)", ""},
		{`{"command":"node","workingDirectory":"/tmp/w"}`, "stdio", "node (cwd=/tmp/w)", ""},
		{`{"command":"npx","args":["-y","srv","--api-key","sk-123","--token=abc",7,"--verbose"]}`, "stdio", "npx -y srv --api-key *** --token=*** --verbose", ""},
		{`{"url":"https://user:pw@mcp.example.com/mcp?token=abc&x=1","transport":"streamable-http"}`, "streamable-http", "https://***:***@mcp.example.com/mcp?token=***&x=1", ""},
		{`{"url":"http://127.0.0.1:3000/sse"}`, "sse", "http://127.0.0.1:3000/sse", ""},
		{`{"url":"https://h/mcp","type":"http"}`, "streamable-http", "https://h/mcp", ""},
		{`{"url":"https://h/mcp","transport":"SSE"}`, "sse", "https://h/mcp", ""},
		{`{"url":"https://h/mcp","transport":"stdio"}`, "", "", `transport "stdio" is not supported`},
		{`{"url":"ftp://h/x?token=s"}`, "", "", `url "ftp://h/x?token=***" is not an http: or https: URL`},
		{`{"command":"  "}`, "", "", "no non-empty command for stdio and no url"},
		{`{}`, "", "", "no non-empty command for stdio and no url"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			t.Parallel()
			r, err := ResolveServer("s", mustObject(t, tt.entry))
			if tt.err != "" {
				if !errors.Is(err, ErrNoTransport) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ResolveServer = %v, want ErrNoTransport with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Transport != tt.transport || r.Description != tt.launch {
				t.Fatalf("ResolveServer = %s %q, want %s %q", r.Transport, r.Description, tt.transport, tt.launch)
			}
			if r.RequestTimeoutMs != DefaultRequestTimeoutMs || r.ConnectionTimeoutMs != DefaultConnectionTimeoutMs || r.SupportsParallelToolCalls {
				t.Fatalf("defaults: %+v", r)
			}
		})
	}
	r, err := ResolveServer("s", mustObject(t, `{"url":"https://h","requestTimeoutMs":5,"connectionTimeoutMs":-1,"supportsParallelToolCalls":true,"sslVerify":false}`))
	if err != nil || r.RequestTimeoutMs != 5 || r.ConnectionTimeoutMs != DefaultConnectionTimeoutMs || !r.SupportsParallelToolCalls || r.SSLVerify {
		t.Fatalf("configured values: %+v, %v", r, err)
	}
}

// The env filter must drop and keep exactly what OpenClaw 2026.9.6 dropped
// and kept on the wire (testdata/openclaw/stdio-env-policy.json at the
// repository root, captured from OpenClaw), and its embedded rules are the
// rules OpenClaw printed.
func TestStdioEnvFilterMatchesOpenClaw(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../testdata/openclaw/stdio-env-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Dropped   []string       `json:"droppedForMcpStdio"`
		Kept      []string       `json:"keptForMcpStdio"`
		Allowlist []string       `json:"mcpExplicitCredentialAllowlist"`
		Raw       stdioEnvPolicy `json:"rawPolicy"`
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	var embedded stdioEnvPolicy
	if err := json.Unmarshal(stdioEnvPolicyJSON, &embedded); err != nil {
		t.Fatal(err)
	}
	fx.Raw.MCPExplicitCredentialAllowlist = fx.Allowlist
	if !reflect.DeepEqual(embedded, fx.Raw) {
		t.Errorf("stdio_env_policy.json differs from the rules OpenClaw printed (testdata/openclaw/stdio-env-policy.json rawPolicy)")
	}
	if len(fx.Dropped) != 200 || len(fx.Kept) < 50 {
		t.Fatalf("fixture has %d dropped, %d kept keys", len(fx.Dropped), len(fx.Kept))
	}
	for _, k := range fx.Dropped {
		if !IsBlockedStdioEnvKey(k) {
			t.Errorf("%q kept, OpenClaw drops it", k)
		}
	}
	for _, k := range fx.Kept {
		if IsBlockedStdioEnvKey(k) {
			t.Errorf("%q dropped, OpenClaw keeps it", k)
		}
	}
	for _, k := range []string{"node_options", " NODE_OPTIONS ", "ld_preload", "DYLD_X", "BASH_FUNC_f%%"} {
		if !IsBlockedStdioEnvKey(k) {
			t.Errorf("%q kept", k)
		}
	}
	for _, k := range []string{"", "GIT_CONFIG_COUNT", "NPM_CONFIG_REGISTRY", "TF_VAR_x", "GITHUB_TOKEN", "FOO"} {
		if IsBlockedStdioEnvKey(k) {
			t.Errorf("%q dropped", k)
		}
	}
	if n := len(stdioEnv.blocked); n != 194 {
		t.Errorf("effective blocked exact keys: %d, the reference counts 194", n)
	}
	kept, blocked := FilterStdioEnv(mustObject(t, `{"NODE_OPTIONS":"--inspect","FOO":"1","N":2.5,"B":true,"O":{},"ld_preload":"x"}`))
	if want := []EnvVar{{"FOO", "1"}, {"N", "2.5"}, {"B", "true"}}; !reflect.DeepEqual(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if want := []string{"NODE_OPTIONS", "ld_preload"}; !reflect.DeepEqual(blocked, want) {
		t.Errorf("blocked %v, want %v", blocked, want)
	}
	if got := BlockedStdioEnvKeys(mustObject(t, `{"url":"https://h","env":{"NODE_OPTIONS":"x"}}`)); got != nil {
		t.Errorf("an HTTP server's env is not launched: %v", got)
	}
}

func TestLocaleCompare(t *testing.T) {
	t.Parallel()
	names := []string{"b", "_x", "Zed", "a2", "A1", "alpha", "10", "9", "-dash", "Alpha", "ctx7", "docs", "both", "wd", "é"}
	SortLocale(names)
	want := []string{"_x", "-dash", "10", "9", "A1", "a2", "alpha", "Alpha", "b", "both", "ctx7", "docs", "wd", "Zed", "é"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("sorted %q\nwant   %q", names, want)
	}
}

func TestSaveRefusesAConcurrentChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "openclaw.json")
	a, err := LoadDocument(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadDocument(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Document{a, b} {
		if err := d.SetServer("x", mustObject(t, `{"command":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Save(); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(); !errors.Is(err, ErrConfigChanged) {
		t.Fatalf("second writer from the same base: %v, want ErrConfigChanged", err)
	}
	// The first writer may go on writing its own document.
	if err := a.SetServer("y", mustObject(t, `{"command":"y"}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(); err != nil {
		t.Fatalf("save after own save: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"edited":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(); !errors.Is(err, ErrConfigChanged) {
		t.Fatalf("after an edit by someone else: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(); !errors.Is(err, ErrConfigChanged) {
		t.Fatalf("after removal: %v", err)
	}
}

// Hostile config files must never panic the validator, the normalizer or
// the resolver.
func FuzzServersConfig(f *testing.F) {
	for _, s := range []string{
		`{"mcp":{"servers":{"a":{"command":"x","env":{"LD_PRELOAD":1}},"b":{"url":"https://u:p@h?token=1","type":"http"}}}}`,
		`{"mcp":{"servers":{"c":{"oauth":{"identity":"per-requester"},"codex":{"agents":[1]},"toolFilter":{"include":[" "]}}}}}`,
		`{"mcp":{"servers":[],"apps":3}}`,
		`{"mcp":{"servers":{"d":{"workingDirectory":5,"type":"SSE","transport":null,"args":[{}]}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseOrdered(data)
		if err != nil {
			return
		}
		root, ok := v.(*Object)
		if !ok {
			return
		}
		ValidateMCP(root.Clone())
		doc := &Document{Path: "p", Root: root}
		servers := doc.Servers()
		for _, name := range servers.Keys() {
			e, _ := servers.Get(name)
			entry := e.(*Object)
			if r, err := ResolveServer(name, entry); err == nil && r.Transport == "" {
				t.Fatalf("resolved %q without a transport", name)
			}
			BlockedStdioEnvKeys(entry)
			NormalizeServer(entry.Clone())
			doc.SetServer(name+"2", entry.Clone())
		}
	})
}

func TestResolveServerDetails(t *testing.T) {
	t.Parallel()
	doc := &Document{Path: "p", Root: mustObject(t, `{"mcp":{"servers":{
		"h":{"url":"https://h/mcp","transport":"streamable-http","headers":{"Authorization":"Bearer x","X-N":2,"X-B":true,"X-O":{}},"toolFilter":{"include":[" a* ",""],"exclude":["b"]}},
		"o":{"url":"https://h/mcp","auth":"oauth","headers":{"authorization":"Bearer x","X":"y"},"enabled":false},
		"bad":{"type":"websocket","url":"https://h"},
		"s":{"command":"x"}}}}`)}
	rs, errs := doc.ResolveServers()
	if len(rs) != 3 || len(errs) != 1 || !strings.Contains(errs[0].Error(), `"bad"`) {
		t.Fatalf("ResolveServers = %d servers, errors %v", len(rs), errs)
	}
	h, o, s := rs[0], rs[1], rs[2]
	if want := []EnvVar{{"Authorization", "Bearer x"}, {"X-N", "2"}, {"X-B", "true"}}; !reflect.DeepEqual(h.Headers, want) {
		t.Errorf("headers %v, want %v", h.Headers, want)
	}
	if !reflect.DeepEqual(h.DroppedHeaders, []string{"X-O"}) {
		t.Errorf("dropped headers %v", h.DroppedHeaders)
	}
	if want := (&ToolFilter{Include: []string{"a*"}, Exclude: []string{"b"}}); !reflect.DeepEqual(h.ToolFilter, want) {
		t.Errorf("tool filter %+v, want %+v", h.ToolFilter, want)
	}
	if !h.Enabled || h.OAuth {
		t.Errorf("h: enabled %v oauth %v", h.Enabled, h.OAuth)
	}
	if want := []EnvVar{{"X", "y"}}; !reflect.DeepEqual(o.Headers, want) || o.Enabled || !o.OAuth || o.Transport != TransportSSE {
		t.Errorf("oauth server: %+v", o)
	}
	if s.Name != "s" || s.Transport != TransportStdio || s.ToolFilter != nil {
		t.Errorf("stdio server: %+v", s)
	}
}

// Numbers in env and header values become strings as JavaScript's String()
// prints them (OpenClaw converts them so): Infinity stays "Infinity", where
// JSON.stringify would write null.
func TestResolveServerNumbersAsJavaScriptString(t *testing.T) {
	t.Parallel()
	r, err := ResolveServer("n", mustObject(t, `{command: "x", env: {SMALL: 0.000001, TINY: 1e-7, NEG0: -0, BIG: 1e21, INF: Infinity, NINF: -Infinity, NAN: NaN}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []EnvVar{{"SMALL", "0.000001"}, {"TINY", "1e-7"}, {"NEG0", "0"}, {"BIG", "1e+21"}, {"INF", "Infinity"}, {"NINF", "-Infinity"}, {"NAN", "NaN"}}
	if !reflect.DeepEqual(r.Env, want) {
		t.Errorf("env %v, want %v", r.Env, want)
	}
	h, err := ResolveServer("h", mustObject(t, `{url: "https://h/mcp", headers: {"X-Inf": Infinity, "X-Small": 0.000001}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []EnvVar{{"X-Inf", "Infinity"}, {"X-Small", "0.000001"}}; !reflect.DeepEqual(h.Headers, want) {
		t.Errorf("headers %v, want %v", h.Headers, want)
	}
	if got := FormatNumber(math.Inf(1)); got != "null" {
		t.Errorf("FormatNumber(Infinity) = %q, want JSON.stringify's null", got)
	}
}
