package transport

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/openclaw-go/openclaw/config"

	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Kind is the transport an entry resolves to.
type Kind string

// The transports of OpenClaw's mcp.servers (docs/protocol-facts.md, mcp.servers entry schema).
const (
	KindStdio          Kind = config.TransportStdio
	KindSSE            Kind = config.TransportSSE
	KindStreamableHTTP Kind = config.TransportStreamableHTTP
)

// Defaults of OpenClaw (docs/protocol-facts.md, Defaults and limits).
const (
	DefaultConnectionTimeout = config.DefaultConnectionTimeoutMs * time.Millisecond
	DefaultRequestTimeout    = config.DefaultRequestTimeoutMs * time.Millisecond
)

// ErrUnusable is wrapped by Resolve's error when an entry has neither a
// usable command nor a usable URL; OpenClaw skips such a server with a
// warning (docs/protocol-facts.md, Transport resolution steps 2 to 4). It is [config.ErrNoTransport].
var ErrUnusable = config.ErrNoTransport

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
	// a longer line is skipped and fails the call it answers. 0 means
	// 64 MiB.
	MaxMessageBytes int
	// OAuth configures the token store and the optional authorization flow
	// of entries with auth "oauth". nil means tokens from [DefaultTokenDir]
	// and no flow: a server without a usable token fails with an
	// *AuthRequiredError.
	OAuth *OAuthOptions
	// ConfineStdio, when set, runs every stdio server confined
	// ([StdioTransport.Confine]); nil runs them unconfined.
	ConfineStdio *Confinement
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
	// Launch is the redacted description `mcp status` shows (docs/protocol-facts.md, Redaction): the
	// command line for stdio, the URL for HTTP.
	Launch string
	// Warnings lists what resolution dropped (env values or headers of an
	// unusable type, an Authorization header under auth:"oauth"). Each was
	// also logged.
	Warnings []string
	// Server is the entry as config resolved it (docs/protocol-facts.md, Transport resolution): the transport
	// kind, the filtered env, the converted headers, the launch string.
	Server *config.ResolvedServer
	// Redactor masks this server's env and header values and generic
	// secrets; use it for every line that may quote the server.
	Redactor *redact.Redactor
}

// Resolve turns the mcp.servers entry called name into a transport. The
// entry is resolved by [config.ResolveEntry] with OpenClaw's runtime rules
// (docs/protocol-facts.md, Transport resolution): a non-blank Command means stdio; else Transport, else the Type
// alias, picks "sse" or "streamable-http"; else an http(s) URL defaults to
// SSE. Errors name the server and never quote a secret: a
// *[BlockedEnvError] for a blocked env key, an error wrapping [ErrUnusable]
// for an entry without a usable command or URL, and precise errors for an
// unset or blank ${NAME} in a header or an unreadable client certificate.
func Resolve(name string, e config.ServerEntry, opts *Options) (*Resolved, error) {
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
	rs, err := config.ResolveEntry(name, e)
	if err != nil {
		return nil, err
	}
	log := o.Logger.With("server", name)
	r := &Resolved{
		Name:           name,
		Kind:           Kind(rs.Transport),
		Server:         rs,
		Launch:         rs.Description,
		ConnectTimeout: time.Duration(rs.ConnectionTimeoutMs * float64(time.Millisecond)),
		RequestTimeout: time.Duration(rs.RequestTimeoutMs * float64(time.Millisecond)),
	}
	warn := func(format string, args ...any) {
		w := fmt.Sprintf(format, args...)
		r.Warnings = append(r.Warnings, w)
		log.Warn("bundle-mcp: " + w)
	}

	if r.Kind == KindStdio {
		if len(rs.BlockedEnv) > 0 {
			return nil, &BlockedEnvError{Server: name, Keys: slices.Sorted(slices.Values(rs.BlockedEnv))}
		}
		for _, k := range rs.DroppedEnv {
			warn("server %q: env %q dropped: its value is not a string, number or boolean", name, k)
		}
		env := make(map[string]string, len(rs.Env))
		secrets := make([]string, 0, len(rs.Env))
		for _, kv := range rs.Env {
			env[kv.Key] = kv.Value
			secrets = append(secrets, kv.Value)
		}
		r.Redactor = redact.NewRedactor(secrets...)
		r.Transport = &StdioTransport{
			Server:            name,
			Command:           rs.Command,
			Args:              slices.Clone(rs.Args),
			Env:               childEnv(o.LookupEnv, env),
			Dir:               rs.Cwd,
			Logger:            o.Logger,
			TerminateDuration: o.TerminateDuration,
			MaxMessageBytes:   o.MaxMessageBytes,
			Redactor:          r.Redactor,
			Confine:           o.ConfineStdio,
		}
		return r, nil
	}

	headers, err := resolveHeaders(rs, o.LookupEnv, warn)
	if err != nil {
		return nil, err
	}
	secrets := []string{}
	for k, v := range headers {
		if redact.IsSensitiveHeader(k) {
			secrets = append(secrets, v, strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(v, "Bearer "), "bearer ")))
		}
	}
	if u, err := url.Parse(rs.URL); err == nil && u.User != nil {
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
		r.Transport = &SSETransport{SSEClientTransport: mcp.SSEClientTransport{Endpoint: rs.URL, HTTPClient: client}}
	} else {
		r.Transport = &mcp.StreamableClientTransport{Endpoint: rs.URL, HTTPClient: client}
	}
	return r, nil
}

// resolveHeaders expands the ${NAME} references of a resolved entry's
// headers and warns about the headers resolution left out (docs/protocol-facts.md, Transport resolution step 3).
func resolveHeaders(rs *config.ResolvedServer, lookup func(string) (string, bool), warn func(string, ...any)) (map[string]string, error) {
	for _, k := range rs.DroppedHeaders {
		warn("server %q: header %q dropped: its value is not a string, number or boolean", rs.Name, k)
	}
	for _, k := range rs.RemovedHeaders {
		warn("server %q: header %q removed: auth is \"oauth\"", rs.Name, k)
	}
	out := map[string]string{}
	for _, h := range rs.Headers {
		v, err := ExpandEnv(h.Value, lookup)
		if err != nil {
			return nil, fmt.Errorf("server %q: header %q: %w", rs.Name, h.Key, err)
		}
		out[h.Key] = v
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
