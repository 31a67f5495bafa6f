package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/config"

	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerEntry is what this package reads of one `mcp.servers.<name>` entry
// of openclaw.json (OpenClaw §11.2), with OpenClaw's JSON spellings. The
// config package validates and normalizes entries; Resolve applies only the
// runtime rules of §11.4. Zero values mean "not set".
type ServerEntry struct {
	// Command starts a stdio server. A non-empty Command means stdio,
	// whatever the other fields say (§11.4 step 1). It is not trimmed.
	Command string `json:"command,omitempty"`
	// Args are the command's arguments (OpenClaw keeps only string items).
	Args []string `json:"args,omitempty"`
	// Env is merged over the inherited safe set after OpenClaw's filter
	// (§11.7). Values are strings, numbers or booleans.
	Env map[string]any `json:"env,omitempty"`
	// Cwd is the child's working directory; empty means ours.
	Cwd string `json:"cwd,omitempty"`
	// WorkingDirectory is the legacy spelling of Cwd, used when Cwd is empty.
	WorkingDirectory string `json:"workingDirectory,omitempty"`

	// URL is the http: or https: endpoint of an SSE or streamable HTTP server.
	URL string `json:"url,omitempty"`
	// Transport is "stdio", "sse" or "streamable-http" (compared lower-cased).
	Transport string `json:"transport,omitempty"`
	// Type is the alias used when Transport is empty: "http" and
	// "streamable-http" mean streamable HTTP, "sse" means SSE.
	Type string `json:"type,omitempty"`
	// Headers are sent with every HTTP request. Values are strings, numbers
	// or booleans; ${NAME} is replaced by the environment variable NAME.
	Headers map[string]any `json:"headers,omitempty"`
	// ConnectionTimeoutMs bounds connecting (TCP, TLS and the MCP
	// handshake); 0 means 30000 (§11.5).
	ConnectionTimeoutMs float64 `json:"connectionTimeoutMs,omitempty"`
	// RequestTimeoutMs bounds each request; 0 means 60000 (§11.5).
	RequestTimeoutMs float64 `json:"requestTimeoutMs,omitempty"`
	// SSLVerify false disables TLS certificate verification; nil means true.
	SSLVerify *bool `json:"sslVerify,omitempty"`
	// ClientCert and ClientKey are PEM file paths of a TLS client
	// certificate (mTLS). Both or neither must be set.
	ClientCert string `json:"clientCert,omitempty"`
	ClientKey  string `json:"clientKey,omitempty"`
	// Auth is "oauth" for OAuth-protected HTTP servers: any Authorization
	// header is removed, as OpenClaw does, and requests carry the token
	// `openclaw mcp login` stored ([Login], [Options.OAuth]).
	Auth string `json:"auth,omitempty"`
}

// Kind is the transport an entry resolves to.
type Kind string

// The transports of OpenClaw's mcp.servers (§11.2).
const (
	KindStdio          Kind = "stdio"
	KindSSE            Kind = "sse"
	KindStreamableHTTP Kind = "streamable-http"
)

// Defaults of OpenClaw §11.5.
const (
	DefaultConnectionTimeout = 30 * time.Second
	DefaultRequestTimeout    = 60 * time.Second
)

// ErrUnusable is wrapped by Resolve's error when an entry has neither a
// usable command nor a usable URL; OpenClaw skips such a server with a
// warning (§11.4 steps 2 to 4).
var ErrUnusable = errors.New("transport: server entry not usable")

// Options configure Resolve. The zero value and nil are valid.
type Options struct {
	// Logger receives the warnings of resolution, the stderr lines of stdio
	// children, skipped stdout lines and session renewals, each tagged with
	// attribute server=<name>. nil means slog.Default().
	Logger *slog.Logger
	// LookupEnv reads our environment: the inherited safe set of stdio
	// children and ${NAME} references in headers. nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// TerminateDuration is how long Close lets a stdio server exit by
	// itself after its stdin is closed, then again after SIGTERM, before
	// SIGKILL; a server that sends a request after its stdin closed, which
	// nothing can answer, gets SIGTERM at once. 0 means 5 s (the go-sdk
	// CommandTransport default).
	TerminateDuration time.Duration
	// MaxMessageBytes caps one JSON-RPC message read from a stdio child;
	// a longer line is logged and skipped. 0 means 64 MiB.
	MaxMessageBytes int
	// OAuth configures the token store and the optional authorization flow
	// of entries with auth "oauth". nil means tokens from [DefaultTokenDir]
	// and no flow: a server without a usable token fails with an
	// *AuthRequiredError.
	OAuth *OAuthOptions
}

// Resolved is an entry resolved into a go-sdk transport. Resolve has no side
// effects: the stdio child starts, or the HTTP connection opens, when the
// caller passes Transport to mcp.Client.Connect.
type Resolved struct {
	// Name is the mcp.servers key.
	Name string
	// Kind is the transport chosen.
	Kind Kind
	// Transport connects to the server: a *[StdioTransport], an
	// *[SSETransport] or an *mcp.StreamableClientTransport.
	Transport mcp.Transport
	// ConnectTimeout and RequestTimeout are the entry's timeouts or the
	// OpenClaw defaults. The HTTP client already applies them to dialing,
	// TLS and response headers; callers bound the MCP handshake with
	// ConnectTimeout and each request with RequestTimeout.
	ConnectTimeout time.Duration
	RequestTimeout time.Duration
	// Launch is the redacted description `mcp status` shows (§11.8): the
	// command line for stdio, the URL for HTTP.
	Launch string
	// Warnings lists what resolution dropped (env values or headers of an
	// unusable type, an Authorization header under auth:"oauth"). Each was
	// also logged.
	Warnings []string
	// Redactor masks this server's env and header values and generic
	// secrets; use it for every line that may quote the server.
	Redactor *redact.Redactor
}

func timeoutOf(ms float64, def time.Duration) time.Duration {
	if ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	return def
}

// Resolve turns the mcp.servers entry called name into a transport with
// OpenClaw's runtime rules (§11.4): a non-empty Command means stdio; else
// Transport (lower-cased), else the Type alias, picks "sse" or
// "streamable-http", and any other value is an error; else an http(s) URL
// defaults to SSE. Errors name the server and never quote a secret: a
// *[BlockedEnvError] for a blocked env key, an error wrapping [ErrUnusable]
// for an entry without a usable command or URL, and precise errors for a
// bad URL, an unset ${NAME} in a header or an unreadable client
// certificate.
func Resolve(name string, e ServerEntry, opts *Options) (*Resolved, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	log := o.Logger.With("server", name)
	r := &Resolved{
		Name:           name,
		ConnectTimeout: timeoutOf(e.ConnectionTimeoutMs, DefaultConnectionTimeout),
		RequestTimeout: timeoutOf(e.RequestTimeoutMs, DefaultRequestTimeout),
	}
	warn := func(format string, args ...any) {
		w := fmt.Sprintf(format, args...)
		r.Warnings = append(r.Warnings, w)
		log.Warn("bundle-mcp: " + w)
	}

	if e.Command != "" {
		env, bad, err := FilterEnv(name, e.Env)
		if err != nil {
			return nil, err
		}
		for _, k := range bad {
			warn("server %q: env %q dropped: its value is not a string, number or boolean", name, k)
		}
		cwd := e.Cwd
		if cwd == "" {
			cwd = e.WorkingDirectory
		}
		secrets := make([]string, 0, len(env))
		for _, v := range env {
			secrets = append(secrets, v)
		}
		r.Kind = KindStdio
		r.Redactor = redact.NewRedactor(secrets...)
		r.Launch = redact.StdioLaunch(e.Command, e.Args, cwd)
		r.Transport = &StdioTransport{
			Server:            name,
			Command:           e.Command,
			Args:              append([]string(nil), e.Args...),
			Env:               childEnv(o.LookupEnv, env),
			Dir:               cwd,
			Logger:            o.Logger,
			TerminateDuration: o.TerminateDuration,
			MaxMessageBytes:   o.MaxMessageBytes,
			Redactor:          r.Redactor,
		}
		return r, nil
	}

	requested := strings.ToLower(strings.TrimSpace(e.Transport))
	if requested == "" {
		switch t := strings.ToLower(strings.TrimSpace(e.Type)); t {
		case "http", "streamable-http":
			requested = string(KindStreamableHTTP)
		case "sse", "stdio":
			requested = t
		case "":
		default:
			requested = t
		}
	}
	switch requested {
	case "", string(KindSSE), string(KindStreamableHTTP):
	case string(KindStdio):
		return nil, fmt.Errorf("server %q: transport \"stdio\" needs a non-empty command: %w", name, ErrUnusable)
	default:
		return nil, fmt.Errorf("server %q: unsupported transport %q (want \"sse\" or \"streamable-http\"): %w", name, requested, ErrUnusable)
	}
	if e.URL == "" {
		return nil, fmt.Errorf("server %q: no command and no url: %w", name, ErrUnusable)
	}
	u, err := url.Parse(e.URL)
	if err != nil {
		return nil, fmt.Errorf("server %q: url %s does not parse: %w", name, redact.URL(e.URL), ErrUnusable)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server %q: url %s: only http: and https: are supported: %w", name, redact.URL(e.URL), ErrUnusable)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server %q: url %s has no host: %w", name, redact.URL(e.URL), ErrUnusable)
	}
	r.Kind = KindSSE
	if requested == string(KindStreamableHTTP) {
		r.Kind = KindStreamableHTTP
	}
	r.Launch = redact.URL(e.URL)

	headers, err := resolveHeaders(name, e, o.LookupEnv, warn)
	if err != nil {
		return nil, err
	}
	secrets := []string{}
	for k, v := range headers {
		if redact.IsSensitiveHeader(k) {
			secrets = append(secrets, v, strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(v, "Bearer "), "bearer ")))
		}
	}
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
	}
	r.Redactor = redact.NewRedactor(secrets...)
	client, err := newHTTPClient(name, e, headers, r, log, &o)
	if err != nil {
		return nil, err
	}
	if r.Kind == KindSSE {
		r.Transport = &SSETransport{SSEClientTransport: mcp.SSEClientTransport{Endpoint: e.URL, HTTPClient: client}}
	} else {
		r.Transport = &mcp.StreamableClientTransport{Endpoint: e.URL, HTTPClient: client}
	}
	return r, nil
}

// resolveHeaders converts header values (§11.4 step 3), expands ${NAME}
// references and drops Authorization under auth:"oauth".
func resolveHeaders(name string, e ServerEntry, lookup func(string) (string, bool), warn func(string, ...any)) (map[string]string, error) {
	keys := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]string{}
	for _, k := range keys {
		s, ok := config.EnvValueString(e.Headers[k])
		if !ok {
			warn("server %q: header %q dropped: its value is not a string, number or boolean", name, k)
			continue
		}
		if e.Auth == "oauth" && strings.EqualFold(k, "Authorization") {
			warn("server %q: header %q removed: auth is \"oauth\"", name, k)
			continue
		}
		v, err := ExpandEnv(s, lookup)
		if err != nil {
			return nil, fmt.Errorf("server %q: header %q: %w", name, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// ExpandEnv replaces each ${NAME} in s by the value of the environment
// variable NAME (NAME: a letter or '_' then letters, digits or '_'). A
// variable that is unset, empty or only white space is an error naming it,
// so that a missing secret never silently becomes an empty credential
// ("Bearer " sent to a server); "$$" is a literal "$" before '{'. Text
// without "${" is returned unchanged.
func ExpandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ at byte %d", i)
		}
		v := s[i+2 : i+end]
		if !validEnvName(v) {
			return "", fmt.Errorf("invalid variable name %q in ${…}", v)
		}
		val, ok := lookup(v)
		if !ok {
			return "", fmt.Errorf("environment variable %s referenced as ${%s} is not set", v, v)
		}
		if strings.TrimSpace(val) == "" {
			return "", fmt.Errorf("environment variable %s referenced as ${%s} is empty", v, v)
		}
		b.WriteString(val)
		i += end + 1
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
