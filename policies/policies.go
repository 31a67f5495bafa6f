// Package policies is the policy contract of openclaw-go: the hook points,
// their inputs and outputs, the before_tool_call chain with its fail-closed
// combination rules, and the decision audit log.
//
// It imports only the standard library. Surfaces (the `mcp serve` bridge,
// `mcp proxy`, the embedded runtime) depend on this package and are handed an
// [Enforcer]; the Wasm adapter (sub-package wasmpolicy) and the embedded
// built-in modules (sub-package builtin) implement [BeforeToolCallHook]. The
// rules are those of docs/policy-abi.md §5:
//
//   - modules run in the configured order; the first block stops the chain;
//     block wins over require_approval, which wins over allow;
//   - argument rewrites pass to the next module;
//   - a module that fails (error, trap, timeout, malformed or unknown output)
//     counts as a block naming the module: policies fail closed;
//   - every verdict is written to the audit log, without argument values.
//
// The other two hook points have their own chains: [SanitizeChain] names
// a catalog of imported tools (sanitize_tool_names; a failing module fails
// the build, every answer is checked by [ValidateSanitized]) and
// [ApprovalChain] decides approval requests (decide_approval; deny > ask >
// allow-once > allow-always, a failing module denies, allow-always is
// remembered by an [ApprovalMemory]). docs/policy-abi.md §6 and
// docs/tool-names.md describe them.
//
// Each hook point has the same vocabulary. A hook's answer is a decision
// ([Decision], [ApprovalDecision]); one module answers a verdict
// ([Verdict], [ApprovalVerdict]) through the interface named after its
// hook ([BeforeToolCallHook], [DecideApprovalHook],
// [SanitizeToolNamesHook]); a chain combines them into an outcome
// ([Outcome], [ApprovalOutcome]) and is what a surface holds: an
// [Enforcer], an [ApprovalDecider], a [Sanitizer] (whose modules and chain
// answer the same [SanitizeResult]).
//
// Usage sketch:
//
//	chain := policies.NewChain([]policies.ChainEntry{{Hook: rules}}, &policies.ChainOptions{Audit: policies.NewAuditLog(f)})
//	out := chain.BeforeToolCall(ctx, &policies.ToolCall{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "messages_send"}})
//	if out.Decision != policies.Allow { /* refuse with out.Message() */ }
package policies

import (
	"context"
	"encoding/json"
	"fmt"
)

// Hook names a hook point; the names are also the Wasm export names of the
// policy ABI (docs/policy-abi.md).
type Hook string

// The three hook points (docs/policy-abi.md §2).
const (
	HookBeforeToolCall    Hook = "before_tool_call"
	HookSanitizeToolNames Hook = "sanitize_tool_names"
	HookDecideApproval    Hook = "decide_approval"
)

// Surface says where a tool call entered.
type Surface string

// Surfaces that pass the hook boundary.
const (
	SurfaceServe    Surface = "serve"    // openclaw mcp serve: the 9 bridge tools
	SurfaceProxy    Surface = "proxy"    // openclaw mcp proxy
	SurfaceEmbedded Surface = "embedded" // the runtime library
)

// Caller identifies the MCP client that made a call (clientInfo of its
// initialize request).
type Caller struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// Identity is the authenticated identity of a caller: who the surface
// verified, by a bearer token it checked (an OAuth access token of a
// trusted issuer, or a static token the operator named). Unlike [Caller],
// which the client declares about itself, a policy may base access
// decisions on it. Surfaces without authentication leave it nil. One
// Identity is shared by the calls made with one token: hooks read it and
// never modify it.
type Identity struct {
	// Issuer is the token's issuer: the "iss" claim of an OAuth access
	// token, "tokens-file" for a static token of the tokens file.
	Issuer string `json:"issuer,omitempty"`
	// Subject is who the token was issued to: the "sub" claim, or the
	// identity name of a static token.
	Subject string `json:"subject"`
	// ClientID is the OAuth client that obtained the token ("client_id",
	// else "azp"); empty for static tokens.
	ClientID string `json:"client_id,omitempty"`
	// Scopes are the token's scopes ("scope", space separated, or "scp").
	Scopes []string `json:"scopes,omitempty"`
	// Claims are the further claims the operator names (e.g. "groups"),
	// as the token carries them; only named claims that are present.
	Claims map[string]json.RawMessage `json:"claims,omitempty"`
}

// RequesterKey names who asked for a decision, so that a module's
// instances can be shared fairly between requesters (a requester whose
// calls make a module fail is served after the others): the session key
// when there is one, else "client:" and the caller's name and version, ""
// when neither is known (no one in particular).
func RequesterKey(sessionKey string, c Caller) string {
	switch {
	case sessionKey != "":
		return sessionKey
	case c.Name != "" || c.Version != "":
		return "client:" + c.Name + "/" + c.Version
	}
	return ""
}

// ToolRef names the tool being called: Name is the exposed name; Server and
// RawName are the raw server name and the raw tool name (the server's own
// name of the tool, `tool.original` on the wire) where the tool was
// imported, empty for the bridge's own tools (docs/tool-names.md).
type ToolRef struct {
	Name    string `json:"name"`
	Server  string `json:"server,omitempty"`
	RawName string `json:"original,omitempty"`
}

// ToolCall is the input of before_tool_call. Pin is set for a tool of a
// server with pins (docs/tool-pins.md), nil otherwise.
type ToolCall struct {
	Surface    Surface `json:"surface"`
	SessionKey string  `json:"session_key,omitempty"`
	Caller     Caller  `json:"caller"`
	// Identity is the authenticated caller, nil when the surface has none.
	Identity  *Identity       `json:"identity,omitempty"`
	Tool      ToolRef         `json:"tool"`
	Pin       *ToolPin        `json:"pin,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolPin is the pin state of an imported tool whose server has pins
// (`openclaw mcp trust`): State is PinTrusted when the listed definition is
// the one trusted, PinChanged when it differs, PinNew when the server's
// pins have no such tool. Digest is the listed definition's digest and
// Pinned the trusted one ("" for a new tool), each "sha256:" and 64
// lowercase hex digits.
type ToolPin struct {
	State  string `json:"state"`
	Digest string `json:"digest"`
	Pinned string `json:"pinned,omitempty"`
}

// The pin states of ToolPin.State.
const (
	PinTrusted = "trusted"
	PinChanged = "changed"
	PinNew     = "new"
)

// Decision is a before_tool_call answer: the `decision` of a module's
// [Verdict] and of a chain's [Outcome].
type Decision string

// The before_tool_call decisions.
const (
	Allow           Decision = "allow"
	Block           Decision = "block"
	RequireApproval Decision = "require_approval"
)

// rank orders decisions for combination: block > require_approval > allow.
func (d Decision) rank() int {
	switch d {
	case Allow:
		return 0
	case RequireApproval:
		return 1
	default:
		return 2
	}
}

// Valid reports whether d is one of the three decisions.
func (d Decision) Valid() bool { return d == Allow || d == Block || d == RequireApproval }

// Verdict is one module's answer to before_tool_call. Title, Description and
// TimeoutMs describe the approval a require_approval asks for; Arguments,
// when set, replaces the call's arguments for later modules and the tool.
type Verdict struct {
	Decision    Decision        `json:"decision"`
	Reason      string          `json:"reason,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	TimeoutMs   int64           `json:"timeout_ms,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
}

// BeforeToolCallHook is a policy module serving before_tool_call. Name is
// the module's configured name, used in reasons and audit records.
// BeforeToolCall returns an error when the module failed; the chain then
// blocks (fail closed). Implementations are safe for concurrent use.
type BeforeToolCallHook interface {
	Name() string
	BeforeToolCall(ctx context.Context, call *ToolCall) (Verdict, error)
}

// Enforcer is what a surface needs from the policy layer for
// before_tool_call: one combined [Outcome] per tool call. [*Chain] and the
// policy engine (policies/engine.Engine) implement it.
type Enforcer interface {
	BeforeToolCall(ctx context.Context, call *ToolCall) Outcome
}

// Sanitizer is what a surface needs from the policy layer for
// sanitize_tool_names: the exposed names of a whole catalog, validated
// against the request ([ValidateSanitized]), or an error (a
// [*SanitizeError] naming the module; the catalog build then fails, and no
// name is exposed that a module did not answer). [*SanitizeChain] and the
// policy engine (policies/engine.Engine) implement it.
type Sanitizer interface {
	SanitizeToolNames(ctx context.Context, req *SanitizeRequest) (*SanitizeResult, error)
}

// ApprovalDecider is what a surface needs from the policy layer for
// decide_approval: one combined [ApprovalOutcome] per approval request
// (deny > ask > allow-once > allow-always; a failing module denies).
// [*ApprovalChain] and the policy engine (policies/engine.Engine)
// implement it.
type ApprovalDecider interface {
	DecideApproval(ctx context.Context, req *ApprovalRequest) ApprovalOutcome
}

// Outcome is the combined answer of a [Chain]. Module names the module whose
// verdict decided (empty for an allow by every module, or for an empty
// chain); Arguments are the arguments to call the tool with (the input's,
// unless a module rewrote them).
type Outcome struct {
	Decision    Decision
	Reason      string
	Module      string
	Title       string
	Description string
	TimeoutMs   int64
	Arguments   json.RawMessage
	// RewrittenBy names the module whose rewrite Arguments carry (the last
	// enforcing module that returned arguments), "" when none did.
	RewrittenBy string
}

// Message is the text a surface shows the caller for an outcome that is not
// an allow: `blocked by policy "rules": writes are disabled`.
func (o Outcome) Message() string {
	what := "blocked"
	if o.Decision == RequireApproval {
		what = "approval required"
	}
	if o.Reason == "" {
		return fmt.Sprintf("%s by policy %q", what, o.Module)
	}
	return fmt.Sprintf("%s by policy %q: %s", what, o.Module, o.Reason)
}
