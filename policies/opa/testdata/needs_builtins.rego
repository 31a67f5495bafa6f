# entrypoints: openclaw/before_tool_call
#
# Fixture for policies/opa: a policy that needs OPA builtins the host does
# not provide (a clock and the network). Loading it must fail, naming them.
package openclaw

recent if time.now_ns() > 0

reachable if http.send({"method": "get", "url": "http://127.0.0.1:1/"}).status_code == 200

default before_tool_call := {"decision": "block"}

before_tool_call := {"decision": "allow"} if {
	recent
	reachable
}
