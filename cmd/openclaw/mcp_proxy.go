package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/proxy"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// proxyDefaultModules are the modules loaded when neither --policy nor
// --policy-config names one: the default ruleset (allow and audit every
// call), OpenClaw's tool names (the runtime needs sanitize_tool_names), and
// decide_approval's "ask a human".
var proxyDefaultModules = []string{"builtin:rules", "builtin:sanitizer", "builtin:approvals"}

// proxyConfig is what `mcp proxy` flags bind to.
type proxyConfig struct {
	verbose bool
	policy  policyFlags
}

func newMCPProxyCmd() *cobra.Command {
	c := proxyConfig{policy: policyFlags{defaults: proxyDefaultModules}}
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Serve the tools of every configured MCP server as one MCP server over stdio",
		Long: `Proxy connects to the MCP servers of mcp.servers in openclaw.json and serves their tools,
named server__tool, as one MCP server on stdin/stdout for an MCP client to spawn. Every tool call
passes the before_tool_call policies first (surface "proxy", the client's clientInfo as caller);
a blocked call is answered as a tool error with the policy's reason. Logs go to stderr. The
proxy exits when stdin closes, stopping every server it started.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProxy(cmd.Context(), &c, os.Stdin, os.Stdout, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&c.verbose, "verbose", "v", false, "log more on stderr")
	f.StringArrayVar(&c.policy.files, "policy", nil, "policy module FILE.wasm for before_tool_call (repeatable, runs in order)")
	f.StringVar(&c.policy.config, "policy-config", "", "policy file (JSON) listing modules, their config and mode")
	f.StringVar(&c.policy.auditLog, "audit-log", "", `decision audit log (JSON Lines); "-" for stderr (default: <state dir>/openclaw-go/policy-audit.jsonl)`)
	return cmd
}

// runProxy serves the runtime catalog on stdin/stdout until stdin ends or
// ctx is done, then closes the runtime (no server child survives) and the
// policies.
func runProxy(ctx context.Context, c *proxyConfig, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime}))
	cfgPath, err := config.Path()
	if err != nil {
		return failStart(err)
	}
	doc, err := config.LoadDocument(cfgPath)
	if err != nil {
		return failStart(err)
	}
	resolved, diags := doc.ResolveServers()
	for _, d := range diags {
		logger.Warn("MCP server skipped", "err", d)
	}
	pol, err := startPolicies(ctx, c.policy, "mcp proxy", stderr)
	if err != nil {
		return failStart(err)
	}
	defer func() { _ = pol.Close(context.WithoutCancel(ctx)) }()

	sess, err := runtime.New(runtime.ServersFromConfig(resolved), &runtime.Options{
		Enforcer:  pol,
		Sanitizer: pol,
		Approvals: pol,
		Surface:   policies.SurfaceProxy,
		Caller:    policies.Caller{Name: "openclaw-mcp-proxy", Version: version},
		Logger:    logger,
		OnEvent: func(ev runtime.Event) {
			switch ev.Kind {
			case runtime.EventFailed, runtime.EventPaused:
				logger.Warn("MCP server "+string(ev.Kind), "server", ev.Server, "err", ev.Err)
			default:
				logger.Debug("MCP server "+string(ev.Kind), "server", ev.Server)
			}
		},
	})
	if err != nil {
		return failStart(err)
	}
	// Close stops every server child, whatever ends the proxy.
	defer func() {
		if err := sess.Close(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("closing the MCP servers", "err", err)
		}
	}()
	if err := sess.Connect(ctx); err != nil {
		return failStart(err)
	}
	p, err := proxy.New(ctx, sess, &proxy.Options{Name: "openclaw-go-proxy", Version: version, Logger: logger})
	if err != nil {
		return failStart(err)
	}
	logger.Info("openclaw mcp proxy: serving on stdio", "tools", len(p.Tools()))
	// A malformed stdin line is answered and logged; it does not end the session.
	stdio := transport.NewServeStdioTransport(stdin, stdout, &transport.ServeStdioOptions{Logger: logger})
	if err := p.Server().Run(ctx, stdio); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return &exitError{code: 1, err: fmt.Errorf("openclaw mcp proxy: %w", err)}
	}
	return nil
}
