package main

import (
	"testing"
)

func TestMCPConfigure(t *testing.T) {
	t.Parallel()
	c := newRuntimeCLI(t)
	const updated = `Updated MCP server "tiny" in $OPENCLAW_HOME/.openclaw/openclaw.json.`
	scenarios := []struct {
		name    string
		servers map[string]any
		steps   []registryStep
	}{
		{
			name: "edit fields in place, keep the rest",
			servers: map[string]any{"tiny": map[string]any{
				"command": c.tiny, "env": map[string]any{"OLD": "1", "API_TOKEN": "cfg-sekret-3"}, "custom": "kept",
			}},
			steps: []registryStep{
				{
					args: []string{"mcp", "configure", "tiny", "--disable", "--exclude", "fail, point", "--timeout", "3",
						"--parallel", "--env", "NEW=2", "--unset-env", "API_TOKEN"},
					stdout: []string{updated},
					noOut:  []string{"Probed"},
					// The home's file was written with sorted keys.
					show: []string{"tiny", `{`, `  "command": "` + c.tiny + `",`,
						`  "custom": "kept",`,
						`  "env": {`, `    "OLD": "1",`, `    "NEW": "2"`, `  },`,
						`  "enabled": false,`,
						`  "toolFilter": {`, `    "exclude": [`, `      "fail",`, `      "point"`, `    ]`, `  },`,
						`  "requestTimeoutMs": 3000,`,
						`  "supportsParallelToolCalls": true`, `}`},
				},
				{
					args:   []string{"mcp", "configure", "tiny", "--enable", "--no-parallel", "--clear-timeouts", "--probe"},
					stdout: []string{`Probed MCP server "tiny": 1 tools (stdio, tiny 1, protocol `, "2 hidden by toolFilter", updated},
					show: []string{"tiny", `{`, `  "command": "` + c.tiny + `",`,
						`  "custom": "kept",`,
						`  "env": {`, `    "OLD": "1",`, `    "NEW": "2"`, `  },`,
						`  "toolFilter": {`, `    "exclude": [`, `      "fail",`, `      "point"`, `    ]`, `  }`, `}`},
				},
				{
					args:   []string{"mcp", "configure", "tiny", "--clear-tools", "--unset-env", "OLD", "--unset-env", "NEW"},
					stdout: []string{updated},
					show:   []string{"tiny", `{`, `  "command": "` + c.tiny + `",`, `  "custom": "kept"`, `}`},
				},
			},
		},
		{
			name: "HTTP headers, auth and TLS",
			servers: map[string]any{"web": map[string]any{
				"url": "https://mcp.example.com/mcp", "headers": map[string]any{"Authorization": "Bearer x"},
				"auth": "oauth", "oauth": map[string]any{"scope": "a"}, "sslVerify": false,
			}},
			steps: []registryStep{
				{
					args:   []string{"mcp", "configure", "web", "--clear-auth", "--clear-tls", "--header", "X-Team=blue", "--unset-header", "Authorization", "--ssl-verify", "TRUE"},
					stdout: []string{`Updated MCP server "web" in $OPENCLAW_HOME/.openclaw/openclaw.json.`},
					show: []string{"web", `{`, `  "headers": {`, `    "X-Team": "blue"`, `  },`,
						`  "url": "https://mcp.example.com/mcp",`, `  "sslVerify": true`, `}`},
				},
				{
					args:   []string{"mcp", "configure", "web", "--auth", "oauth", "--oauth-redirect-url", "http://127.0.0.1:7777/cb"},
					stdout: []string{`Updated MCP server "web"`},
					show: []string{"web", `{`, `  "headers": {`, `    "X-Team": "blue"`, `  },`,
						`  "url": "https://mcp.example.com/mcp",`, `  "sslVerify": true,`,
						`  "auth": "oauth",`, `  "oauth": {`, `    "redirectUrl": "http://127.0.0.1:7777/cb"`, `  }`, `}`},
				},
			},
		},
		{
			name: "refusals leave the file alone",
			servers: map[string]any{
				"tiny":   map[string]any{"command": c.tiny},
				"broken": map[string]any{"command": "/nonexistent/mcp-server", "enabled": false},
				"web":    map[string]any{"url": "https://mcp.example.com/mcp"},
			},
			steps: []registryStep{
				{args: []string{"mcp", "configure", "nope", "--enable"}, code: 1, unchanged: true,
					stderr: []string{`No MCP server named "nope" in $OPENCLAW_HOME/.openclaw/openclaw.json. [hint omitted]`}},
				{args: []string{"mcp", "configure", "tiny"}, code: 1, unchanged: true,
					stderr: []string{"Specify at least one change to make; see openclaw mcp configure --help.\n"}},
				{args: []string{"mcp", "configure", "tiny", "--probe"}, code: 1, unchanged: true,
					stderr: []string{"Specify at least one change to make"}},
				{args: []string{"mcp", "configure", "tiny", "--enable", "--disable"}, code: 1, unchanged: true,
					stderr: []string{"Specify only one of --enable or --disable.\n"}},
				{args: []string{"mcp", "configure", "tiny", "--parallel", "--no-parallel"}, code: 1, unchanged: true,
					stderr: []string{"Specify only one of --parallel or --no-parallel.\n"}},
				{args: []string{"mcp", "configure", "tiny", "--unset-env", "HOME"}, code: 1, unchanged: true,
					stderr: []string{`MCP server "tiny" has no env entry "HOME" to remove (--unset-env).`}},
				{args: []string{"mcp", "configure", "tiny", "--connect-timeout", "soon"}, code: 1, unchanged: true,
					stderr: []string{"--connect-timeout must be a positive number.\n"}},
				{args: []string{"mcp", "configure", "tiny", "--auth", "token"}, code: 1, unchanged: true,
					stderr: []string{`Invalid --auth value. Use "oauth".`}},
				{args: []string{"mcp", "configure", "web", "--oauth-redirect-url", "ftp://x"}, code: 1, unchanged: true,
					stderr: []string{"Config invalid after MCP configure (mcp.servers.web.oauth.redirectUrl: "}},
				{args: []string{"mcp", "configure", "broken", "--enable", "--probe"}, code: 1, unchanged: true,
					stderr: []string{`MCP probe failed for "broken" in $OPENCLAW_HOME/.openclaw/openclaw.json: connect: `}},
				{args: []string{"mcp", "configure", "broken", "--enable"},
					stdout: []string{`Updated MCP server "broken" in $OPENCLAW_HOME/.openclaw/openclaw.json.`},
					show:   []string{"broken", `{`, `  "command": "/nonexistent/mcp-server"`, `}`}},
			},
		},
		{
			name:    "enabling a bare disabled override removes it",
			servers: map[string]any{"plugin-srv": map[string]any{"enabled": false}, "tiny": map[string]any{"command": c.tiny}},
			steps: []registryStep{
				{args: []string{"mcp", "configure", "plugin-srv", "--enable"},
					stdout: []string{`Removed disabled MCP override for "plugin-srv" in $OPENCLAW_HOME/.openclaw/openclaw.json.`}},
				{args: []string{"mcp", "show", "plugin-srv"}, code: 1},
				{args: []string{"mcp", "show", "tiny"}, stdout: []string{c.tiny}},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runSteps(t, c.newHome(t, sc.servers, nil), sc.steps)
		})
	}
}
