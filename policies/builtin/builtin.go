// Package builtin embeds the policy modules that ship inside the openclaw
// binary, so it works with no policy files. Each is a WebAssembly module of
// the "openclaw-policy v1" ABI built from guests/ by guests/build.sh (the
// committed .wasm is reproducible; CI rebuilds it and checks for a diff).
//
// Modules are named in config and flags as "builtin:<name>":
//
//	m, ok := builtin.Lookup("builtin:rules")
//	p, err := wasmpolicy.Load(ctx, "rules", m.Wasm, m.DefaultConfig, nil)
package builtin

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// Scheme prefixes a built-in module's name where a policy file path could
// appear: "builtin:rules".
const Scheme = "builtin:"

// RulesName is the name of the declarative rules module.
const RulesName = "rules"

// DefaultRulesConfig is the rules module's default ruleset: allow every
// call (the decisions are still audited). The config format is
// docs/rules.md.
const DefaultRulesConfig = `{"default":"allow","rules":[]}`

//go:embed rules.wasm
var rulesWasm []byte

// ApprovalsName is the name of the approval policy module.
const ApprovalsName = "approvals"

// DefaultApprovalsConfig is the approval policy's default: every request
// is left to a human (ask). The config format is docs/policy-abi.md §6.3.
const DefaultApprovalsConfig = `{"default":"ask","rules":[]}`

//go:embed approvals.wasm
var approvalsWasm []byte

// SanitizerName is the name of the tool-name sanitizer module.
const SanitizerName = "sanitizer"

//go:embed sanitizer.wasm
var sanitizerWasm []byte

// Module describes one built-in module.
type Module struct {
	// Name is the module's name without the scheme, e.g. "rules".
	Name string
	// Wasm is a copy of the module's bytes.
	Wasm []byte
	// SHA256 is the hex SHA-256 of Wasm, for pinning and for "which
	// policies are active" reports.
	SHA256 string
	// DefaultConfig is the config to load it with when none is given.
	DefaultConfig json.RawMessage
	// Description says what the module does, in one line.
	Description string
}

// Rules returns a copy of the declarative rules module (guests/rules):
// allow, block or require approval by tool-name glob, server glob, surface
// and argument matchers, configured in JSON (docs/rules.md).
func Rules() []byte { return append([]byte(nil), rulesWasm...) }

// Sanitizer returns a copy of the tool-name sanitizer module
// (guests/sanitizer): OpenClaw's `server__tool` names, with a stable hash
// where OpenClaw would cut a long name into a collision
// (docs/tool-names.md). Its optional config {"prefix":"always"|"never"|"auto"}
// drops the server part of every name ("never"), or only when the catalog
// declares one server ("auto"); "always" is the default (tool-names.md §6).
func Sanitizer() []byte { return append([]byte(nil), sanitizerWasm...) }

// Approvals returns a copy of the approval policy module
// (guests/approvals): decide_approval by JSON rules on kind, tool, server,
// command, session and requester globs; allow-once, allow-always, deny or
// ask with a TTL; ask by default.
func Approvals() []byte { return append([]byte(nil), approvalsWasm...) }

// List returns every built-in module, sorted by name.
func List() []Module {
	return []Module{approvalsModule(), rulesModule(), sanitizerModule()}
}

func approvalsModule() Module {
	return newModule(ApprovalsName, approvalsWasm, DefaultApprovalsConfig,
		"decide_approval by rules on kind, tool, command and session globs; ask by default")
}

func sanitizerModule() Module {
	return newModule(SanitizerName, sanitizerWasm, "",
		"OpenClaw's tool names (server__tool, <= 64 characters, collision suffixes), stable hashes for cut names")
}

// newModule describes a built-in module; config "" means none.
func newModule(name string, wasm []byte, config, description string) Module {
	sum := sha256.Sum256(wasm)
	m := Module{Name: name, Wasm: append([]byte(nil), wasm...), SHA256: hex.EncodeToString(sum[:]), Description: description}
	if config != "" {
		m.DefaultConfig = json.RawMessage(config)
	}
	return m
}

func rulesModule() Module {
	sum := sha256.Sum256(rulesWasm)
	return Module{
		Name:          RulesName,
		Wasm:          Rules(),
		SHA256:        hex.EncodeToString(sum[:]),
		DefaultConfig: json.RawMessage(DefaultRulesConfig),
		Description:   "declarative allow/block/require_approval rules by tool, server, surface and arguments",
	}
}

// Lookup returns the built-in module named ref, given as "builtin:<name>"
// or as the bare name. ok is false for an unknown name.
func Lookup(ref string) (m Module, ok bool) {
	name := strings.TrimPrefix(ref, Scheme)
	for _, b := range List() {
		if b.Name == name {
			return b, true
		}
	}
	return Module{}, false
}

// IsRef reports whether ref names a built-in module ("builtin:" prefix),
// whether or not that module exists.
func IsRef(ref string) bool { return strings.HasPrefix(ref, Scheme) }
