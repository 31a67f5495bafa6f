package main

import "github.com/spf13/cobra"

// newGatewayCmd is the `openclaw gateway` command group (local Gateway).
func newGatewayCmd() *cobra.Command {
	return &cobra.Command{Use: "gateway", Short: "Run and drive a local OpenClaw-protocol Gateway"}
}
