package gateway

import (
	"log/slog"
	"time"
)

// Options configure a [Server]. The zero value of every field is a working
// default, noted on the field. New copies the struct; later changes to it
// have no effect.
type Options struct {
	// Token is the shared gateway token clients send as connect
	// auth.token and the admin API takes as its bearer token (compared in
	// constant time). When Token and Password are both empty, New generates a
	// random token; read it back with [Server.Token].
	Token string
	// Password, when set, is accepted as connect auth.password (and as the
	// admin bearer) in addition to Token. Empty: password auth is off.
	Password string
	// StateDir holds sessions.json and transcripts/*.jsonl. Empty: sessions
	// live in memory only and are lost when the process ends.
	StateDir string
	// TickInterval is the period of tick events and the hello-ok
	// policy.tickIntervalMs. Zero: 30 s, as OpenClaw.
	TickInterval time.Duration
	// HandshakeTimeout bounds the time from the challenge to a valid
	// connect request; on expiry the socket is closed with 1008. Zero: 15 s.
	HandshakeTimeout time.Duration
	// ExecApprovalTimeout is the expiry of an exec approval request without
	// timeoutMs. Zero: 30 min, as OpenClaw.
	ExecApprovalTimeout time.Duration
	// PluginApprovalTimeout is the expiry of a plugin approval request
	// without timeoutMs. Zero: 2 min, as OpenClaw.
	PluginApprovalTimeout time.Duration
	// MaxPayload is the largest frame accepted after connect, in bytes, and
	// the hello-ok policy.maxPayload. Zero: 25 MiB (26214400), as OpenClaw.
	// Before connect the cap is always 64 KiB.
	MaxPayload int64
	// MaxBufferedBytes is how many bytes of outbound frames may queue for
	// one slow connection before it is closed with 1008 "slow consumer".
	// Zero: 50 MiB (52428800), as OpenClaw.
	MaxBufferedBytes int64
	// UnsupportedChannels lists the channels whose `send` fails with
	// OpenClaw's "unsupported channel: <channel>" (what a real Gateway without
	// that channel plugin answers). "*" stands for every channel. Nil: every
	// channel is accepted and the outbound text is recorded in the session's
	// transcript (see [Server] for what `send` does here).
	UnsupportedChannels []string
	// ServerVersion is hello-ok server.version. Empty: "2026.9.6", the
	// OpenClaw release whose protocol this Gateway speaks.
	ServerVersion string
	// Logger receives connection and request logs. Nil: logs are discarded.
	Logger *slog.Logger
	// Now is the clock, for tests. Nil: time.Now.
	Now func() time.Time
}

// Defaults of [Options], exported for documentation and tests.
const (
	DefaultTickInterval          = 30 * time.Second
	DefaultHandshakeTimeout      = 15 * time.Second
	DefaultExecApprovalTimeout   = 30 * time.Minute
	DefaultPluginApprovalTimeout = 2 * time.Minute
	DefaultMaxPayload            = 26214400
	DefaultMaxBufferedBytes      = 52428800
	DefaultServerVersion         = "2026.9.6"
	// DefaultPort is the port OpenClaw's Gateway listens on (ws://127.0.0.1:18789).
	DefaultPort = 18789
)

func (o Options) withDefaults() Options {
	if o.TickInterval <= 0 {
		o.TickInterval = DefaultTickInterval
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.ExecApprovalTimeout <= 0 {
		o.ExecApprovalTimeout = DefaultExecApprovalTimeout
	}
	if o.PluginApprovalTimeout <= 0 {
		o.PluginApprovalTimeout = DefaultPluginApprovalTimeout
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if o.ServerVersion == "" {
		o.ServerVersion = DefaultServerVersion
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.UnsupportedChannels = append([]string(nil), o.UnsupportedChannels...)
	return o
}
