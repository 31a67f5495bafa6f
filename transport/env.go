package transport

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// DefaultInheritedEnv lists the variables a stdio child inherits from our
// process, the POSIX default of the MCP SDKs' stdio client (docs/protocol-facts.md, Transport resolution:
// HOME, LOGNAME, PATH, SHELL, TERM, USER). Nothing else of our environment
// reaches the child; the entry's filtered env is merged over this set.
var DefaultInheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

// BlockedEnvError refuses to start a stdio server whose env holds keys of
// OpenClaw's stdio env blocklist (docs/protocol-facts.md, stdio env filter). OpenClaw silently drops such keys;
// openclaw-go does not start the server, so that `doctor` can report it.
type BlockedEnvError struct {
	// Server is the mcp.servers name.
	Server string
	// Keys are the offending keys, as spelled in the config, sorted.
	Keys []string
}

// Error names the server and every blocked key (never their values).
func (e *BlockedEnvError) Error() string {
	quoted := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		quoted[i] = strconv.Quote(k)
	}
	return fmt.Sprintf("transport: server %q not started: env %s on the stdio env blocklist (a child would run code it names); remove it from mcp.servers.%s.env",
		e.Server, strings.Join(quoted, ", "), e.Server)
}

// childEnv builds a child's environment: the inherited safe set from lookup,
// then extra merged over it, sorted by key for a deterministic result.
func childEnv(lookup func(string) (string, bool), extra map[string]string) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	m := map[string]string{}
	for _, k := range DefaultInheritedEnv {
		if v, ok := lookup(k); ok {
			m[k] = v
		}
	}
	for k, v := range extra {
		m[k] = v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	return out
}
