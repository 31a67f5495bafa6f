package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// registryStep is one run of the binary in a home shared by the steps of
// a scenario, and what the user must see.
type registryStep struct {
	args   []string
	code   int
	stdout []string // substrings of stdout (normalized)
	stderr []string // substrings of stderr (normalized)
	noOut  []string // substrings neither stdout nor stderr may hold
	// unchanged: openclaw.json must be byte for byte what it was.
	unchanged bool
	// show, when set, is the exact `mcp show <show[0]> --json` output
	// expected after the step.
	show []string
}

// runSteps runs steps in order in home r.
func runSteps(t *testing.T, r *registryCLI, steps []registryStep) {
	t.Helper()
	for _, st := range steps {
		before, _ := os.ReadFile(r.configPath())
		stdout, stderr, code := r.run(t, st.args...)
		stdout, stderr = r.normalize(stdout), r.normalize(stderr)
		label := strings.Join(st.args, " ")
		if code != st.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", label, code, st.code, stdout, stderr)
		}
		for _, s := range st.stdout {
			if !strings.Contains(stdout, s) {
				t.Errorf("%s: stdout lacks %q:\n%s", label, s, stdout)
			}
		}
		for _, s := range st.stderr {
			if !strings.Contains(stderr, s) {
				t.Errorf("%s: stderr lacks %q:\n%s", label, s, stderr)
			}
		}
		for _, s := range st.noOut {
			if strings.Contains(stdout+stderr, s) {
				t.Errorf("%s: output holds %q:\n%s\n%s", label, s, stdout, stderr)
			}
		}
		if st.unchanged {
			after, _ := os.ReadFile(r.configPath())
			if !bytes.Equal(before, after) {
				t.Errorf("%s: openclaw.json changed:\n%s\n->\n%s", label, before, after)
			}
		}
		if st.show != nil {
			got, errOut, code := r.run(t, "mcp", "show", st.show[0], "--json")
			if want := strings.Join(st.show[1:], "\n") + "\n"; code != 0 || got != want {
				t.Errorf("%s: mcp show %s --json (exit %d) =\n%s\nwant\n%s%s", label, st.show[0], code, got, want, errOut)
			}
		}
	}
}

func TestMCPAdd(t *testing.T) {
	t.Parallel()
	c := newRuntimeCLI(t)
	url := httpMCPServer(t, "add-sekret-1")
	const saved = `Saved MCP server "%s" to $OPENCLAW_HOME/.openclaw/openclaw.json.`
	savedAs := func(name string) string { return strings.Replace(saved, "%s", name, 1) }
	// npx here is a runner whose first start outlasts the entry's 1 s
	// connection timeout, as a first download does.
	npx := filepath.Join(t.TempDir(), "npx")
	if err := os.WriteFile(npx, []byte("#!/bin/sh\nsleep 2\nexec "+c.tiny+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	scenarios := []struct {
		name    string
		servers map[string]any
		steps   []registryStep
	}{
		{
			name:    "--disable and --disabled mean the same on add and configure",
			servers: map[string]any{},
			steps: []registryStep{
				{args: []string{"mcp", "add", "off", "--command", c.tiny, "--disable"}, stdout: []string{savedAs("off")},
					show: []string{"off", "{", `  "command": "` + c.tiny + `",`, `  "enabled": false`, "}"}},
				{args: []string{"mcp", "configure", "off", "--enabled"}, show: []string{"off", "{", `  "command": "` + c.tiny + `"`, "}"}},
				{args: []string{"mcp", "configure", "off", "--disabled"}, show: []string{"off", "{", `  "command": "` + c.tiny + `",`, `  "enabled": false`, "}"}},
			},
		},
		{
			name:    "a server started through npx gets time for its first download",
			servers: map[string]any{},
			steps: []registryStep{{
				args:   []string{"mcp", "add", "slow", "--command", npx, "--arg", "-y", "--arg", "some-mcp-server", "--connect-timeout", "1"},
				stdout: []string{`Probed MCP server "slow": 3 tools`, savedAs("slow")},
				stderr: []string{`"slow" starts through npx, which may download the package first: waiting up to 3m0s for it (--probe-timeout changes this)`},
				show:   []string{"slow", "{", `  "command": "` + npx + `",`, `  "args": [`, `    "-y",`, `    "some-mcp-server"`, `  ],`, `  "connectionTimeoutMs": 1000`, "}"},
			}},
		},
		{
			name:    "stdio: probe, save, refuse the same name, replace with --force",
			servers: map[string]any{},
			steps: []registryStep{
				{
					args: []string{"mcp", "add", "tiny", "--command", c.tiny, "--arg", "--token", "--arg", "argsekret-5",
						"--env", "MODE=fast", "--include", "echo, point", "--timeout", "2.5", "--connect-timeout", "4", "--parallel"},
					stdout: []string{`Probed MCP server "tiny": 2 tools (stdio, tiny 1, protocol `, "1 hidden by toolFilter", savedAs("tiny")},
					noOut:  []string{"argsekret-5"},
					show: []string{"tiny", `{`,
						`  "command": "` + c.tiny + `",`,
						`  "args": [`, `    "--token",`, `    "argsekret-5"`, `  ],`,
						`  "env": {`, `    "MODE": "fast"`, `  },`,
						`  "supportsParallelToolCalls": true,`,
						`  "requestTimeoutMs": 2500,`,
						`  "connectionTimeoutMs": 4000,`,
						`  "toolFilter": {`, `    "include": [`, `      "echo",`, `      "point"`, `    ]`, `  }`,
						`}`},
				},
				{
					args:      []string{"mcp", "add", "tiny", "--command", c.tiny},
					code:      1,
					stderr:    []string{`MCP server "tiny" already exists in $OPENCLAW_HOME/.openclaw/openclaw.json. Use --force to replace it, or openclaw mcp configure tiny to change it.`},
					unchanged: true,
				},
				{
					args:   []string{"mcp", "add", "tiny", "--command", c.tiny, "--force", "--no-probe"},
					stdout: []string{savedAs("tiny")},
					show:   []string{"tiny", `{`, `  "command": "` + c.tiny + `"`, `}`},
				},
			},
		},
		{
			name:    "streamable HTTP with a header; probe failures leave the file alone",
			servers: map[string]any{"keep": map[string]any{"command": "keep-me"}},
			steps: []registryStep{
				{
					args:   []string{"mcp", "add", "web", "--url", url, "--transport", "streamable-http", "--header", "Authorization=Bearer add-sekret-1"},
					stdout: []string{`Probed MCP server "web": 1 tools (streamable-http, http-peer 7.1, protocol `, savedAs("web")},
					noOut:  []string{"add-sekret-1"},
					show: []string{"web", `{`, `  "url": "` + url + `",`, `  "transport": "streamable-http",`,
						`  "headers": {`, `    "Authorization": "Bearer add-sekret-1"`, `  }`, `}`},
				},
				{
					args:      []string{"mcp", "add", "web2", "--url", url, "--transport", "streamable-http", "--header", "Authorization=Bearer wrong-sekret-2"},
					code:      1,
					stderr:    []string{`MCP probe failed for "web2" in $OPENCLAW_HOME/.openclaw/openclaw.json: connect: `},
					noOut:     []string{"wrong-sekret-2"},
					unchanged: true,
				},
				{
					args:      []string{"mcp", "add", "gone", "--command", "/nonexistent/mcp-server"},
					code:      1,
					stderr:    []string{`MCP probe failed for "gone" in $OPENCLAW_HOME/.openclaw/openclaw.json: connect: `},
					unchanged: true,
				},
				{
					args:   []string{"mcp", "add", "gone", "--command", "/nonexistent/mcp-server", "--no-probe"},
					stdout: []string{savedAs("gone")},
					noOut:  []string{"Probed"},
				},
				{
					args:   []string{"mcp", "add", "off", "--command", "/nonexistent/mcp-server", "--disabled"},
					stdout: []string{savedAs("off")},
					noOut:  []string{"Probed"},
					show:   []string{"off", `{`, `  "command": "/nonexistent/mcp-server",`, `  "enabled": false`, `}`},
				},
				{
					args:   []string{"mcp", "add", "sso", "--url", url, "--auth", "OAuth", "--oauth-scope", "read"},
					stdout: []string{savedAs("sso"), "Run openclaw mcp login sso to authorize this MCP server."},
					noOut:  []string{"Probed"},
					show:   []string{"sso", `{`, `  "url": "` + url + `",`, `  "auth": "oauth",`, `  "oauth": {`, `    "scope": "read"`, `  }`, `}`},
				},
			},
		},
		{
			name:    "invalid flags: OpenClaw's messages, file unchanged",
			servers: map[string]any{"keep": map[string]any{"command": "keep-me"}},
			steps: []registryStep{
				{args: []string{"mcp", "add", "x", "--command", "a", "--url", "http://h"}, code: 1, unchanged: true,
					stderr: []string{"Specify either --command for stdio or --url for HTTP, not both.\n"}},
				{args: []string{"mcp", "add", "x"}, code: 1, unchanged: true,
					stderr: []string{"Specify --command for stdio or --url for HTTP.\n"}},
				{args: []string{"mcp", "add", "x", "--command", "a", "--env", "NOVALUE"}, code: 1, unchanged: true,
					stderr: []string{"--env entries must use KEY=VALUE.\n"}},
				{args: []string{"mcp", "add", "x", "--url", "http://h", "--header", " =v"}, code: 1, unchanged: true,
					stderr: []string{"--header entries must use a non-empty key.\n"}},
				{args: []string{"mcp", "add", "x", "--url", "http://h", "--auth", "basic"}, code: 1, unchanged: true,
					stderr: []string{`Invalid --auth value. Use "oauth".` + "\n"}},
				{args: []string{"mcp", "add", "x", "--url", "http://h", "--ssl-verify", "yes"}, code: 1, unchanged: true,
					stderr: []string{"--ssl-verify must be true or false.\n"}},
				{args: []string{"mcp", "add", "x", "--command", "a", "--timeout", "-3"}, code: 1, unchanged: true,
					stderr: []string{"--timeout must be a positive number.\n"}},
				{args: []string{"mcp", "add", "x", "--command", "a", "--header", "A=b", "--transport", "sse"}, code: 1, unchanged: true,
					stderr: []string{"These flags apply to --url (HTTP) servers only: --header, --transport.\n"}},
				{args: []string{"mcp", "add", "x", "--url", "http://h", "--cwd", "/tmp"}, code: 1, unchanged: true,
					stderr: []string{"These flags apply to --command (stdio) servers only: --cwd.\n"}},
				{args: []string{"mcp", "add", "x", "--url", "ftp://h", "--no-probe"}, code: 1, unchanged: true,
					stderr: []string{"Config invalid after MCP set (mcp.servers.x.url: "}},
				{args: []string{"mcp", "add", "x", "--url", "http://h", "--transport", "websocket", "--no-probe"}, code: 1, unchanged: true,
					stderr: []string{"Config invalid after MCP set (mcp.servers.x.transport: "}},
				{args: []string{"mcp", "add", " ", "--command", "a"}, code: 1, unchanged: true,
					stderr: []string{"MCP server name is required.\n"}},
			},
		},
	}
	if ev := everythingEntry(t); ev != nil {
		args := ev["args"].([]string)
		scenarios = append(scenarios, struct {
			name    string
			servers map[string]any
			steps   []registryStep
		}{
			name:    "server-everything over stdio",
			servers: map[string]any{},
			steps: []registryStep{{
				args:   []string{"mcp", "add", "everything", "--command", "node", "--arg", args[0], "--arg", args[1], "--exclude", "*long*"},
				stdout: []string{`Probed MCP server "everything": 12 tools, resources, prompts (stdio, mcp-servers/everything `, "1 hidden by toolFilter", savedAs("everything")},
			}},
		})
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runSteps(t, c.newHome(t, sc.servers, nil), sc.steps)
		})
	}
}
