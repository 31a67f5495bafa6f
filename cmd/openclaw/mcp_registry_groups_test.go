package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandGroups returns the command path (without "openclaw") of every
// command below the root that has subcommands: mcp, gateway, policy, …
func commandGroups(c *cobra.Command) []string {
	var out []string
	for _, sub := range c.Commands() {
		if sub.HasSubCommands() {
			out = append(out, strings.TrimPrefix(sub.CommandPath(), "openclaw "))
			out = append(out, commandGroups(sub)...)
		}
	}
	return out
}

// TestCommandGroupsRefuseUnknownSubcommands runs the real binary: in every
// command group an unknown subcommand is an error on stderr and exit 1,
// while the bare group still prints its help and exits 0.
func TestCommandGroupsRefuseUnknownSubcommands(t *testing.T) {
	t.Parallel()
	groups := commandGroups(newRootCmd())
	for _, want := range []string{"mcp", "gateway", "gateway approval", "policy", "completion"} {
		if !strings.Contains("\x00"+strings.Join(groups, "\x00")+"\x00", "\x00"+want+"\x00") {
			t.Errorf("command group %q not found among %q", want, groups)
		}
	}
	c := newRegistryCLI(t)
	for _, g := range groups {
		t.Run(strings.ReplaceAll(g, " ", "_"), func(t *testing.T) {
			t.Parallel()
			args := append(strings.Fields(g), "bogus")
			stdout, stderr, code := c.run(t, args...)
			want := `unknown command "bogus" for "openclaw ` + g + `"` + "\n"
			if code != 1 || stdout != "" || stderr != want {
				t.Errorf("openclaw %s bogus: exit %d, stdout %q, stderr %q; want exit 1, no stdout, stderr %q", g, code, stdout, stderr, want)
			}
			stdout, stderr, code = c.run(t, strings.Fields(g)...)
			if code != 0 || stderr != "" || !strings.Contains(stdout, "Available Commands:") || strings.Contains(stdout, "[flags]\n  openclaw") {
				t.Errorf("openclaw %s: exit %d, stderr %q, stdout:\n%s\nwant exit 0 and the group's help", g, code, stderr, stdout)
			}
		})
	}
	for _, tc := range []struct {
		args       []string
		wantStderr string
	}{
		{[]string{"policy", "reloadd"}, "unknown command \"reloadd\" for \"openclaw policy\"\n\nDid you mean this?\n\treload\n"},
		{[]string{"gateway", "status"}, "unknown command \"status\" for \"openclaw gateway\"\n"},
		{[]string{"bogus"}, "unknown command \"bogus\" for \"openclaw\"\n"},
	} {
		stdout, stderr, code := c.run(t, tc.args...)
		if code != 1 || stdout != "" || stderr != tc.wantStderr {
			t.Errorf("openclaw %s: exit %d, stdout %q, stderr %q; want exit 1, stderr %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.wantStderr)
		}
	}
	stdout, _, code := c.run(t, "gateway", "approval", "--help")
	for _, want := range []string{"Raise an exec approval request", "Raise a plugin approval request"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("openclaw gateway approval --help: exit %d, output lacks %q:\n%s", code, want, stdout)
		}
	}
}
