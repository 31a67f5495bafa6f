package config

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/openclaw-go/openclaw/internal/redact"
)

// Defaults of an mcp.servers entry (docs/protocol-facts.md, Defaults and limits).
const (
	DefaultConnectionTimeoutMs = 30000
	DefaultRequestTimeoutMs    = 60000
)

// Transport kinds a resolved entry has (docs/protocol-facts.md, Transport resolution).
const (
	TransportStdio          = "stdio"
	TransportSSE            = "sse"
	TransportStreamableHTTP = "streamable-http"
)

// ResolvedServer is an mcp.servers entry resolved the way OpenClaw's
// runtime does before it connects (docs/protocol-facts.md, Transport resolution): which transport, what to launch
// or dial, the effective timeouts, and the env keys the stdio filter drops.
// It does not connect and does not read the environment.
type ResolvedServer struct {
	// Name is the entry's key in mcp.servers.
	Name string
	// Entry is the entry that was resolved, as given.
	Entry ServerEntry
	// Transport is TransportStdio, TransportSSE or TransportStreamableHTTP.
	Transport string
	// Command, Args and Cwd are set for stdio: the command untrimmed, the
	// args, cwd (else workingDirectory) when non-empty.
	Command string
	Args    []string
	Cwd     string
	// Env is the stdio env after OpenClaw's filter ([FilterStdioEnv]),
	// values converted with [EnvValueString]; BlockedEnv lists the keys the
	// filter dropped, as written, and DroppedEnv the keys whose values are
	// not a string, number or boolean. File order for an entry read from
	// the file, else sorted by key.
	Env        []EnvVar
	BlockedEnv []string
	DroppedEnv []string
	// URL is set for SSE and streamable HTTP.
	URL string
	// Description is the launch string `mcp status` shows, secrets
	// redacted (docs/protocol-facts.md, Redaction): "<command> <args> (cwd=<cwd>)" or the URL.
	Description string
	// RequestTimeoutMs and ConnectionTimeoutMs are the configured values or
	// the defaults, in milliseconds.
	RequestTimeoutMs    float64
	ConnectionTimeoutMs float64
	// SupportsParallelToolCalls is true only when configured true.
	SupportsParallelToolCalls bool
	// SSLVerify is false only when configured false; ClientCert and
	// ClientKey are the configured mTLS file paths.
	SSLVerify             bool
	ClientCert, ClientKey string
	// Headers are the HTTP headers, values converted with
	// [EnvValueString] (numbers as JavaScript's String()), in the order of
	// Env; values of other types are left out and their names listed in
	// DroppedHeaders. With auth "oauth" any Authorization header is left
	// out (docs/protocol-facts.md, Transport resolution) and its name listed in RemovedHeaders. Values are as
	// written: ${NAME} is expanded when the server is connected.
	Headers        []EnvVar
	DroppedHeaders []string
	RemovedHeaders []string
	// Enabled is false only when configured false.
	Enabled bool
	// OAuth is true for auth "oauth".
	OAuth bool
	// ToolFilter holds the trimmed, non-empty include and exclude patterns;
	// nil when the entry has no toolFilter.
	ToolFilter *ToolFilter
}

// ToolFilter is an entry's toolFilter: a tool is exposed when Include is
// empty or one of its patterns matches, and no Exclude pattern matches;
// "*" matches any run of characters (docs/protocol-facts.md, Tool filter).
type ToolFilter struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// EnvVar is one environment entry, its value converted to a string.
type EnvVar struct{ Key, Value string }

// ErrNoTransport is wrapped by [ResolveEntry] when an entry has neither a
// usable command nor a usable URL.
var ErrNoTransport = errors.New("config: no usable MCP transport")

// ResolveServer resolves the entry e of the file called name with
// [ResolveEntry]; env and headers keep the file's order. When the entry
// has no usable transport and a misspelled key ([EntryKeyTypos]) may be
// why, the error names it.
func ResolveServer(name string, e *Object) (*ResolvedServer, error) {
	var envOrder, headerOrder []string
	if o, ok := e.vals["env"].(*Object); ok {
		envOrder = o.Keys()
	}
	if o, ok := e.vals["headers"].(*Object); ok {
		headerOrder = o.Keys()
	}
	r, err := resolveEntry(name, EntryOf(e), envOrder, headerOrder)
	if errors.Is(err, ErrNoTransport) {
		for _, k := range EntryKeyTypos("mcp.servers."+name, e) {
			err = fmt.Errorf("%w; %s", err, k.Message())
		}
	}
	return r, err
}

// ResolveEntry resolves entry e called name (docs/protocol-facts.md, Transport resolution):
//  1. a command that is a non-empty string (after trimming) means stdio,
//     whatever else the entry says;
//  2. otherwise the transport is "transport" (trimmed, lowercased), else
//     the "type" alias; anything but sse or streamable-http (http) is an
//     error;
//  3. an http: or https: url with a host is then required; with no
//     transport given it is SSE.
//
// The error names the server, wraps [ErrNoTransport] and says why, secrets
// redacted. Env and headers are in key order.
func ResolveEntry(name string, e ServerEntry) (*ResolvedServer, error) {
	return resolveEntry(name, e, nil, nil)
}

func resolveEntry(name string, e ServerEntry, envOrder, headerOrder []string) (*ResolvedServer, error) {
	r := &ResolvedServer{
		Name:                      name,
		Entry:                     e,
		RequestTimeoutMs:          positiveOr(e.RequestTimeoutMs, DefaultRequestTimeoutMs),
		ConnectionTimeoutMs:       positiveOr(e.ConnectionTimeoutMs, DefaultConnectionTimeoutMs),
		SSLVerify:                 e.SSLVerify == nil || *e.SSLVerify,
		SupportsParallelToolCalls: e.SupportsParallelToolCalls,
		Enabled:                   e.Enabled == nil || *e.Enabled,
		OAuth:                     e.Auth == "oauth",
		ClientCert:                e.ClientCert,
		ClientKey:                 e.ClientKey,
	}
	if e.ToolFilter != nil {
		r.ToolFilter = &ToolFilter{Include: slices.Clone(e.ToolFilter.Include), Exclude: slices.Clone(e.ToolFilter.Exclude)}
	}
	if strings.TrimSpace(e.Command) != "" {
		r.Transport = TransportStdio
		r.Command = e.Command
		r.Args = slices.Clone(e.Args)
		r.Cwd = e.Cwd
		if r.Cwd == "" {
			r.Cwd = e.WorkingDirectory
		}
		r.Env, r.BlockedEnv, r.DroppedEnv = filterStdioEnv(keysIn(e.Env, envOrder), e.Env)
		r.Description = redact.StdioLaunch(r.Command, r.Args, r.Cwd)
		return r, nil
	}
	requested := strings.ToLower(strings.TrimSpace(e.Transport))
	if requested == "" {
		requested = strings.ToLower(strings.TrimSpace(e.Type))
		if requested == "http" {
			requested = TransportStreamableHTTP
		}
	}
	if requested != "" && requested != TransportSSE && requested != TransportStreamableHTTP {
		return nil, fmt.Errorf("%w: server %q: transport %q is not supported (use sse or streamable-http, or give a command for stdio)", ErrNoTransport, name, requested)
	}
	u := e.URL
	if strings.TrimSpace(u) == "" {
		return nil, fmt.Errorf("%w: server %q: no non-empty command for stdio and no url for HTTP", ErrNoTransport, name)
	}
	if _, ok := httpURL(u, false); !ok {
		return nil, fmt.Errorf("%w: server %q: no non-empty command for stdio, and url %q is not an http: or https: URL", ErrNoTransport, name, redact.URL(u))
	}
	if requested == "" {
		requested = TransportSSE
	}
	r.Transport = requested
	r.URL = u
	for _, k := range keysIn(e.Headers, headerOrder) {
		if r.OAuth && strings.EqualFold(k, "Authorization") {
			r.RemovedHeaders = append(r.RemovedHeaders, k)
			continue
		}
		if v, ok := EnvValueString(e.Headers[k]); ok {
			r.Headers = append(r.Headers, EnvVar{k, v})
		} else {
			r.DroppedHeaders = append(r.DroppedHeaders, k)
		}
	}
	r.Description = redact.URL(u)
	return r, nil
}

// ResolveServers resolves every entry of mcp.servers in file order (the
// declaration order OpenClaw names servers in). Entries that cannot be
// resolved are returned as errors wrapping [ErrNoTransport], in the same
// order, and left out of the list.
func (d *Document) ResolveServers() ([]*ResolvedServer, []error) {
	servers := d.Servers()
	var out []*ResolvedServer
	var errs []error
	for _, name := range servers.Keys() {
		e, _ := servers.Get(name)
		r, err := ResolveServer(name, e.(*Object))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errs
}

func positiveOr(f, def float64) float64 {
	if f > 0 && !math.IsInf(f, 0) {
		return f
	}
	return def
}

//go:embed stdio_env_policy.json
var stdioEnvPolicyJSON []byte

type stdioEnvPolicy struct {
	BlockedEverywhereKeys            []string `json:"blockedEverywhereKeys"`
	BlockedOverrideOnlyKeys          []string `json:"blockedOverrideOnlyKeys"`
	AllowedInheritedOverrideOnlyKeys []string `json:"allowedInheritedOverrideOnlyKeys"`
	BlockedPrefixes                  []string `json:"blockedPrefixes"`
	MCPExplicitCredentialAllowlist   []string `json:"mcpExplicitCredentialAllowlist"`
}

var stdioEnv = func() (p struct {
	hard, blocked, allow map[string]bool
	prefixes             []string
}) {
	var raw stdioEnvPolicy
	if err := json.Unmarshal(stdioEnvPolicyJSON, &raw); err != nil {
		panic("config: embedded stdio_env_policy.json: " + err.Error())
	}
	set := func(keys ...[]string) map[string]bool {
		m := map[string]bool{}
		for _, ks := range keys {
			for _, k := range ks {
				m[strings.ToUpper(k)] = true
			}
		}
		return m
	}
	p.hard = set(raw.BlockedEverywhereKeys)
	p.allow = set(raw.MCPExplicitCredentialAllowlist)
	inherited := set(raw.AllowedInheritedOverrideOnlyKeys)
	p.blocked = set(raw.BlockedEverywhereKeys)
	for _, k := range raw.BlockedOverrideOnlyKeys {
		if !inherited[strings.ToUpper(k)] {
			p.blocked[strings.ToUpper(k)] = true
		}
	}
	for k := range p.allow {
		if !p.hard[k] {
			delete(p.blocked, k)
		}
	}
	p.prefixes = raw.BlockedPrefixes
	return p
}()

// IsBlockedStdioEnvKey reports whether OpenClaw's stdio env filter drops
// key (docs/protocol-facts.md, stdio env filter): the trimmed, upper-cased key is hard-blocked (blocked
// everywhere, or prefixed DYLD_, LD_ or BASH_FUNC_); else kept when on the
// MCP credential allowlist; else dropped when in the blocked-everywhere
// set or the override-only set minus the keys allowed to be inherited. An
// empty key is kept.
func IsBlockedStdioEnvKey(key string) bool {
	k := strings.ToUpper(strings.TrimSpace(key))
	if k == "" {
		return false
	}
	hasPrefix := false
	for _, p := range stdioEnv.prefixes {
		if strings.HasPrefix(k, p) {
			hasPrefix = true
		}
	}
	if stdioEnv.hard[k] || hasPrefix {
		return true
	}
	if stdioEnv.allow[k] {
		return false
	}
	return stdioEnv.blocked[k]
}

// FilterStdioEnv applies OpenClaw's stdio env filter (docs/protocol-facts.md, stdio env filter) to an entry's
// env object: blocked keys are dropped (and returned, as written), strings
// kept, numbers and booleans converted with [EnvValueString], other values
// dropped. Kept keys keep their spelling and order.
func FilterStdioEnv(env *Object) (kept []EnvVar, blocked []string) {
	kept, blocked, _ = filterStdioEnv(env.Keys(), env.vals)
	return kept, blocked
}

// filterStdioEnv is the stdio env filter over the keys of env in the order
// given; dropped lists the kept keys whose values have an unusable type.
func filterStdioEnv(keys []string, env map[string]any) (kept []EnvVar, blocked, dropped []string) {
	for _, k := range keys {
		if IsBlockedStdioEnvKey(k) {
			blocked = append(blocked, k)
			continue
		}
		if v, ok := EnvValueString(env[k]); ok {
			kept = append(kept, EnvVar{k, v})
		} else {
			dropped = append(dropped, k)
		}
	}
	return kept, blocked, dropped
}

// BlockedStdioEnvKeys returns the env keys of entry e that OpenClaw's
// filter drops, for a stdio entry (non-empty command) only, in file order.
func BlockedStdioEnvKeys(e *Object) []string {
	cmd, ok := e.vals["command"].(string)
	if !ok || strings.TrimSpace(cmd) == "" {
		return nil
	}
	env, ok := e.vals["env"].(*Object)
	if !ok {
		return nil
	}
	_, blocked := FilterStdioEnv(env)
	return blocked
}
