# entrypoints: openclaw/before_tool_call
#
# Fixture for policies/opa: sprintf, the one OPA builtin the host provides.
# Its reasons must match what OPA itself prints (see opa_test.go for the
# strings `opa eval` gave for the same inputs).
package openclaw

before_tool_call := {"decision": "block", "reason": sprintf("tool %s: %d args, %v %v %v %v %.2f %q %5s|%-4d|%v|%v", [
	input.tool.name, count(input.arguments), {"a": [1, "x"], "b": {2, 1}}, true, null, 2.5, 3.14159,
	"quo\"te", "ab", 7, 12345678901234567890, 1e30,
])} if {
	input.tool.name == "exec"
} else := {"decision": "allow", "reason": sprintf("%d", [count(input.arguments)])} if {
	input.tool.name == "count"
} else := {"decision": "allow", "reason": sprintf("%s and %v", ["x"])} if {
	input.tool.name == "missing"
} else := {"decision": "allow", "reason": sprintf("%v", [set()])} if {
	input.tool.name == "empty_set"
}
