package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           commandName(),
		Short:         "OpenClaw's MCP bridge in Go, with every security decision in a Wasm policy module",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("openclaw-go {{.Version}}\n")
	mcp := &cobra.Command{Use: "mcp", Short: "MCP server and client commands"}
	mcp.AddCommand(newMCPServeCmd(), newMCPProxyCmd())
	mcp.AddCommand(newMCPRegistryCmds()...)
	mcp.AddCommand(newMCPToolsCmd(), newMCPCallCmd(), newMCPTrustCmd())
	mcp.AddCommand(newMCPProbeCmd(), newMCPAddCmd(), newMCPConfigureCmd(), newMCPReloadCmd())
	root.AddCommand(mcp, newGatewayCmd(), newPolicyCmd(), newVersionCmd(), newGenManCmd())
	// Cobra adds its completion group at Execute; add it now so that it is
	// made strict too.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		strictGroups(c)
	}
	registerCompletions(root)
	return root
}

// strictGroups makes c, and every command group below it, refuse an unknown
// subcommand. Cobra checks subcommand names only on the root: a group
// without a Run of its own would print its help and exit 0 for
// `openclaw mcp bogus`. A group now fails with `unknown command "bogus" for
// "openclaw mcp"` (and cobra's "Did you mean this?" suggestions), exit 1;
// run with no arguments it still prints its help and exits 0.
func strictGroups(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = unknownSubcommand
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		// A Run makes cobra list "openclaw mcp [flags]" as a usage line;
		// the bare group name is what it actually accepts.
		c.DisableFlagsInUseLine = true
	}
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
}

// unknownSubcommand is the Args check of a command group: any positional
// argument is a subcommand that does not exist. The message is cobra's own
// for the root command.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "unknown command %q for %q", args[0], cmd.CommandPath())
	if !cmd.DisableSuggestions {
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			b.WriteString("\n\nDid you mean this?\n")
			for _, name := range s {
				fmt.Fprintf(&b, "\t%s\n", name)
			}
		}
	}
	return &exitError{code: 1, err: fmt.Errorf("%s", strings.TrimSuffix(b.String(), "\n"))}
}

// commandName is the root command's name: "openclaw", or "openclaw-go"
// when the binary is installed under that name (as the README suggests
// beside OpenClaw's own), so that shell completion scripts and help name
// the command the user types.
func commandName() string {
	if strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == "openclaw-go" {
		return "openclaw-go"
	}
	return "openclaw"
}
