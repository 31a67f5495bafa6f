//go:build linux

package main

import (
	"strings"
	"testing"
)

// TestMCPCallPrincipal runs `mcp tools` and `mcp call` against a server
// with the per-requester OAuth identity: the principal named by
// --principal lists and calls with its own tokens; without one, or with one
// that never logged in, the output says what to do.
func TestMCPCallPrincipal(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	f := newLoginFixture(t)
	writePerRequesterConfig(t, c, f)
	if stdout, stderr, code := login(t, c, "team", "--principal", "alice", "--timeout", "30s"); code != 0 {
		t.Fatalf("login team --principal alice: exit %d, %q\n%s", code, stdout, stderr)
	}

	stdout, stderr, code := c.run(t, "mcp", "call", "team__echo", "--principal", "alice")
	if code != 0 || strings.TrimSpace(stdout) != "protected ok" {
		t.Errorf("call --principal alice: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = c.run(t, "mcp", "tools", "--principal", "alice")
	if code != 0 || !strings.Contains(stdout, "team__echo") {
		t.Errorf("tools --principal alice: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// The auth profile is refused up front, naming the server.
	if !strings.Contains(stderr, `MCP server "prof" takes its OAuth credentials from OpenClaw auth profile "work"`) {
		t.Errorf("tools: no auth-profile refusal for prof in stderr:\n%s", stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no principal", []string{"mcp", "call", "team__echo"}, `MCP server "team" uses per-requester OAuth ("oauth": {"identity": "per-requester"}) and no principal was named to list its tools`},
		{"never logged in", []string{"mcp", "call", "team__echo", "--principal", "carol"}, `requires OAuth authorization for principal "carol". Run openclaw mcp login team --principal carol.`},
	} {
		stdout, stderr, code := c.run(t, tc.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 1 and %q", tc.name, code, stdout, stderr, tc.want)
		}
		if strings.Contains(stderr, "cli-access-") {
			t.Errorf("%s: a token reached stderr:\n%s", tc.name, stderr)
		}
	}
}
