package main

//lint:file-ignore ST1005 these errors are OpenClaw's CLI messages, whole sentences printed to the user as they are (capitals and full stops included)

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/internal/exepages"
	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/bridge"
	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/transport"
)

// envDeviceIdentity names a device identity file ({deviceId, publicKeyPem,
// privateKeyPem}) to connect with instead of our own; see RATIONALE.
const envDeviceIdentity = "OPENCLAW_DEVICE_IDENTITY"

// serveConfig is what `mcp serve` flags bind to.
type serveConfig struct {
	target      config.Flags
	channelMode string
	verbose     bool
	policy      policyFlags
	// metricsListen is --metrics-listen HOST:PORT (loopback); "" serves
	// no /metrics.
	metricsListen string
}

func newMCPServeCmd() *cobra.Command {
	var c serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve OpenClaw Gateway conversations and approvals as MCP tools over stdio",
		Long: `Serve runs an MCP server on stdin/stdout for an MCP client to spawn. It connects to an
OpenClaw Gateway over WebSocket and exposes its routed conversations, live events and pending
approvals as nine tools, exactly as OpenClaw's own "openclaw mcp serve". Every tool call passes
the before_tool_call policy chain first. Logs go to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), &c, cmd.Flags().Changed("token"), os.Stdin, os.Stdout, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.target.URL, "url", "", "Gateway WebSocket URL (default: $OPENCLAW_GATEWAY_URL, then openclaw.json, then ws://127.0.0.1:18789)")
	f.StringVar(&c.target.Token, "token", "", "Gateway token (visible in the process list: prefer --token-file)")
	f.StringVar(&c.target.TokenFile, "token-file", "", "read the Gateway token from this file")
	f.StringVar(&c.target.Password, "password", "", "Gateway password")
	f.StringVar(&c.target.PasswordFile, "password-file", "", "read the Gateway password from this file")
	f.StringVar(&c.channelMode, "claude-channel-mode", "auto", "Claude channel notifications: auto, on or off")
	f.BoolVarP(&c.verbose, "verbose", "v", false, "log more on stderr")
	f.StringArrayVar(&c.policy.files, "policy", nil, "policy module FILE.wasm for before_tool_call (repeatable, runs in order)")
	f.StringVar(&c.policy.config, "policy-config", "", "policy file (JSON) listing modules, their config and mode")
	c.policy.bundle.register(f)
	f.StringVar(&c.policy.auditLog, "audit-log", "", `decision audit log (JSON Lines); "-" for stderr (default: <state dir>/openclaw-go/policy-audit.jsonl)`)
	f.StringVar(&c.metricsListen, "metrics-listen", "", "serve Prometheus /metrics (the policy bundle's series) on HOST:PORT, a loopback address, e.g. 127.0.0.1:9464")
	return cmd
}

// failStart is OpenClaw's fatal startup message (docs/protocol-facts.md, Failure and shutdown), exit code 1.
func failStart(err error) error {
	return &exitError{code: 1, err: fmt.Errorf("MCP server failed to start: %s.", strings.TrimSuffix(err.Error(), "."))}
}

// failGateway is failStart for a Gateway that is unreachable or refuses
// us, with a hint on what to check. (OpenClaw's hint names `openclaw
// gateway status`, a command this binary does not have.)
func failGateway(err error, url string) error {
	return &exitError{code: 1, err: fmt.Errorf("MCP server failed to start: %s.\n"+
		"Check that an OpenClaw Gateway is running at %s and that the token or password is its gateway.auth one "+
		"(--url, --token-file or --password-file; OPENCLAW_GATEWAY_URL, OPENCLAW_GATEWAY_TOKEN).",
		strings.TrimSuffix(err.Error(), "."), redact.URL(url))}
}

func runServe(ctx context.Context, c *serveConfig, tokenOnCommandLine bool, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime}))
	if tokenOnCommandLine {
		fmt.Fprintln(stderr, "Warning: --token is visible to other local users in the process list; prefer --token-file or OPENCLAW_GATEWAY_TOKEN.")
	}
	mode, err := bridge.ParseChannelMode(c.channelMode)
	if err != nil {
		return failStart(err)
	}
	if c.metricsListen != "" {
		metrics, err := listenMetrics("--metrics-listen", c.metricsListen)
		if err != nil {
			return failStart(err)
		}
		defer metrics.Close()
		c.policy.bundleMetrics = metrics.bundle
		metrics.serve(stderr, logger)
	}
	cfgPath, err := config.Path()
	if err != nil {
		return failStart(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return failStart(err)
	}
	target, err := config.Resolve(c.target, cfg, os.Getenv)
	if err != nil {
		return failStart(err)
	}
	// Refuse a plaintext URL before anything is started or sent, as
	// OpenClaw does when it resolves the Gateway target.
	if err := gwclient.CheckSecureURL(target.URL, os.Getenv(gwclient.EnvAllowInsecurePrivateWS) == "1"); err != nil {
		return failStart(err)
	}
	warnReadableSecretFile(stderr, "--token-file", c.target.TokenFile)
	warnReadableSecretFile(stderr, "--password-file", c.target.PasswordFile)
	identity, err := deviceIdentity(logger)
	if err != nil {
		return failStart(err)
	}
	// Last: from here on every exit path closes the policies (or at least
	// removes the run file `openclaw policy reload` finds this process by).
	c.policy.verbose = c.verbose
	pol, err := startPolicies(ctx, c.policy, "mcp serve", stderr)
	if err != nil {
		return failStart(err)
	}

	var b *bridge.Bridge
	out := &gateWriter{w: stdout}
	connected := make(chan struct{})
	var connectedOnce sync.Once
	gwOpts := &gwclient.Options{
		URL:            target.URL,
		Token:          target.Token,
		Password:       target.Password,
		TLSFingerprint: target.TLSFingerprint,
		Identity:       identity,
		ClientVersion:  version,
		Logger:         logger,
		OnEvent:        func(name string, payload json.RawMessage) { b.HandleGatewayEvent(name, payload) },
		// A fatal first connect ends the process without answering the
		// calls that wait for the Gateway, as OpenClaw does (docs/protocol-facts.md, Failure and shutdown).
		// (initialize itself is still answered first, as in OpenClaw.)
		OnFatal: func(error) {
			// A client writes initialize right after spawning us: give it a
			// moment to arrive, then let its answer out before sealing.
			select {
			case <-b.InitializeRead():
				select {
				case <-b.InitializeAnswered():
				case <-time.After(2 * time.Second):
				}
			case <-time.After(250 * time.Millisecond):
			}
			out.seal()
		},
		OnStateChange: func(s gwclient.StateChange) {
			switch s.State {
			case gwclient.StateConnected:
				connectedOnce.Do(func() { close(connected) })
				logger.Debug("gateway connected", "url", redact.URL(target.URL))
			case gwclient.StateDisconnected:
				logger.Warn("gateway connection lost; reconnecting", "err", s.Err)
			case gwclient.StateReconnecting:
				logger.Debug("gateway reconnect scheduled", "delay", s.Delay, "err", s.Err)
			}
		},
	}
	client := gwclient.New(gwOpts)
	raiser := gwclient.NewApprovalRaiser(gwOpts)
	b = bridge.New(client, &bridge.Options{
		ClaudeChannelMode: mode,
		Enforcer:          pol,
		Limiter:           pol,
		Logger:            logger,
		Verbose:           c.verbose,
		ServerVersion:     version,
		ApprovalDecider:   pol,
		ApprovalRaiser:    raiser,
		Audit:             pol.AuditSink(),
	})

	// The MCP transport starts first so initialize is answered before the
	// Gateway is reachable, as OpenClaw does (docs/protocol-facts.md, mcp serve lifecycle). Neither it nor the
	// Gateway client runs on ctx: a signal ends them through the shutdown
	// below, which lets the answers that are ready out first.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	served := make(chan error, 1)
	// A malformed stdin line is answered and logged; it does not end the session.
	stdio := transport.NewServeStdioTransport(stdin, out, &transport.ServeStdioOptions{Logger: logger, DrainTimeout: serveDrainTimeout})
	go func() { served <- b.Serve(life, stdio) }()
	gwDone := make(chan error, 1)
	go func() { gwDone <- client.Run(life) }()
	go afterStartUp(life, logger, b.InitializeAnswered(), connected)

	// shutdown releases everything a call may wait on, as OpenClaw does on
	// stdin EOF or a signal (docs/protocol-facts.md, Failure and shutdown): events_wait answers event:null, an
	// approval being raised on the Gateway ends, calls waiting for the
	// Gateway or its answer fail at once. The drain then writes those
	// answers and the session ends.
	shutdown := func() {
		_ = b.Close()
		_ = raiser.Close()
		_ = client.Close()
	}
	var serveErr error
	select {
	case <-stdio.EOF():
		// The MCP client closed stdin: nothing more can arrive.
		shutdown()
		serveErr = <-served
	case <-ctx.Done():
		// SIGINT or SIGTERM: refuse new requests, answer those in flight.
		stdio.Shutdown()
		shutdown()
		serveErr = <-served
	case serveErr = <-served:
		// The transport failed.
		shutdown()
	case gwErr := <-gwDone:
		// Run ends by itself only on a fatal first connection. stdout is
		// sealed; the policies stay loaded until the process exits, so no
		// in-flight call sees them closed, but the process no longer
		// takes reloads.
		if pol.reg != nil {
			_ = pol.reg.remove()
		}
		var re *protocol.RequestError
		if errors.As(gwErr, &re) {
			fmt.Fprintf(stderr, "gateway connect failed: GatewayClientRequestError: %s\n", re.Message)
		}
		if gwErr == nil {
			gwErr = errors.New("gateway client stopped")
		}
		return failGateway(gwErr, target.URL)
	}
	stop()
	<-gwDone
	_ = pol.Close(context.WithoutCancel(ctx))
	switch {
	case errors.Is(serveErr, transport.ErrDrainTimeout):
		logger.Warn("openclaw mcp: exiting with calls unanswered", "err", serveErr)
		return nil
	case serveErr != nil:
		return &exitError{code: 1, err: fmt.Errorf("openclaw mcp: %w", serveErr)}
	}
	return nil
}

// afterStartUp waits until the start-up of `mcp serve` is over (initialize
// answered, the Gateway connected for the first time), then drops the
// resident pages of this executable that only the start-up used and keeps
// the rest from coming back as whole large folios (exepages.UseBasePages;
// docs/RATIONALE.md, "Why does mcp serve split the mappings of its own code?").
// A failure is logged at debug level: it changes only the resident size.
func afterStartUp(ctx context.Context, logger *slog.Logger, steps ...<-chan struct{}) {
	for _, c := range steps {
		select {
		case <-c:
		case <-ctx.Done():
			return
		}
	}
	r, err := exepages.UseBasePages()
	logger.Debug("executable mapped in base pages", "mappings", r.Mappings, "dropped_kib", r.DroppedKiB, "err", err)
}

// serveDrainTimeout bounds the drain after stdin EOF or a signal. Once
// shutdown released every wait, calls answer at once; the bound only keeps
// a call stuck elsewhere (a policy module, an MCP client that never
// answers an elicitation) from holding the process.
const serveDrainTimeout = 5 * time.Second

// gateWriter passes writes to w until sealed; after that it drops them
// (reporting success, so the MCP SDK does not log write errors).
type gateWriter struct {
	mu     sync.Mutex
	w      io.Writer
	sealed bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sealed {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gateWriter) Close() error {
	if c, ok := g.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (g *gateWriter) seal() {
	g.mu.Lock()
	g.sealed = true
	g.mu.Unlock()
}

// deviceIdentity loads the identity the bridge signs its connect with:
// $OPENCLAW_DEVICE_IDENTITY when set (it must exist), else our own file in
// the state folder, created on first use. When the state folder is not
// writable, an ephemeral identity is used, with a warning.
func deviceIdentity(logger *slog.Logger) (*protocol.DeviceIdentity, error) {
	if p := os.Getenv(envDeviceIdentity); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", envDeviceIdentity, err)
		}
		id, err := protocol.ParseDeviceIdentity(data)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", envDeviceIdentity, p, err)
		}
		return id, nil
	}
	dir, err := config.StateDir()
	if err == nil {
		var id *protocol.DeviceIdentity
		path := filepath.Join(dir, "openclaw-go", "device-identity.json")
		if id, err = protocol.LoadOrCreateDeviceIdentity(path); err == nil {
			return id, nil
		}
	}
	logger.Warn("using an ephemeral device identity", "err", err)
	return protocol.NewDeviceIdentity()
}

// warnReadableSecretFile warns on stderr when the secret file at path
// (given with flag) can be read by other users: the README asks for a file
// readable only by its owner. A file that cannot be read is reported by
// config.Resolve, not here.
func warnReadableSecretFile(stderr io.Writer, flag, path string) {
	if path == "" || runtime.GOOS == "windows" {
		return
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o044 == 0 {
		return
	}
	fmt.Fprintf(stderr, "Warning: %s %s is readable by other users (mode %04o); make it readable only by you: chmod 600 %s\n",
		flag, path, fi.Mode().Perm(), path)
}

// newLogger returns the stderr logger of a long-running command at level:
// with asJSON, one JSON object a line (time, level, msg and the
// attributes, by slog.JSONHandler; durations as Go duration strings such
// as "10s"); else slog's text lines without the time, which the MCP
// client adds.
func newLogger(w io.Writer, level slog.Level, asJSON bool) *slog.Logger {
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: dropTime}))
}

// durationText writes a duration attribute as text ("1.5s"), as the text
// handler does, rather than as a count of nanoseconds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// dropTime removes slog's time attribute: the MCP client timestamps stderr.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
