package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newMCPServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Serve OpenClaw Gateway conversations and approvals as MCP tools over stdio",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("not implemented yet")
		},
	}
}
