// Command openclaw is the openclaw-go binary: `openclaw mcp serve` (the MCP
// server bridged to an OpenClaw Gateway), the embedded client runtime's
// `openclaw mcp …` commands, `openclaw gateway run` (a local Gateway for
// development, tests and the demo) and `openclaw policy …`.
//
// It implements OpenClaw's `mcp` commands; it does not replace OpenClaw.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is the version openclaw-go reports, without a leading "v": set at
// build time with -ldflags "-X main.version=…", else resolved by init from
// the build info or the VERSION file (buildVersion).
var version string

func init() { version = buildVersion(version) }

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	hideFromSameUser()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(code)
}
