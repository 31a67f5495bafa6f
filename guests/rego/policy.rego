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
#   - input.identity is the authenticated caller (issuer, subject, scopes,
#     claims) when the surface has one, absent otherwise; input.caller is
#     the self-declared clientInfo;
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

# The authenticated caller's groups: the "groups" claim of input.identity,
# which the proxy fills from a verified token (a list of strings, or one
# string). input.caller is the client's self-declared clientInfo and never
# counts: anyone can call themselves "oncall" there.
caller_groups contains g if {
	some g in input.identity.claims.groups
	is_string(g)
}

caller_groups contains g if {
	g := input.identity.claims.groups
	is_string(g)
}

# Tools whose exposed name starts with "prod__" are for the on-call group.
block_reasons contains "prod tools are for the on-call group" if {
	startswith(input.tool.name, "prod__")
	not "oncall" in caller_groups
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
# sanitize_tool_names: for each server of the catalog, in order, a safe
# server name and one exposed name (or a rejection) per tool. Names are
# "server__tool" with every character outside [A-Za-z0-9_-] replaced by
# "_", the server part cut to 30 characters. A tool is rejected when its
# name is empty, the whole name is over 64 characters, or it collides
# (ignoring case) with a reserved name or an earlier tool. (The built-in
# sanitizer keeps such tools under hashed names; this example stays short.)

allowed_chars := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

clean(s) := concat("", [out |
	some c in split(s, "")
	out := keep(c)
])

keep(c) := c if {
	indexof(allowed_chars, c) >= 0
} else := "_"

safe_name(server) := substring(clean(server), 0, 30) if {
	clean(server) != ""
} else := "server"

reserved := {lower(r) | some r in input.reserved}

# candidate[[i, j]] is the name of tool j of server i before any check.
candidate[[i, j]] := concat("__", [safe_name(server.name), clean(tool)]) if {
	some i, server in input.servers
	some j, tool in server.tools
}

# The candidates sorted by lowered name, then position: a candidate whose
# predecessor has the same lowered name is a later duplicate. (Sorting
# keeps this linear-logarithmic; comparing every pair would not be.)
by_name := sort([[lower(n), k[0], k[1]] | some k, n in candidate])

duplicate contains [e[1], e[2]] if {
	some x, e in by_name
	x > 0
	by_name[x - 1][0] == e[0]
}

tool_entry(i, j) := {"reject": "empty tool name"} if {
	trim_space(input.servers[i].tools[j]) == ""
} else := {"reject": concat("", ["name over 64 characters: ", candidate[[i, j]]])} if {
	count(candidate[[i, j]]) > 64
} else := {"reject": "name reserved by the surface"} if {
	lower(candidate[[i, j]]) in reserved
} else := {"reject": "name taken by an earlier tool"} if {
	[i, j] in duplicate
} else := {"name": candidate[[i, j]]}

sanitize_tool_names := {"servers": [entry |
	some i, server in input.servers
	entry := {
		"safe": safe_name(server.name),
		"tools": [t | some j, _ in server.tools; t := tool_entry(i, j)],
	}
]}

# ---------------------------------------------------------------------------
# decide_approval: allow-once, deny, or ask a human. Exec approvals carry
# the command line in input.command; tool and plugin approvals are asked.

# Commands that only read (config "readonly_commands").
readonly_commands := {c | some c in data.readonly_commands} if {
	data.readonly_commands
} else := {"ls", "cat", "pwd", "whoami", "date"}

# The command's words, with the shell's separators ; & | as spaces.
command_words := [w |
	some w in split(strings.replace_n({";": " ", "&": " ", "|": " "}, input.command), " ")
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
