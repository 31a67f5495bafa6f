# An example openclaw-go policy written in Rego (OPA v1 syntax), serving all
# three hook points. guests/rego/build.sh compiles it with
# `opa build -t wasm` into policy.wasm, which openclaw-go runs unchanged
# through its OPA adapter (policies/opa).
#
# How the adapter calls it:
#   - each hook is one rule of package openclaw (entrypoints
#     openclaw/before_tool_call, openclaw/sanitize_tool_names,
#     openclaw/decide_approval);
#   - `input` is the hook's JSON input of docs/policy-abi.md, the rule's
#     value is the hook's output object, decoded strictly (an unknown field
#     or decision blocks); a rule that is undefined for an input fails
#     closed, so every rule below ends in an unconditional `else`;
#   - the module's JSON config is the `data` document. This policy reads
#       {"blocked_tools": [...], "approval_tools": [...], "readonly_commands": [...]}
#     and each key is optional;
#   - only the builtins OPA compiles into the module are available, plus
#     sprintf, which the host provides: no http.send, no clock, no
#     randomness (a module that needs one is refused at load, naming it).
# entrypoints: openclaw/before_tool_call openclaw/sanitize_tool_names openclaw/decide_approval
package openclaw

# ---------------------------------------------------------------------------
# before_tool_call: block, require_approval or allow one tool call.

# Tools blocked outright, by exposed name (config "blocked_tools").
blocked_tools contains name if some name in data.blocked_tools

# Tools that need a human's yes (config "approval_tools"; by default the
# bridge's messages_send, which speaks to real people).
approval_tools := {name | some name in data.approval_tools} if {
	data.approval_tools
} else := {"messages_send"}

# A path argument that reaches outside the workspace or into secrets.
protected_path(p) if startswith(p, "/etc/")

protected_path(p) if contains(p, "../")

protected_path(p) if contains(p, "/.ssh/")

block_reasons contains msg if {
	input.tool.name in blocked_tools
	msg := concat("", ["tool ", input.tool.name, " is blocked by configuration"])
}

block_reasons contains msg if {
	some key, value in input.arguments
	is_string(value)
	protected_path(value)
	msg := concat("", ["argument ", key, " names a protected path"])
}

before_tool_call := {"decision": "block", "reason": concat("; ", sort(block_reasons))} if {
	count(block_reasons) > 0
} else := {
	"decision": "require_approval",
	"reason": "this tool acts outside the agent",
	"title": concat("", ["Allow ", input.tool.name, "?"]),
	"description": concat("", ["The agent asks to call ", input.tool.name, "."]),
	"timeout_ms": 120000,
} if {
	input.tool.name in approval_tools
} else := {"decision": "allow"}

# ---------------------------------------------------------------------------
# sanitize_tool_names: one exposed name (or a rejection) per (server, tool),
# in input order: "server__tool" with every character outside [A-Za-z0-9_-]
# replaced by "_", rejected when empty or longer than max_len.

allowed_chars := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

clean(s) := concat("", [out |
	some c in split(s, "")
	out := keep(c)
])

keep(c) := c if {
	indexof(allowed_chars, c) >= 0
} else := "_"

max_len := input.max_len if {
	input.max_len > 0
} else := 64

exposed(t) := {"reject": "empty server or tool name"} if {
	t.server == ""
} else := {"reject": "empty server or tool name"} if {
	t.name == ""
} else := {"name": n} if {
	n := concat("__", [clean(t.server), clean(t.name)])
	count(n) <= max_len
} else := {"reject": concat("", ["name longer than ", format_int(max_len, 10), " characters"])}

sanitize_tool_names := {"tools": [e |
	some t in input.tools
	e := exposed(t)
]}

# ---------------------------------------------------------------------------
# decide_approval: allow-once, deny, or ask a human.

# Commands that only read (config "readonly_commands").
readonly_commands := {c | some c in data.readonly_commands} if {
	data.readonly_commands
} else := {"ls", "cat", "pwd", "whoami", "date"}

# The command's words, with the shell's separators ; & | as spaces.
command_words := [w |
	some w in split(strings.replace_n({";": " ", "&": " ", "|": " "}, input.request.command), " ")
	w != ""
]

# Destructive or network commands anywhere in the line. (Plain string
# builtins, not regex.match: OPA compiles a pattern on every evaluation,
# which costs ~0.4 ms under the sandbox's interruption.)
dangerous_commands := {"rm", "sudo", "curl", "wget", "mkfs", "dd", "ssh", "scp"}

dangerous if {
	some w in command_words
	w in dangerous_commands
}

decide_approval := {"decision": "deny", "reason": "destructive or network command", "ttl_ms": 0} if {
	input.kind == "exec"
	dangerous
} else := {"decision": "allow-once", "reason": "read-only command", "ttl_ms": 0} if {
	input.kind == "exec"
	command_words[0] in readonly_commands
} else := {"decision": "ask", "reason": "needs a human", "ttl_ms": 300000}
