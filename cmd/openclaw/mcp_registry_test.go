package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const cliFixtures = "../../testdata/openclaw/cli/"

// registryCLI runs the real binary against its own OpenClaw home.
type registryCLI struct {
	bin, home, work string
}

func newRegistryCLI(t *testing.T) *registryCLI {
	t.Helper()
	dir := t.TempDir()
	c := &registryCLI{
		home: filepath.Join(dir, "home"),
		work: filepath.Join(dir, "work"),
	}
	for _, d := range []string{c.home, c.work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c.bin = testBinary(t)
	return c
}

func (c *registryCLI) configPath() string {
	return filepath.Join(c.home, ".openclaw", "openclaw.json")
}

// run returns stdout, stderr and the exit code.
func (c *registryCLI) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENCLAW_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+c.home, "OPENCLAW_HOME="+c.home)
	cmd.Dir = c.work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// normalize turns our output into the form of the captured transcripts:
// paths become their placeholders, our hint and note sentences the markers.
func (c *registryCLI) normalize(s string) string {
	s = strings.ReplaceAll(s, c.home, "$OPENCLAW_HOME")
	s = strings.ReplaceAll(s, c.work, "$TMPDIR")
	s = strings.ReplaceAll(s, ". "+hintAddServer, ". [hint omitted]")
	s = strings.ReplaceAll(s, ". "+hintListServers, ". [hint omitted]")
	s = strings.ReplaceAll(s, scopeNote, "[scope note line omitted]")
	s = strings.ReplaceAll(s, envBlockedWarn, "[blocked-env warning, text omitted]")
	s = strings.ReplaceAll(s, `use "enabled": false instead`, "[hint omitted]")
	return s
}

// transcriptStep is one command of a captured transcript.
type transcriptStep struct {
	args      []string
	out       []string // stdout, or stdout and stderr merged
	stderr    []string
	hasStderr bool // the transcript kept stderr apart
	rc        int
}

func readTranscript(t *testing.T, name string) []transcriptStep {
	t.Helper()
	data, err := os.ReadFile(cliFixtures + name)
	if err != nil {
		t.Fatal(err)
	}
	var steps []transcriptStep
	inStderr := false
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "$ openclaw "):
			args := strings.Fields(strings.TrimPrefix(line, "$ openclaw "))
			if len(args) > 3 && args[1] == "set" {
				// The JSON value is one argument, spaces included.
				args = append(args[:3], strings.Join(args[3:], " "))
			}
			steps = append(steps, transcriptStep{args: args})
			inStderr = false
		case strings.HasPrefix(line, "[rc="):
			rc := strings.TrimSuffix(strings.TrimPrefix(line, "[rc="), "]")
			steps[len(steps)-1].rc = int(rc[0] - '0')
		case line == "[stderr]":
			inStderr = true
			steps[len(steps)-1].hasStderr = true
		case strings.HasPrefix(line, "[state/sqlite]"):
			// OpenClaw's own state-store chatter, not part of the mcp command.
		case inStderr:
			steps[len(steps)-1].stderr = append(steps[len(steps)-1].stderr, line)
		default:
			steps[len(steps)-1].out = append(steps[len(steps)-1].out, line)
		}
	}
	return steps
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// splitWarnings separates the [bundle-mcp] warning lines.
func splitWarnings(ls []string) (rest, warnings []string) {
	for _, l := range ls {
		if strings.HasPrefix(l, "[bundle-mcp]") {
			warnings = append(warnings, l)
		} else {
			rest = append(rest, l)
		}
	}
	return rest, warnings
}

// TestRegistryGolden replays OpenClaw's captured `openclaw mcp` sessions
// against our binary: same stdout, same stderr, same exit codes, in order,
// on one config file. The one deliberate difference is `doctor`, which
// reports a blocklisted env key as an error (checked on its own below).
func TestRegistryGolden(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	steps := append(readTranscript(t, "mcp-cli-session.txt"), readTranscript(t, "mcp-cli-status.txt")...)
	for i, st := range steps {
		args := make([]string, len(st.args))
		for j, a := range st.args {
			args[j] = strings.ReplaceAll(a, "$TMPDIR", c.work)
		}
		stdout, stderr, rc := c.run(t, args...)
		stdout, stderr = c.normalize(stdout), c.normalize(stderr)
		what := strings.Join(st.args, " ")
		if slices.Equal(st.args, []string{"mcp", "doctor", "--json"}) {
			checkDoctorDeviation(t, st, stdout, stderr, rc)
			continue
		}
		if rc != st.rc {
			t.Errorf("step %d `%s`: exit %d, want %d (stderr %q)", i, what, rc, st.rc, stderr)
		}
		if st.hasStderr {
			if got := lines(stdout); !slices.Equal(got, st.out) {
				t.Errorf("step %d `%s` stdout:\n%s\nwant:\n%s", i, what, strings.Join(got, "\n"), strings.Join(st.out, "\n"))
			}
			if got := lines(stderr); !slices.Equal(got, st.stderr) {
				t.Errorf("step %d `%s` stderr:\n%s\nwant:\n%s", i, what, strings.Join(got, "\n"), strings.Join(st.stderr, "\n"))
			}
			continue
		}
		// This transcript merged the two streams: compare the lines in
		// order apart from the warnings, which must be on stderr.
		want, wantWarn := splitWarnings(st.out)
		got, gotWarn := splitWarnings(append(lines(stdout), lines(stderr)...))
		_, stdoutWarn := splitWarnings(lines(stdout))
		if !slices.Equal(got, want) {
			t.Errorf("step %d `%s` output:\n%s\nwant:\n%s", i, what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !slices.Equal(gotWarn, wantWarn) || len(stdoutWarn) > 0 {
			t.Errorf("step %d `%s` warnings %q (on stdout: %q), want %q on stderr", i, what, gotWarn, stdoutWarn, wantWarn)
		}
		if rc != 0 && stdout != "" {
			t.Errorf("step %d `%s` failed but wrote %q on stdout", i, what, stdout)
		}
	}
}

// checkDoctorDeviation: our doctor equals OpenClaw's except that server
// "wd", whose env holds NODE_OPTIONS, is an error (openclaw-go does not
// start it), so the run is not ok and exits 1 with "MCP doctor found
// errors." on stderr. Issue messages are our own text (the transcript
// blanks OpenClaw's).
func checkDoctorDeviation(t *testing.T, st transcriptStep, stdout, stderr string, rc int) {
	t.Helper()
	var want, got map[string]any
	if err := json.Unmarshal([]byte(strings.Join(st.out, "\n")), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("doctor --json printed %q: %v", stdout, err)
	}
	want["ok"] = false
	for _, s := range want["servers"].([]any) {
		s := s.(map[string]any)
		if s["name"] == "wd" {
			s["ok"] = false
			s["issues"] = []any{map[string]any{"level": "error", "message": ""}}
		}
	}
	for _, s := range got["servers"].([]any) {
		for _, is := range s.(map[string]any)["issues"].([]any) {
			is := is.(map[string]any)
			msg := is["message"].(string)
			if s.(map[string]any)["name"] == "wd" && !strings.Contains(msg, `"NODE_OPTIONS"`) {
				t.Errorf("wd error does not name the key: %q", msg)
			}
			if s.(map[string]any)["name"] == "docs" && !strings.Contains(msg, "headers.Authorization") {
				t.Errorf("docs warning does not name the header: %q", msg)
			}
			is["message"] = ""
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("doctor --json:\n%s\nwant (OpenClaw's plus the wd error):\n%v", stdout, want)
	}
	if rc != 1 {
		t.Errorf("doctor exit %d, want 1", rc)
	}
	if wantErr := append(slices.Clone(st.stderr), "MCP doctor found errors."); !slices.Equal(lines(stderr), wantErr) {
		t.Errorf("doctor stderr %q, want %q", lines(stderr), wantErr)
	}
}

func TestRegistryCommands(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	cert := filepath.Join(c.work, "cert.pem")
	if err := os.WriteFile(cert, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An existing hand-written JSON5 config with keys we do not own.
	if err := os.MkdirAll(filepath.Dir(c.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	orig := "{\n  // mine\n  agents: {defaults: {model: 'x'}},\n  mcp: {sessionIdleTtlMs: 0},\n}\n"
	if err := os.WriteFile(c.configPath(), []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args   []string
		rc     int
		stdout string // substring, normalized
		stderr string // substring, normalized
	}{
		{[]string{"mcp", "status"}, 0, "No MCP servers configured in $OPENCLAW_HOME/.openclaw/openclaw.json.\n", ""},
		{[]string{"mcp", "status", "--json"}, 0, "{\n  \"path\": \"$OPENCLAW_HOME/.openclaw/openclaw.json\",\n  \"servers\": []\n}\n", ""},
		{[]string{"mcp", "doctor"}, 0, "No MCP servers configured in $OPENCLAW_HOME/.openclaw/openclaw.json. " + hintDoctorAdd, ""},
		{[]string{"mcp", "set", " ", `{}`}, 1, "", "MCP server name is required.\n"},
		{[]string{"mcp", "set", "__proto__", `{"command":"x"}`}, 1, "", `Config invalid after MCP set (mcp.servers.__proto__: server name "__proto__" is reserved).`},
		{[]string{"mcp", "set", "t", `{url: 'https://h/mcp', connectTimeout: 5}`}, 1, "", `Config invalid after MCP set (mcp.servers.t.connectTimeout: Unrecognized key: "connectTimeout").`},
		{[]string{"mcp", "set", "gone", `{"command":"definitely-not-a-command-h12","cwd":"/nonexistent-h12"}`}, 0, "Saved", ""},
		{[]string{"mcp", "set", "off", `{"command":"x","enabled":false}`}, 0, "Saved", ""},
		{[]string{"mcp", "set", "bad", `{"url":"https://h","transport":"sse","command":""}`}, 0, "Saved", ""},
		{[]string{"mcp", "set", "nourl", `{"type":"websocket"}`}, 0, "Saved", ""},
		{[]string{"mcp", "set", "tls", `{"url":"https://h/m?api_key=k","transport":"sse","sslVerify":false,"clientCert":"` + cert + `","clientKey":"/nonexistent-key","auth":"oauth","headers":{"Authorization":"Bearer x","X-Api-Key":"$KEY"},"toolFilter":{},"supportsParallelToolCalls":true,"requestTimeoutMs":1500}`}, 0, "Saved", ""},
		{[]string{"mcp", "status"}, 0, "- bad: sse\n- gone: stdio\n- nourl: invalid\n  error: server \"nourl\": transport \"websocket\" is not supported (use sse or streamable-http, or give a command for stdio)\n- off: disabled\n- tls: sse oauth tool-filtered parallel\n", ""},
		{[]string{"mcp", "status", "-v"}, 0, "- tls: sse oauth tool-filtered parallel\n  launch: https://h/m?api_key=***\n  timeouts: connect=30000ms request=1500ms\n  oauth: unauthenticated (run openclaw mcp login tls)\n  tools: {}\n", ""},
		{[]string{"mcp", "doctor", "nope"}, 1, "", `No MCP server named "nope" in $OPENCLAW_HOME/.openclaw/openclaw.json. [hint omitted]`},
		{[]string{"mcp", "doctor", "off"}, 0, "MCP doctor ($OPENCLAW_HOME/.openclaw/openclaw.json):\n- off: ok\n  - warning: server is disabled", ""},
		{[]string{"mcp", "doctor"}, 1, "- gone: issues\n  ! error: stdio command definitely-not-a-command-h12 is not an executable file (looked up on PATH)\n  ! error: stdio cwd /nonexistent-h12 is not an existing folder\n", "MCP doctor found errors.\n"},
		{[]string{"mcp", "doctor"}, 1, "- nourl: issues\n  ! error: no usable transport: server \"nourl\": transport \"websocket\" is not supported (use sse or streamable-http, or give a command for stdio)\n", ""},
		{[]string{"mcp", "doctor", "tls"}, 1, "- tls: issues\n" +
			"  - warning: OAuth credentials are not authorized; run openclaw mcp login tls\n" +
			"  - warning: the static Authorization header is not sent: auth is \"oauth\"\n" +
			"  - warning: TLS certificate verification is off (sslVerify: false)\n" +
			"  ! error: clientKey file /nonexistent-key does not exist\n" +
			"  - warning: headers.Authorization holds a literal secret; keep it out of the config file and reference an environment variable instead\n" +
			"  - warning: toolFilter has neither an include nor an exclude list\n", ""},
		{[]string{"mcp", "list", "--json"}, 0, "{\n  \"gone\": {", ""},
		{[]string{"mcp", "list"}, 0, "- nourl\n- off (disabled)\n- tls", ""},
		{[]string{"mcp", "unset", "gone"}, 0, "Removed MCP server \"gone\" from $OPENCLAW_HOME/.openclaw/openclaw.json.\n", ""},
	}
	for i, st := range steps {
		stdout, stderr, rc := c.run(t, st.args...)
		stdout, stderr = c.normalize(stdout), c.normalize(stderr)
		if rc != st.rc || !strings.Contains(stdout, st.stdout) || !strings.Contains(stderr, st.stderr) {
			t.Errorf("step %d %q: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, stdout containing:\n%s\nstderr containing:\n%s",
				i, st.args, rc, stdout, stderr, st.rc, st.stdout, st.stderr)
		}
	}
	// Keys we do not own survived every write, in their order.
	data, err := os.ReadFile(c.configPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "{\n  \"agents\": {\n    \"defaults\": {\n      \"model\": \"x\"\n    }\n  },\n  \"mcp\": {\n    \"sessionIdleTtlMs\": 0,\n    \"servers\": {\n      \"off\": {") {
		t.Errorf("config after the session:\n%s", data)
	}
	// Six writes: the hand-written original has rotated out, .bak.4 holds
	// the first write.
	bak, err := os.ReadFile(c.configPath() + ".bak.4")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(bak), `"gone"`) || strings.Contains(string(bak), `"off"`) {
		t.Errorf(".bak.4 = %q, want the first write", bak)
	}
}

// Misspelled keys, which OpenClaw keeps and ignores, are warned about with
// the key meant on every command that reads the entries, and an entry that
// has no transport because of one says so.
func TestRegistryKeyTypos(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	if err := os.MkdirAll(filepath.Dir(c.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{mcp: {servres: {}, servers: {memory: {comand: "npx"}, t: {command: "true", requestTimeoutMS: 5}}}}`
	if err := os.WriteFile(c.configPath(), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		servres = `openclaw mcp: warning: mcp.servres: unknown key "servres", did you mean "servers"? (OpenClaw keeps it but ignores it)`
		comand  = `mcp.servers.memory.comand: unknown key "comand", did you mean "command"? (OpenClaw keeps it but ignores it)`
		timeout = `mcp.servers.t.requestTimeoutMS: unknown key "requestTimeoutMS", did you mean "requestTimeoutMs"? (OpenClaw keeps it but ignores it)`
	)
	for _, st := range []struct {
		args           []string
		rc             int
		stdout, stderr []string
	}{
		{[]string{"mcp", "list"}, 0, []string{"- memory\n- t\n"}, []string{servres, "openclaw mcp: warning: " + comand, "openclaw mcp: warning: " + timeout}},
		{[]string{"mcp", "status"}, 0, []string{"- memory: invalid\n  error: server \"memory\": no non-empty command for stdio and no url for HTTP; " + comand + "\n- t: stdio\n"}, []string{servres, timeout}},
		{[]string{"mcp", "doctor"}, 1, []string{"- memory: issues\n  - warning: " + comand, "- t: ok\n  - warning: " + timeout}, []string{servres}},
		{[]string{"mcp", "set", "x", `{"command":"true","evn":{"A":"1"}}`}, 0, []string{"Saved MCP server \"x\""},
			[]string{`openclaw mcp: warning: mcp.servers.x.evn: unknown key "evn", did you mean "env"? (OpenClaw keeps it but ignores it)`}},
	} {
		stdout, stderr, rc := c.run(t, st.args...)
		stdout, stderr = c.normalize(stdout), c.normalize(stderr)
		if rc != st.rc {
			t.Errorf("%q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", st.args, rc, st.rc, stdout, stderr)
		}
		for _, w := range st.stdout {
			if !strings.Contains(stdout, w) {
				t.Errorf("%q: stdout lacks %q:\n%s", st.args, w, stdout)
			}
		}
		for _, w := range st.stderr {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", st.args, w, stderr)
			}
		}
	}
}

func TestRegistryInvalidConfigFile(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	if err := os.MkdirAll(filepath.Dir(c.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ content, detail string }{
		{"{mcp: {servers: ", "$OPENCLAW_HOME/.openclaw/openclaw.json is not valid JSON5: line 1 column 17: unexpected end of input"},
		{`{"mcp":{"servers":{"w":{"command":"x","workingDirectory":"/w"}}}}`, `$OPENCLAW_HOME/.openclaw/openclaw.json: mcp.servers.w.workingDirectory: Unrecognized key: "workingDirectory"`},
	}
	for _, tt := range tests {
		if err := os.WriteFile(c.configPath(), []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"mcp", "list"}, {"mcp", "set", "a", `{"command":"x"}`}, {"mcp", "status", "--json"}} {
			stdout, stderr, rc := c.run(t, args...)
			want := "Config file is invalid; fix it before using MCP config commands.\n" + tt.detail + "\n"
			if rc != 1 || stdout != "" || c.normalize(stderr) != want {
				t.Errorf("%q on %q: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, tt.content, rc, stdout, c.normalize(stderr), want)
			}
		}
		if data, _ := os.ReadFile(c.configPath()); string(data) != tt.content {
			t.Errorf("invalid file rewritten: %q", data)
		}
	}
}
