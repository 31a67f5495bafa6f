package gwclient

import (
	"encoding/json"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// Defaults, as OpenClaw's `mcp serve` configures its Gateway client (docs/protocol-facts.md, Gateway frames).
const (
	// DefaultRequestTimeout is how long a request waits for its response
	// once sent (the bridge's requestTimeoutMs, 180000 ms).
	DefaultRequestTimeout = 180 * time.Second
	// DefaultChallengeTimeout bounds the wait for connect.challenge after the
	// WebSocket opened, and then the wait for the connect response.
	DefaultChallengeTimeout = 15 * time.Second
	// DefaultInitialBackoff is the first reconnect delay; it doubles after
	// every failed attempt and resets after a successful handshake.
	DefaultInitialBackoff = time.Second
	// DefaultMaxBackoff caps the reconnect delay.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultMaxMessageBytes is the largest WebSocket message accepted from
	// the Gateway (25 MiB, the Node client's maxPayload).
	DefaultMaxMessageBytes = 25 << 20
	// DefaultTickInterval is assumed when hello-ok carries no
	// policy.tickIntervalMs.
	DefaultTickInterval = 30 * time.Second
	// DefaultClientVersion is sent as client.version when Options leaves it empty.
	DefaultClientVersion = "dev"
)

// Environment variables that override the challenge timeout when
// Options.ChallengeTimeout is zero, in this order of precedence. Their value
// is a positive integer number of milliseconds.
const (
	EnvConnectChallengeTimeoutMs = "OPENCLAW_CONNECT_CHALLENGE_TIMEOUT_MS"
	EnvHandshakeTimeoutMs        = "OPENCLAW_HANDSHAKE_TIMEOUT_MS"
)

// Connect fields `openclaw mcp serve` sends (fixture gateway-frames/02-connect.req.json).
const (
	ClientID          = "cli"
	ClientDisplayName = "OpenClaw MCP"
	ClientMode        = "cli"
	CapApprovals      = "approvals"
)

// Options configure a [Client]. [New] copies them; the zero value of every
// field is a documented default. Only URL is required.
type Options struct {
	// URL is the Gateway WebSocket URL, ws:// or wss://, for example
	// "ws://127.0.0.1:18789".
	URL string
	// Token is the shared Gateway token, sent as auth.token and covered by
	// the device signature. Token wins when both Token and Password are set.
	Token string
	// Password is the Gateway password, sent as auth.password.
	Password string
	// TLSFingerprint pins the Gateway's leaf certificate: the SHA-256 of its
	// DER, as 64 hex digits, optionally colon-separated ("AA:BB:…"),
	// optionally prefixed "sha256:", case-insensitive. When set, the URL
	// must be wss:// and no CA chain or host name check is required; when
	// empty, wss:// uses normal TLS verification against the system roots.
	TLSFingerprint string
	// AllowInsecurePrivateWS also accepts plaintext ws:// to a host name
	// that is not an IP literal (see [CheckSecureURL]); it is also turned
	// on by [EnvAllowInsecurePrivateWS]=1. Without it, Run refuses a ws://
	// URL to any host but loopback, private and link-local addresses and
	// .local and .ts.net names, before dialling.
	AllowInsecurePrivateWS bool
	// Identity signs the connect handshake (docs/protocol-facts.md, Device identity). nil sends no device block.
	Identity *protocol.DeviceIdentity
	// ClientVersion is client.version; empty means [DefaultClientVersion].
	ClientVersion string
	// Platform is client.platform; empty means Node's process.platform for
	// this OS ("linux", "darwin", "win32", …).
	Platform string
	// DeviceFamily is client.deviceFamily; empty means Node's os.type() for
	// this OS ("Linux", "Darwin", "Windows_NT", …).
	DeviceFamily string

	// OnEvent receives every Gateway event except connect.challenge, with
	// its "event" name and raw "payload". It is called from the connection's
	// read goroutine, one call at a time, in arrival order, so it must return
	// quickly: while it runs no other frame (response or event) is read. It
	// must not call [Client.Request] synchronously (that would wait for a
	// response it is blocking) nor [Client.Close]. A panic is recovered and
	// logged. nil drops events.
	OnEvent func(name string, payload json.RawMessage)
	// OnStateChange is told when the client becomes ready, loses its
	// connection, or schedules a reconnect; for logs. It is called from the
	// goroutine running [Client.Run] and must not call [Client.Close].
	OnStateChange func(StateChange)
	// OnFatal is called once, from the goroutine running [Client.Run], with
	// the error that ends the first connection attempt, before requests
	// waiting for readiness are released with it. `mcp serve` uses it to
	// stop writing to stdout first: OpenClaw never answers those requests.
	OnFatal func(error)
	// Logger receives diagnostics (skipped frames, reconnects); nil discards.
	Logger *slog.Logger

	// RequestTimeout bounds the wait for each response once the request is
	// sent; zero means [DefaultRequestTimeout].
	RequestTimeout time.Duration
	// ChallengeTimeout bounds the wait for connect.challenge and then for
	// the connect response; zero means the environment override (see
	// [EnvConnectChallengeTimeoutMs]) or [DefaultChallengeTimeout].
	ChallengeTimeout time.Duration
	// InitialBackoff is the first reconnect delay; zero means
	// [DefaultInitialBackoff].
	InitialBackoff time.Duration
	// MaxBackoff caps the reconnect delay; zero means [DefaultMaxBackoff].
	MaxBackoff time.Duration
	// MaxMessageBytes is the largest message read from the Gateway; zero
	// means [DefaultMaxMessageBytes].
	MaxMessageBytes int64
}

// withDefaults returns a copy of o with every zero value replaced by its
// default; getenv reads the environment overrides.
func (o *Options) withDefaults(getenv func(string) string) Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.ClientVersion == "" {
		c.ClientVersion = DefaultClientVersion
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv(EnvAllowInsecurePrivateWS) == "1" {
		c.AllowInsecurePrivateWS = true
	}
	if c.Platform == "" {
		c.Platform = nodePlatform(runtime.GOOS)
	}
	if c.DeviceFamily == "" {
		c.DeviceFamily = nodeOSType(runtime.GOOS)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ChallengeTimeout <= 0 {
		c.ChallengeTimeout = challengeTimeoutFromEnv(getenv)
	}
	if c.InitialBackoff <= 0 {
		c.InitialBackoff = DefaultInitialBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.InitialBackoff {
		c.MaxBackoff = c.InitialBackoff
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return c
}

// challengeTimeoutFromEnv reads the first valid positive millisecond value
// of the two environment overrides, else the default.
func challengeTimeoutFromEnv(getenv func(string) string) time.Duration {
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, name := range []string{EnvConnectChallengeTimeoutMs, EnvHandshakeTimeoutMs} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return DefaultChallengeTimeout
}

// nodePlatform maps GOOS to Node's process.platform.
func nodePlatform(goos string) string {
	if goos == "windows" {
		return "win32"
	}
	return goos
}

// nodeOSType maps GOOS to Node's os.type().
func nodeOSType(goos string) string {
	switch goos {
	case "linux":
		return "Linux"
	case "darwin", "ios":
		return "Darwin"
	case "windows":
		return "Windows_NT"
	case "freebsd":
		return "FreeBSD"
	case "openbsd":
		return "OpenBSD"
	case "netbsd":
		return "NetBSD"
	case "aix":
		return "AIX"
	case "solaris", "illumos":
		return "SunOS"
	}
	if goos == "" {
		return ""
	}
	return strings.ToUpper(goos[:1]) + goos[1:]
}
