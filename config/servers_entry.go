package config

import (
	"math"
	"slices"
	"strings"
)

// ServerEntry is one `mcp.servers.<name>` entry of openclaw.json as Go
// values, with OpenClaw's JSON spellings (docs/protocol-facts.md, mcp.servers entry schema). [EntryOf] reads it from
// the file; an embedder may build one. [ResolveEntry] applies OpenClaw's
// runtime rules to it (docs/protocol-facts.md, Transport resolution); the transport package connects the result.
// Zero values mean "not set".
type ServerEntry struct {
	// Command starts a stdio server: a Command that is not empty after
	// trimming means stdio, whatever the other fields say (docs/protocol-facts.md, Transport resolution step 1).
	// It is used untrimmed.
	Command string `json:"command,omitempty"`
	// Args are the command's arguments (OpenClaw keeps only string items).
	Args []string `json:"args,omitempty"`
	// Env is merged over the inherited safe set after OpenClaw's filter
	// (docs/protocol-facts.md, stdio env filter). Values are strings, numbers or booleans ([EnvValueString]);
	// others are dropped.
	Env map[string]any `json:"env,omitempty"`
	// Cwd is the child's working directory; empty means ours.
	Cwd string `json:"cwd,omitempty"`
	// WorkingDirectory is the legacy spelling of Cwd, used when Cwd is empty.
	WorkingDirectory string `json:"workingDirectory,omitempty"`

	// URL is the http: or https: endpoint of an SSE or streamable HTTP server.
	URL string `json:"url,omitempty"`
	// Transport is "sse" or "streamable-http" (trimmed, compared
	// lower-cased); "stdio" without a command is an error.
	Transport string `json:"transport,omitempty"`
	// Type is the alias used when Transport is empty: "http" and
	// "streamable-http" mean streamable HTTP, "sse" means SSE.
	Type string `json:"type,omitempty"`
	// Headers are sent with every HTTP request. Values are strings, numbers
	// or booleans ([EnvValueString]); ${NAME} in a value is replaced by the
	// environment variable NAME when the server is connected.
	Headers map[string]any `json:"headers,omitempty"`
	// ConnectionTimeoutMs bounds connecting (TCP, TLS and the MCP
	// handshake); 0 means [DefaultConnectionTimeoutMs] (docs/protocol-facts.md, Defaults and limits).
	ConnectionTimeoutMs float64 `json:"connectionTimeoutMs,omitempty"`
	// RequestTimeoutMs bounds each request; 0 means
	// [DefaultRequestTimeoutMs] (docs/protocol-facts.md, Defaults and limits).
	RequestTimeoutMs float64 `json:"requestTimeoutMs,omitempty"`
	// SSLVerify false disables TLS certificate verification; nil means true.
	SSLVerify *bool `json:"sslVerify,omitempty"`
	// ClientCert and ClientKey are PEM file paths of a TLS client
	// certificate (mTLS). Both or neither must be set.
	ClientCert string `json:"clientCert,omitempty"`
	ClientKey  string `json:"clientKey,omitempty"`
	// Auth is "oauth" for OAuth-protected HTTP servers: any Authorization
	// header is removed, as OpenClaw does, and requests carry the token
	// `openclaw mcp login` stored.
	Auth string `json:"auth,omitempty"`
	// OAuth is the entry's oauth block; nil when absent.
	OAuth *ServerOAuth `json:"oauth,omitempty"`

	// Enabled false declares the server without connecting it; nil means
	// true.
	Enabled *bool `json:"enabled,omitempty"`
	// SupportsParallelToolCalls lets calls to the server overlap.
	SupportsParallelToolCalls bool `json:"supportsParallelToolCalls,omitempty"`
	// ToolFilter hides tools (docs/protocol-facts.md, Tool filter); nil exposes every tool.
	ToolFilter *ToolFilter `json:"toolFilter,omitempty"`
	// ProtocolVersion pins the MCP revision offered to the server, such as
	// "2025-11-25" (a key of openclaw-go's that OpenClaw keeps and
	// ignores); "" leaves it to the client (runtime.Options.ProtocolVersion,
	// --upstream-protocol). The server may still negotiate an older one.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
}

// ServerOAuth is the oauth block of an entry (docs/protocol-facts.md, mcp.servers entry schema).
type ServerOAuth struct {
	// Identity is "shared" (or empty) for one set of tokens per server,
	// "per-requester" for one per principal.
	Identity string `json:"identity,omitempty"`
	// AuthProfileID names a credential of OpenClaw's auth-profile store.
	AuthProfileID string `json:"authProfileId,omitempty"`
}

// EntryOf reads an mcp.servers entry of the file into a [ServerEntry]. It
// keeps what has a usable type and leaves the rest unset, as OpenClaw's
// runtime does: a command, url, cwd or transport that is not a string, the
// non-string items of args, a timeout that is not a positive finite
// number, a toolFilter's blank patterns. Env and header values are kept as
// they are, so that [ResolveEntry] can report the unusable ones.
func EntryOf(o *Object) ServerEntry {
	str := func(k string) string { s, _ := o.vals[k].(string); return s }
	ms := func(k string) float64 {
		if f, ok := o.vals[k].(float64); ok && f > 0 && !math.IsInf(f, 0) {
			return f
		}
		return 0
	}
	e := ServerEntry{
		Command: str("command"), Cwd: str("cwd"), WorkingDirectory: str("workingDirectory"),
		URL: str("url"), Transport: str("transport"), Type: str("type"),
		ConnectionTimeoutMs: ms("connectionTimeoutMs"), RequestTimeoutMs: ms("requestTimeoutMs"),
		ClientCert: str("clientCert"), ClientKey: str("clientKey"), Auth: str("auth"),
		ProtocolVersion: str("protocolVersion"),
	}
	if a, ok := o.vals["args"].([]any); ok {
		for _, x := range a {
			if s, ok := x.(string); ok {
				e.Args = append(e.Args, s)
			}
		}
	}
	e.Env = plainMap(o.vals["env"])
	e.Headers = plainMap(o.vals["headers"])
	if b, ok := o.vals["sslVerify"].(bool); ok {
		e.SSLVerify = &b
	}
	if b, ok := o.vals["enabled"].(bool); ok {
		e.Enabled = &b
	}
	e.SupportsParallelToolCalls, _ = o.vals["supportsParallelToolCalls"].(bool)
	if tf, ok := o.vals["toolFilter"].(*Object); ok {
		e.ToolFilter = &ToolFilter{Include: patterns(tf, "include"), Exclude: patterns(tf, "exclude")}
	}
	if ob, ok := o.vals["oauth"].(*Object); ok {
		id, _ := ob.vals["identity"].(string)
		p, _ := ob.vals["authProfileId"].(string)
		e.OAuth = &ServerOAuth{Identity: id, AuthProfileID: p}
	}
	return e
}

// plainMap returns the members of an object value (nil for anything else).
func plainMap(v any) map[string]any {
	o, ok := v.(*Object)
	if !ok || o.Len() == 0 {
		return nil
	}
	m := make(map[string]any, o.Len())
	for _, k := range o.keys {
		m[k] = o.vals[k]
	}
	return m
}

func patterns(o *Object, k string) []string {
	a, _ := o.vals[k].([]any)
	var out []string
	for _, x := range a {
		if s, ok := x.(string); ok && strings.TrimSpace(s) != "" {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// keysIn returns the keys of m: in the order of order when it lists
// exactly them (the file's order), else sorted.
func keysIn(m map[string]any, order []string) []string {
	if len(order) == len(m) {
		ok := true
		for _, k := range order {
			if _, in := m[k]; !in {
				ok = false
				break
			}
		}
		if ok {
			return order
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
