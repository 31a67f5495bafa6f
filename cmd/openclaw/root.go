package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "openclaw",
		Short:         "OpenClaw's MCP bridge in Go, with every security decision in a Wasm policy module",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("openclaw-go {{.Version}}\n")
	mcp := &cobra.Command{Use: "mcp", Short: "MCP server and client commands"}
	mcp.AddCommand(newMCPServeCmd())
	mcp.AddCommand(newMCPRegistryCmds()...)
	root.AddCommand(mcp, newGatewayCmd(), newPolicyCmd())
	return root
}
