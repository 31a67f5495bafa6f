package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/decisionlog"
	"github.com/openclaw-go/openclaw/proxy"
	"github.com/openclaw-go/openclaw/proxy/sharedstate"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// proxyDefaultModules are the modules loaded when neither --policy nor
// --policy-config names one: the default ruleset (allow and audit every
// call), OpenClaw's tool names (the runtime needs sanitize_tool_names), and
// decide_approval's "ask a human".
var proxyDefaultModules = []string{"builtin:rules", "builtin:sanitizer", "builtin:approvals"}

// proxyTokenEnv names the environment variable that holds the bearer
// token when --token-file is not given.
const proxyTokenEnv = "OPENCLAW_MCP_TOKEN"

// proxyStateEnv names the environment variable that holds the --state URL
// when the flag is not given (a Redis password then stays out of the
// process's command line).
const proxyStateEnv = "OPENCLAW_MCP_STATE"

// proxyConfig is what `mcp proxy` flags bind to.
type proxyConfig struct {
	verbose bool
	policy  policyFlags

	listen          string        // --listen HOST:PORT; "" serves stdio
	metricsListen   string        // --metrics-listen HOST:PORT (stdio mode)
	tokenFile       string        // --token-file FILE
	tokensFile      string        // --tokens-file FILE
	authIssuer      string        // --auth-issuer URL
	authAudience    string        // --auth-audience URL
	authScopes      []string      // --auth-scope, repeatable
	authCallScopes  []string      // --auth-call-scope, repeatable
	authClaims      []string      // --auth-claim, repeatable
	authLeeway      time.Duration // --auth-leeway
	confine         confineFlags  // --confine-stdio, --confine-protect
	pins            pinFlags      // --tool-pins, --tool-pins-mode
	noAuth          bool          // --no-auth (loopback only)
	allowOrigins    []string      // --allow-origin, repeatable
	allowedHosts    []string      // --allowed-host, repeatable
	headerTimeout   time.Duration // --read-header-timeout
	bodyTimeout     time.Duration // --body-timeout
	maxConns        int           // --max-connections
	maxSessions     int           // --max-sessions
	sessionIdle     time.Duration // --session-idle-timeout
	shutdownTimeout time.Duration // --shutdown-timeout
	upstreamProto   string        // --upstream-protocol
	maxMessage      int64         // --max-message-bytes
	connectWait     time.Duration // --connect-wait
	stateKeyFile    string        // --request-state-key-file FILE
	logFormat       string        // --log-format text|json
	tracing         tracingFlags  // --otlp-endpoint
	state           string        // --state redis://…: shared state of replicas
}

// defaultConnectWait is how long the proxy waits for the servers before it
// serves: a server that answers later joins with list_changed.
const defaultConnectWait = 3 * time.Second

// defaultUpstreamProtocol is the MCP revision the proxy offers the servers
// it fronts. On 2026-07-28 a server may not send requests (sampling,
// elicitation, roots) or log messages during a call and returns input
// requests (SEP-2322) instead, which the proxy relays; servers written for
// the older revision (the go-sdk conformance fixture among them) then fail
// such a call rather than ask. On 2025-11-25 everything passes through.
// Clients reach the proxy on either revision (docs/RATIONALE.md, "Why does
// the runtime offer 2026-07-28 by default?").
const defaultUpstreamProtocol = "2025-11-25"

// knownUpstreamProtocols are the MCP revisions --upstream-protocol takes
// (besides "", the newest the go-sdk speaks), oldest first.
var knownUpstreamProtocols = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

// sessionIdleOption is HTTPOptions.SessionIdleTimeout for the flag value
// d, where 0 keeps idle sessions.
func sessionIdleOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// checkProxyFlags refuses flag values that cannot work: an MCP revision
// the proxy does not know, a shutdown timeout that is not positive.
func checkProxyFlags(c *proxyConfig) error {
	if c.upstreamProto != "" && !slices.Contains(knownUpstreamProtocols, c.upstreamProto) {
		return usage("--upstream-protocol %q: not an MCP revision this proxy speaks; want one of %s", c.upstreamProto, strings.Join(knownUpstreamProtocols, ", "))
	}
	if c.shutdownTimeout <= 0 {
		return usage("--shutdown-timeout %v: want a positive duration, e.g. 10s", c.shutdownTimeout)
	}
	if c.sessionIdle < 0 {
		return usage("--session-idle-timeout %v: want a duration of 0 (keep idle sessions) or more, e.g. 10m", c.sessionIdle)
	}
	if c.logFormat != "" && c.logFormat != "text" && c.logFormat != "json" {
		return usage("--log-format %q: want text or json", c.logFormat)
	}
	if c.connectWait < 0 {
		return usage("--connect-wait %v: want a duration of 0 (wait for every server) or more, e.g. 3s", c.connectWait)
	}
	for flag, d := range map[string]time.Duration{"--read-header-timeout": c.headerTimeout, "--body-timeout": c.bodyTimeout} {
		if d <= 0 {
			return usage("%s %v: want a positive duration, e.g. 10s", flag, d)
		}
	}
	for flag, n := range map[string]int{"--max-connections": c.maxConns, "--max-sessions": c.maxSessions} {
		if n <= 0 {
			return usage("%s %d: want a positive number", flag, n)
		}
	}
	if c.maxMessage <= 0 || c.maxMessage > math.MaxInt32 {
		return usage("--max-message-bytes %d: want a positive size in bytes up to %d", c.maxMessage, math.MaxInt32)
	}
	return nil
}

func newMCPProxyCmd() *cobra.Command {
	c := proxyConfig{policy: policyFlags{defaults: proxyDefaultModules, naming: namingModule}}
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Serve the tools of every configured MCP server as one MCP server, over stdio or HTTP",
		Long: `Proxy connects to the MCP servers of mcp.servers in openclaw.json and serves their tools,
named server__tool, as one MCP server. Every tool call passes the before_tool_call policies first
(surface "proxy", the client's clientInfo as caller); a blocked call is answered as a tool error
with the policy's reason. Logs go to stderr.

Without --listen it serves stdin/stdout for an MCP client to spawn, and exits when stdin closes,
once the requests it read are answered (a request it relayed to the client then fails at once).
With --listen HOST:PORT (e.g. 127.0.0.1:8765) it serves streamable HTTP on /mcp, legacy SSE on
/sse, /healthz and Prometheus /metrics. /mcp, /sse and /metrics need "Authorization: Bearer
TOKEN": the token is read from --token-file, else from $OPENCLAW_MCP_TOKEN, else generated and
printed once on stderr. --no-auth turns the token off, on a loopback address only.
--tokens-file names further static tokens, each an identity (CI jobs, service accounts);
--auth-issuer and --auth-audience make the proxy an OAuth 2.1 resource server that accepts the
issuer's JWT access tokens and serves /.well-known/oauth-protected-resource, so that MCP clients
log in by themselves. An identity reaches the policies (before_tool_call and decide_approval
inputs, "identity") and the audit log, and owns the MCP sessions it opens. A request
from a browser page of another site (an Origin that is not loopback, the listen host or an
--allow-origin) is refused, and so is one whose Host is not loopback, the listen host, the
address reached or an --allowed-host, on every path (DNS rebinding). Slow or idle clients are
cut off (--read-header-timeout, --body-timeout), connections and MCP sessions are capped
(--max-connections, --max-sessions), and a session idle for --session-idle-timeout is closed. SIGINT/SIGTERM stop accepting (over stdio, new requests are refused),
let calls in flight finish and write their answers (up to --shutdown-timeout), then stop every
server the proxy started. Over HTTP, /readyz answers 503 from the signal on and a new session
(initialize) is refused with 503 and Retry-After, so that a load balancer sends it to another
replica, while the sessions already open are served until no request is in flight.
--log-format json writes the log as JSON lines. --otlp-endpoint (or the OTEL_EXPORTER_OTLP_*
variables) sends OpenTelemetry traces over OTLP/HTTP: a span per MCP request, with children for
each policy module and the upstream call (docs/tracing.md). --state redis://HOST:PORT/DB makes
replicas behind a load balancer share state in Redis: the rate-limit counters, the MCP sessions (a
replica takes over a session another opened), reloads (openclaw mcp reload or a policy swap on
one replica reloads every one) and the upstream OAuth tokens of per-requester servers, encrypted
under --request-state-key-file (openclaw mcp login --state); see docs/proxy.md and docs/replicas.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProxy(cmd.Context(), &c, os.Stdin, os.Stdout, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&c.verbose, "verbose", "v", false, "log more on stderr")
	f.StringVar(&c.logFormat, "log-format", "text", "format of the log on stderr: text, or json (one JSON object a line: time, level, msg and the attributes)")
	f.StringArrayVar(&c.policy.files, "policy", nil, "policy module FILE.wasm for before_tool_call (repeatable, runs in order)")
	f.StringVar(&c.policy.config, "policy-config", "", "policy file (JSON) listing modules, their config and mode")
	c.policy.bundle.register(f)
	c.confine.register(f)
	c.pins.register(f)
	c.tracing.register(f)
	f.StringVar(&c.policy.auditLog, "audit-log", "", `decision audit log (JSON Lines); "-" for stderr (default: <state dir>/openclaw-go/policy-audit.jsonl)`)
	f.StringVar(&c.listen, "listen", "", "serve streamable HTTP (/mcp) and legacy SSE (/sse) on HOST:PORT, e.g. 127.0.0.1:8765 (default: stdio)")
	f.StringVar(&c.metricsListen, "metrics-listen", "", "in stdio mode, serve /metrics and /healthz on HOST:PORT (loopback)")
	f.StringVar(&c.tokenFile, "token-file", "", "file holding the bearer token for HTTP (default: $"+proxyTokenEnv+", else generated and printed once)")
	f.StringVar(&c.tokensFile, "tokens-file", "", `JSON file of further bearer tokens, each naming an identity for policies and audit: {"tokens":[{"name":"ci-deploy","sha256":"<hex>","scopes":["mcp"],"claims":{"groups":["ci"]}}]}`)
	f.StringVar(&c.authIssuer, "auth-issuer", "", "be an OAuth 2.1 resource server: accept JWT access tokens of this issuer (OpenID Connect discovery), e.g. https://idp.example.com")
	f.StringVar(&c.authAudience, "auth-audience", "", "with --auth-issuer: this proxy's public URL, which a token's aud must contain, e.g. https://mcp.example.com/mcp")
	f.StringArrayVar(&c.authScopes, "auth-scope", nil, "scope every identified token must carry for any MCP request (repeatable)")
	f.StringArrayVar(&c.authCallScopes, "auth-call-scope", nil, "scope an identified token must carry, besides --auth-scope, for tools/call (repeatable)")
	f.StringArrayVar(&c.authClaims, "auth-claim", nil, "access-token claim passed to policies and audit beside iss, sub, client_id and scopes, e.g. groups (repeatable)")
	f.DurationVar(&c.authLeeway, "auth-leeway", proxy.DefaultLeeway, "clock skew allowed on a token's exp, nbf and iat")
	f.BoolVar(&c.noAuth, "no-auth", false, "serve HTTP without a bearer token (refused unless the listen address is loopback)")
	f.StringArrayVar(&c.allowOrigins, "allow-origin", nil, "also accept requests from this browser Origin, e.g. https://app.example.com (repeatable)")
	f.StringArrayVar(&c.allowedHosts, "allowed-host", nil, "also accept requests whose Host header names this host, e.g. a load balancer's or Prometheus's name for the proxy (repeatable; no port)")
	f.DurationVar(&c.headerTimeout, "read-header-timeout", proxy.DefaultReadHeaderTimeout, "how long a client may take to send a request's headers")
	f.DurationVar(&c.bodyTimeout, "body-timeout", proxy.DefaultBodyTimeout, "how long a client may take to send a POST body, after its headers (later: 408)")
	f.IntVar(&c.maxConns, "max-connections", proxy.DefaultMaxConnections, "connections open at once; one more is answered 503 and closed")
	f.IntVar(&c.maxSessions, "max-sessions", proxy.DefaultMaxSessions, "MCP sessions open at once; an initialize over it is answered 503")
	f.DurationVar(&c.sessionIdle, "session-idle-timeout", proxy.DefaultSessionIdleTimeout, "close a streamable HTTP session with no request in flight and no GET stream open for this long; its client gets 404 and starts a new one (0: keep idle sessions)")
	f.DurationVar(&c.shutdownTimeout, "shutdown-timeout", proxy.DefaultShutdownTimeout, "on SIGINT/SIGTERM, how long calls in flight may take to finish")
	f.DurationVar(&c.connectWait, "connect-wait", defaultConnectWait, "at start, how long to wait for the MCP servers before serving; a server that answers later joins with notifications/tools/list_changed (0: wait for every server, each bounded by its connectionTimeoutMs)")
	f.Int64Var(&c.maxMessage, "max-message-bytes", proxy.DefaultMaxMessageBytes, "largest message a client may send, in bytes: one HTTP POST body (larger: 413) or one stdin line (larger: a parse error)")
	f.StringVar(&c.upstreamProto, "upstream-protocol", defaultUpstreamProtocol, `MCP revision offered to the servers: 2025-11-25 lets them send sampling, elicitation, roots and log requests during a call; on 2026-07-28 (or "", the newest the go-sdk speaks) they return input requests instead, which the proxy relays to its clients`)
	f.StringVar(&c.state, "state", "", "share the state of replicas (rate-limit counters, MCP sessions, reloads, per-requester OAuth tokens) in Redis or Valkey: redis://[user:password@]HOST:PORT/DB, rediss://… for TLS (default: in this process)")
	f.StringVar(&c.stateKeyFile, "request-state-key-file", "", fmt.Sprintf("file holding the key (at least %d bytes; surrounding whitespace trimmed) that seals the requestState handed to MCP 2026-07-28 clients with input requests: replicas that share it resume each other's requests; with --state it also encrypts the per-requester OAuth tokens in Redis (default: a random key per process)", proxy.MinStateKeyBytes))
	return cmd
}

// readStateKey reads --request-state-key-file: nil without one (the proxy
// then makes a random key), else the file's bytes, trimmed, of which there
// must be at least proxy.MinStateKeyBytes.
func readStateKey(file string) ([]byte, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usage("--request-state-key-file: %v", err)
	}
	if key := bytes.TrimSpace(b); len(key) >= proxy.MinStateKeyBytes {
		warnReadableSecretFile(os.Stderr, "--request-state-key-file", file)
		return key, nil
	}
	return nil, usage("--request-state-key-file %s: the key has %d bytes, it needs at least %d (e.g. openssl rand -base64 48 > %s)", file, len(bytes.TrimSpace(b)), proxy.MinStateKeyBytes, file)
}

// proxyHTTP is the resolved HTTP side of `mcp proxy`: where to listen,
// with which token.
type proxyHTTP struct {
	addr        string // HOST:PORT
	host        string
	metricsOnly bool   // --metrics-listen in stdio mode
	token       string // "" with --no-auth, or when identities are configured without --token-file
	generated   bool   // token made here: print it once
	tokens      []proxy.StaticToken
}

// usage is an exitError for flags that cannot work (exit code 2).
func usage(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf("openclaw mcp proxy: "+format, args...)}
}

// resolveHTTP checks the HTTP flags and finds the token (--token-file,
// else $OPENCLAW_MCP_TOKEN, else a new one). It returns nil in plain
// stdio mode.
func resolveHTTP(c *proxyConfig, getenv func(string) string) (*proxyHTTP, error) {
	httpOnly := c.tokenFile != "" || c.noAuth || len(c.allowOrigins) > 0 || len(c.allowedHosts) > 0
	identities := c.tokensFile != "" || c.authIssuer != ""
	authFlags := identities || c.authAudience != "" || len(c.authScopes) > 0 || len(c.authCallScopes) > 0 || len(c.authClaims) > 0
	switch {
	case authFlags && c.listen == "":
		return nil, usage("--tokens-file and the --auth-* flags need --listen")
	case (c.authIssuer == "") != (c.authAudience == ""):
		return nil, usage("--auth-issuer and --auth-audience go together: the issuer whose tokens are accepted, and this proxy's URL they must be for")
	case c.authIssuer == "" && len(c.authClaims) > 0:
		return nil, usage("--auth-claim needs --auth-issuer")
	case !identities && (len(c.authScopes) > 0 || len(c.authCallScopes) > 0):
		return nil, usage("--auth-scope and --auth-call-scope apply to tokens that name identities: give --auth-issuer or --tokens-file")
	case identities && c.noAuth:
		return nil, usage("--no-auth contradicts --tokens-file and --auth-issuer")
	}
	switch {
	case c.listen != "" && c.metricsListen != "":
		return nil, usage("--metrics-listen is for stdio mode; with --listen, /metrics is served on %s", c.listen)
	case c.listen == "" && c.metricsListen == "":
		if httpOnly {
			return nil, usage("--token-file, --no-auth, --allow-origin and --allowed-host need --listen (or --metrics-listen)")
		}
		return nil, nil
	case c.noAuth && c.tokenFile != "":
		return nil, usage("--no-auth and --token-file contradict each other")
	}
	ph := &proxyHTTP{addr: c.listen, metricsOnly: c.listen == ""}
	flag := "--listen"
	if ph.metricsOnly {
		ph.addr, flag = c.metricsListen, "--metrics-listen"
	}
	host, err := listenHost(flag, ph.addr)
	if err != nil {
		return nil, usage("%v", err)
	}
	ph.host = host
	loopback := proxy.IsLoopbackHost(host)
	if ph.metricsOnly && !loopback {
		return nil, usage("--metrics-listen %q: want a loopback address (127.0.0.0/8, ::1, localhost)", ph.addr)
	}
	if c.noAuth {
		if !loopback {
			return nil, usage("--no-auth refused: listen address %q is not loopback (127.0.0.0/8, ::1, localhost); serve it with a bearer token", ph.addr)
		}
		return ph, nil
	}
	if c.tokensFile != "" {
		toks, err := proxy.LoadTokensFile(c.tokensFile)
		if err != nil {
			return nil, usage("--tokens-file: %v", err)
		}
		ph.tokens = toks
	}
	switch {
	case identities && c.tokenFile == "":
		// The tokens name identities; no anonymous token besides them.
		return ph, nil
	case c.tokenFile != "":
		token, err := config.ReadSecretFile(c.tokenFile, "--token-file")
		if err != nil {
			return nil, usage("%v", err)
		}
		ph.token = token
	case strings.TrimSpace(getenv(proxyTokenEnv)) != "":
		ph.token = strings.TrimSpace(getenv(proxyTokenEnv))
	default:
		b := make([]byte, 32)
		_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
		ph.token, ph.generated = base64.RawURLEncoding.EncodeToString(b), true
	}
	if strings.ContainsAny(ph.token, " \t\r\n") {
		return nil, usage("the bearer token contains whitespace")
	}
	return ph, nil
}

// runProxy serves the runtime catalog on stdin/stdout until stdin ends or
// ctx is done, or over HTTP (--listen) until ctx is done and the calls in
// flight have finished; then it closes the runtime (no server child
// survives) and the policies.
func runProxy(ctx context.Context, c *proxyConfig, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	if err := checkProxyFlags(c); err != nil {
		return err
	}
	ph, err := resolveHTTP(c, os.Getenv)
	if err != nil {
		return err
	}
	stateKey, err := readStateKey(c.stateKeyFile)
	if err != nil {
		return err
	}
	if c.state == "" {
		c.state = strings.TrimSpace(os.Getenv(proxyStateEnv))
	}
	if c.state != "" && (ph == nil || ph.metricsOnly) {
		return usage("--state (or $%s) shares the state of replicas served over HTTP: it needs --listen", proxyStateEnv)
	}
	level := slog.LevelInfo
	if c.verbose {
		level = slog.LevelDebug
	}
	c.policy.logJSON = c.logFormat == "json"
	logger := newLogger(stderr, level, c.policy.logJSON)
	say := announcer{w: stderr, logger: logger, asJSON: c.policy.logJSON}
	tr, err := c.tracing.start(ctx, "openclaw mcp proxy", os.Getenv)
	if err != nil {
		return err
	}
	defer func() {
		// The spans still buffered are sent, within the shutdown timeout.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			logger.Warn("traces not all exported", "err", err)
		}
	}()
	var ln net.Listener
	if ph != nil {
		// Bound before anything starts: a port in use fails at once.
		if ln, err = net.Listen("tcp", ph.addr); err != nil {
			return failStart(err)
		}
		defer ln.Close() // Serve closes it too; this covers the early returns
	}
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
	for _, k := range config.KeyTypos(doc.Root) {
		logger.Warn("openclaw.json: a key is probably misspelled", "key", k.Path, "did_you_mean", k.Want)
	}
	// tools.profile, tools.allow/deny and the sandbox gate decide which
	// imported tools the clients see; a mistake there is an error, never
	// an open catalog.
	toolPolicy, err := doc.ToolPolicy()
	if err != nil {
		return failStart(fmt.Errorf("%s: %w", cfgPath, err))
	}
	// The tool pins: an invalid pins file refuses the start, never leaves
	// a pinned server unchecked.
	pinCfg, err := c.pins.resolve(cfgPath, c.policy.config)
	if err != nil {
		return failStart(err)
	}
	pins, err := pinCfg.load()
	if err != nil {
		return failStart(err)
	}
	if stray := strayPins(pins, doc); len(stray) > 0 {
		say.warn(strayPinsWarning(pinCfg.path, stray), "openclaw mcp: tool pins of servers not in mcp.servers are ignored", "pins", pinCfg.path, "servers", stray)
	}
	// The metrics see every decision (per module, through the audit
	// records) and tell a block from a tool error.
	metrics := proxy.NewMetrics()
	c.policy.auditTap = metrics.AuditSink(nil)
	c.policy.bundleMetrics = metrics.Bundle()
	var shared *sharedstate.State
	var upstreamOAuth *transport.OAuthOptions // nil: the token files
	ready := []proxy.ReadyCheck{}
	if c.state != "" {
		if shared, err = sharedstate.Open(c.state, &sharedstate.Options{Logger: logger, Observe: metrics.ObserveState(), TracerProvider: tr.Provider()}); err != nil {
			return usage("%v", err)
		}
		defer shared.Close()
		if upstreamOAuth, err = proxyOAuth(shared, stateKey, resolved); err != nil {
			return err
		}
		c.policy.limits = shared.Counters()
		c.policy.swapped = func() { publishReplicaEvent(shared, logger, sharedstate.EventPolicy) }
		if err := shared.Ping(ctx); err != nil {
			logger.Warn("openclaw mcp proxy: Redis does not answer; calls that need shared state fail (and /readyz says not ready) until it does", "state", shared.URL(), "err", err)
		}
		mctx, stopMonitor := context.WithCancel(context.WithoutCancel(ctx))
		defer stopMonitor()
		go shared.Monitor(mctx, stateMonitorEvery)
		ready = append(ready, proxy.ReadyCheck{Name: "state", Check: shared.Ready})
		say.info("openclaw mcp proxy: shared state in "+shared.URL(), "openclaw mcp proxy: shared state", "state", shared.URL())
	}
	c.policy.verbose = c.verbose
	pol, err := startPolicies(ctx, c.policy, "mcp proxy", stderr)
	if err != nil {
		return failStart(err)
	}
	defer func() { _ = pol.Close(context.WithoutCancel(ctx)) }()

	// A confined server reaches none of the proxy's secrets: the bearer
	// tokens (it would call as any identity), the requestState key (it
	// would forge states for every replica) and the pins file (it would
	// bless its own rug pull).
	confine, err := c.confine.confinement(c.policy, c.tokenFile, c.tokensFile, c.stateKeyFile, pinCfg.path)
	if err != nil {
		return failStart(err)
	}
	opts := runtime.Options{
		Transport:       &transport.Options{ConfineStdio: confine, OAuth: upstreamOAuth},
		Enforcer:        metrics.Enforcer(pol),
		Limiter:         pol,
		Sanitizer:       pol,
		ApprovalDecider: metrics.ApprovalDecider(pol),
		Surface:         policies.SurfaceProxy,
		Caller:          policies.Caller{Name: "openclaw-mcp-proxy", Version: version},
		Logger:          logger,
		ProtocolVersion: c.upstreamProto,
		ToolPolicy:      toolPolicy,
		Pins:            pins,
		PinMode:         pinCfg.mode,
		ConnectWait:     c.connectWait,
		TracerProvider:  tr.Provider(),
		OnEvent: func(ev runtime.Event) {
			switch ev.Kind {
			case runtime.EventFailed, runtime.EventPaused:
				logger.Warn("MCP server "+string(ev.Kind), "server", ev.Server, "err", ev.Err)
			default:
				logger.Debug("MCP server "+string(ev.Kind), "server", ev.Server)
			}
		},
	}
	// The relay carries sampling, elicitation, roots, logs, list changes
	// and approval questions back to the downstream clients.
	relay := proxy.NewRelay()
	relay.Install(&opts)
	opts.AskHuman = metrics.AskHuman(opts.AskHuman)
	opts.Audit = pol.AuditSink()
	// ServersFromConfig also carries each entry's OAuth identity mode and
	// authProfileId (refused with a diagnostic).
	sess, err := runtime.New(runtime.ServersFromConfig(resolved), &opts)
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
	var nonces proxy.StateNonces // nil: in this process
	if shared != nil {
		nonces = shared
	}
	p, err := proxy.New(ctx, sess, &proxy.Options{Name: "openclaw-go-proxy", Version: version, Logger: logger, Relay: relay, StateKey: stateKey, StateNonces: nonces, TracerProvider: tr.Provider()})
	if err != nil {
		return failStart(err)
	}
	defer p.Close() // before the runtime: ends the relay's worker
	metrics.Instrument(p)
	metrics.ObserveServers(sess.Status)
	if _, ships := pol.DecisionLogStats(); ships {
		metrics.ObserveDecisionLog(func() decisionlog.Stats { st, _ := pol.DecisionLogStats(); return st })
	}
	// `openclaw mcp reload` (SIGHUP) applies an edited mcp.servers and tool
	// policy to the running proxy; its clients get list_changed at once.
	// With --state a reload here is a reload on every replica.
	reload := reloadFromConfig(cfgPath, logger, &proxyReloader{cfgPath: cfgPath, pins: pinCfg, sess: sess, proxy: p, logger: logger})
	fan := &replicaFanOut{shared: shared, logger: logger, reload: reload, policies: pol, proxy: p}
	if dir, err := mcpRunDir(); err != nil {
		logger.Warn("openclaw mcp reload cannot reach this proxy", "err", err)
	} else if rl, err := serveMCPReload(ctx, dir, "mcp proxy", cfgPath, logger, fan.reloadHere); err != nil {
		logger.Warn("openclaw mcp reload cannot reach this proxy", "err", err)
	} else {
		rl.publishStatus(sess.Status)     // skipped stdout lines, for `mcp status`
		defer func() { _ = rl.Close() }() // before the proxy and the runtime close
	}

	var h *proxy.HTTPHandler
	if ph != nil {
		var oauth *proxy.OAuthVerifier
		if c.authIssuer != "" {
			leeway := c.authLeeway
			if leeway == 0 {
				leeway = -1 // none, not the default
			}
			if oauth, err = proxy.NewOAuthVerifier(ctx, &proxy.OAuthOptions{Issuer: c.authIssuer, Audience: c.authAudience, Claims: c.authClaims, Leeway: leeway}); err != nil {
				return failStart(err)
			}
			logger.Info("openclaw mcp proxy: OAuth resource server", "issuer", c.authIssuer, "audience", c.authAudience, "metadata", oauth.MetadataURL())
		}
		var sessions proxy.SessionStore // a nil *State would be a non-nil interface
		if shared != nil {
			sessions = shared
		}
		h, err = proxy.NewHTTPHandler(p, &proxy.HTTPOptions{
			Sessions:           sessions,
			Token:              ph.token,
			Tokens:             ph.tokens,
			OAuth:              oauth,
			Scopes:             c.authScopes,
			CallScopes:         c.authCallScopes,
			NoAuth:             ph.token == "" && len(ph.tokens) == 0 && oauth == nil,
			ListenHost:         ph.host,
			AllowOrigins:       c.allowOrigins,
			AllowedHosts:       c.allowedHosts,
			ReadHeaderTimeout:  c.headerTimeout,
			BodyTimeout:        c.bodyTimeout,
			MaxConnections:     c.maxConns,
			MaxSessions:        c.maxSessions,
			SessionIdleTimeout: sessionIdleOption(c.sessionIdle),
			MetricsOnly:        ph.metricsOnly,
			Metrics:            metrics,
			Servers:            sess.Status,
			ShutdownTimeout:    c.shutdownTimeout,
			MaxMessageBytes:    c.maxMessage,
			Ready:              append([]proxy.ReadyCheck{{Name: "policies", Check: pol.loaded}}, ready...),
			Logger:             logger,
		})
		if err != nil {
			return usage("%v", err)
		}
		if ph.generated {
			// The one place the token appears: it is never logged.
			fmt.Fprintf(stderr, "openclaw mcp proxy: bearer token (shown once; set %s or --token-file to choose it): %s\n", proxyTokenEnv, ph.token)
		} else if c.noAuth {
			say.warn(fmt.Sprintf("openclaw mcp proxy: WARNING: --no-auth: anyone on this machine can call the tools at %s", ln.Addr()),
				"openclaw mcp proxy: --no-auth: anyone on this machine can call the tools", "addr", ln.Addr().String())
		}
		if limits := pol.PerIdentityLimits(); len(limits) > 0 && !ph.metricsOnly && len(ph.tokens) == 0 && oauth == nil {
			// Without identities a per-identity counter goes by what the
			// caller says it is (policies.RequesterKey).
			say.warn(fmt.Sprintf("openclaw mcp proxy: WARNING: rate limits (%s) count per identity, but this proxy authenticates none (no --auth-issuer, no --tokens-file): "+
				"their counters go by each client's self-declared name and version, shared by every caller that sends the same and escaped by one that sends another", strings.Join(limits, ", ")),
				"openclaw mcp proxy: per-identity rate limits without identities: counters go by the self-declared clientInfo", "limits", limits)
		}
	}
	if shared != nil { // --state needs --listen: h is set
		fan.http = h
		defer fan.run(ctx)() // stops before the proxy and the runtime close
	}
	if ph == nil || ph.metricsOnly {
		return serveProxyStdio(ctx, p, h, ln, stdin, stdout, say, logger, c.shutdownTimeout, int(c.maxMessage))
	}
	say.info(fmt.Sprintf("openclaw mcp proxy: serving http://%s%s (legacy SSE: %s), %d tools", ln.Addr(), proxy.PathMCP, proxy.PathSSE, len(p.Tools())),
		"openclaw mcp proxy: serving", "url", "http://"+ln.Addr().String()+proxy.PathMCP, "sse", proxy.PathSSE, "tools", len(p.Tools()))
	if err := h.Serve(ctx, ln); err != nil {
		return &exitError{code: 1, err: fmt.Errorf("openclaw mcp proxy: %w", err)}
	}
	logger.Info("openclaw mcp proxy: stopped")
	return nil
}

// announcer writes the proxy's startup lines on stderr: with --log-format
// json as log records (msg and attributes), else as the text lines people
// (and scripts) read. The generated bearer token is not one of them: it is
// printed once, as text, and never logged.
type announcer struct {
	w      io.Writer
	logger *slog.Logger
	asJSON bool
}

// info writes text, or the info record msg with attrs.
func (a announcer) info(text, msg string, attrs ...any) {
	if a.asJSON {
		a.logger.Info(msg, attrs...)
		return
	}
	fmt.Fprintln(a.w, text)
}

// warn writes text, or the warning record msg with attrs.
func (a announcer) warn(text, msg string, attrs ...any) {
	if a.asJSON {
		a.logger.Warn(msg, attrs...)
		return
	}
	fmt.Fprintln(a.w, text)
}

// proxyReloader applies a reload of openclaw.json to a running proxy: the
// tool policy and the tool pins file are read again (an invalid one refuses
// the whole reload, before any server changes), the runtime session takes
// the new servers (runtime.Session.Reload) and pins, then the served tools
// are synced so connected clients receive notifications/tools/list_changed
// at once.
type proxyReloader struct {
	cfgPath string
	pins    pinConfig
	sess    *runtime.Session
	proxy   *proxy.Proxy
	logger  *slog.Logger
}

// Reload implements serversReloader.
func (r *proxyReloader) Reload(ctx context.Context, servers []runtime.Server) (runtime.ServerChanges, error) {
	doc, err := config.LoadDocument(r.cfgPath)
	if err != nil {
		return runtime.ServerChanges{}, err
	}
	tp, err := doc.ToolPolicy()
	if err != nil {
		return runtime.ServerChanges{}, fmt.Errorf("%s: %w", r.cfgPath, err)
	}
	pins, err := r.pins.load()
	if err != nil {
		return runtime.ServerChanges{}, err
	}
	if stray := strayPins(pins, doc); len(stray) > 0 {
		r.logger.Warn(strayPinsWarning(r.pins.path, stray))
	}
	changes, err := r.sess.Reload(ctx, servers)
	if err != nil {
		return changes, err
	}
	r.sess.SetToolPolicy(tp)
	r.sess.SetPins(pins, r.pins.mode)
	if err := r.proxy.Sync(ctx); err != nil {
		r.logger.Warn("proxy: catalog not refreshed after a reload; refreshed on next use", "err", err)
	}
	return changes, nil
}

// serveProxyStdio serves p on stdin/stdout until stdin ends or ctx is done
// (SIGINT/SIGTERM); with h (--metrics-listen) it also serves /metrics and
// /healthz on ln until stdio ends. Either way the session drains: requests
// already read are answered on stdout (within shutdownTimeout) before it
// returns, and after ctx is done new requests are refused.
func serveProxyStdio(ctx context.Context, p *proxy.Proxy, h *proxy.HTTPHandler, ln net.Listener, stdin io.ReadCloser, stdout io.WriteCloser, say announcer, logger *slog.Logger, shutdownTimeout time.Duration, maxLine int) error {
	if h != nil {
		mctx, stop := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- h.Serve(mctx, ln) }()
		defer func() {
			stop()
			if err := <-served; err != nil {
				logger.Warn("metrics endpoint", "err", err)
			}
		}()
		say.info(fmt.Sprintf("openclaw mcp proxy: metrics on http://%s%s (and %s, %s)", ln.Addr(), proxy.PathMetrics, proxy.PathHealth, proxy.PathReady),
			"openclaw mcp proxy: metrics on", "url", "http://"+ln.Addr().String()+proxy.PathMetrics)
	}
	logger.Info("openclaw mcp proxy: serving on stdio", "tools", len(p.Tools()))
	// A malformed stdin line is answered and logged; it does not end the session.
	stdio := transport.NewServeStdioTransport(stdin, stdout, &transport.ServeStdioOptions{Logger: logger, DrainTimeout: shutdownTimeout, MaxLineLength: maxLine})
	// A signal starts the drain; cancelling the session's own context
	// would close it before the answers in flight are written.
	stopOnSignal := context.AfterFunc(ctx, func() {
		logger.Info("openclaw mcp proxy: stopping; calls in flight may finish", "timeout", shutdownTimeout)
		stdio.Shutdown()
	})
	defer stopOnSignal()
	err := p.Server().Run(context.WithoutCancel(ctx), stdio)
	switch {
	case errors.Is(err, transport.ErrDrainTimeout):
		logger.Warn("openclaw mcp proxy: calls abandoned at the shutdown timeout", "err", err)
	case err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF):
		return &exitError{code: 1, err: fmt.Errorf("openclaw mcp proxy: %w", err)}
	}
	return nil
}
