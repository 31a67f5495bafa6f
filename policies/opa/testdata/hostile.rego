# entrypoints: openclaw/before_tool_call openclaw/sanitize_tool_names
#
# Containment fixture for policies/opa: before_tool_call misbehaves in the
# way input.tool.name asks for. sanitize_tool_names is undefined for every
# input (no default).
package openclaw

# spin: 25 million iterations, seconds of work: far past any deadline
# under test. (OPA allocates as it iterates, about 150 MB/s here: give the
# module a memory cap large enough for the deadline to come first.)
spins if {
	some i in numbers.range(1, 5000)
	some j in numbers.range(1, 5000)
	i > j
	j > i
}

# hog: an array of ten million numbers, far past a small memory cap.
hog := count([x | some x in numbers.range(1, 10000000)])

before_tool_call := {"decision": "allow", "reason": "never"} if {
	input.tool.name == "spin"
	spins
} else := {"decision": "allow", "reason": format_int(hog, 10)} if {
	input.tool.name == "hog"
} else := {"decision": "maybe"} if {
	input.tool.name == "unknown_decision"
} else := {"decision": "allow", "extra": true} if {
	input.tool.name == "unknown_field"
} else := "allow" if {
	input.tool.name == "not_an_object"
} else := {"decision": "allow", "reason": data.greeting} if {
	input.tool.name == "greet"
} else := {"decision": "allow"} if {
	input.tool.name == "ok"
}

sanitize_tool_names := {"tools": []} if {
	input.never_set
}
