# entrypoints: mcp/policy/decision
#
# Fixture for policies/opa: one entrypoint named "decision" (no package
# openclaw) serves before_tool_call.
package mcp.policy

default decision := {"decision": "allow"}

decision := {"decision": "block", "reason": "no shell"} if input.tool.name == "exec"
