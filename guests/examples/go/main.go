// Command example is an openclaw-go policy module written in Go with the
// guest SDK (guests/sdk/go). It implements all three hooks of the policy
// ABI, with the same rules as the AssemblyScript and Rust examples, so that
// one host-side test table (policies/guesttest) checks all three:
//
//   - before_tool_call: a tool whose name contains "delete" is blocked; a
//     tool whose name starts with "prod__" is allowed only to an
//     authenticated caller in the group "oncall" (the identity's "groups"
//     claim; the self-declared clientInfo never counts); a
//     call whose "path" argument starts with a protected prefix is blocked;
//     messages_send needs a human's approval (60 s); anything else is
//     allowed.
//   - sanitize_tool_names: a tool is exposed as "server__tool", every
//     character outside [A-Za-z0-9_-] turned into "_" and the server part
//     cut to 30 characters ("mcp" if empty); an empty tool name, a name
//     over 64 characters, and a name already taken (reserved, or by an
//     earlier tool, ignoring case) are rejected.
//   - decide_approval: an exec request whose command starts with rm, sudo,
//     dd or mkfs is denied; one starting with ls, pwd, cat or echo is
//     allowed once; everything else (other commands, plugin and tool
//     approvals) is left to a human, with a TTL of two minutes for exec
//     and plugin requests.
//
// Its configuration (optional) lists the protected path prefixes:
//
//	{"protected_paths": ["/etc/", "/root/"]}
//
// The default is ["/etc/"]. An unknown key refuses the configuration.
//
// Build: guests/examples/build.sh (reproducible), or by hand:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w -buildid=' -o policy.wasm .
package main

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	policy "github.com/openclaw-go/openclaw/guests/sdk/go"
)

// protected holds the configured path prefixes.
var protected = []string{"/etc/"}

func init() { policy.OnConfigure(configure) }

func configure(config []byte) error {
	if len(strings.TrimSpace(string(config))) == 0 {
		return nil
	}
	cfg, err := policy.ParseObject(config)
	if err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(cfg)) {
		v := cfg[key]
		switch key {
		case "protected_paths":
			ps, ok := v.Strings()
			if !ok {
				return errors.New("protected_paths: want an array of strings")
			}
			protected = ps
		default:
			return errors.New("unknown key " + strconv.Quote(key) + " (want protected_paths)")
		}
	}
	return nil
}

//go:wasmexport before_tool_call
func beforeToolCall(ptr, size uint32) uint64 {
	return policy.BeforeToolCall(ptr, size, decideCall)
}

//go:wasmexport sanitize_tool_names
func sanitizeToolNames(ptr, size uint32) uint64 {
	return policy.SanitizeToolNames(ptr, size, sanitize)
}

//go:wasmexport decide_approval
func decideApproval(ptr, size uint32) uint64 {
	return policy.DecideApproval(ptr, size, decideApprovalRequest)
}

func decideCall(call *policy.ToolCall) (policy.Verdict, error) {
	if strings.Contains(call.Tool.Name, "delete") {
		return policy.Verdict{Decision: policy.Block, Reason: "deleting is not allowed"}, nil
	}
	if strings.HasPrefix(call.Tool.Name, "prod__") && (call.Identity == nil || !slices.Contains(call.Identity.ClaimStrings("groups"), "oncall")) {
		return policy.Verdict{Decision: policy.Block, Reason: "prod tools are for the on-call group"}, nil
	}
	if path, ok := call.Arguments.Get("path").String(); ok {
		for _, p := range protected {
			if strings.HasPrefix(path, p) {
				return policy.Verdict{Decision: policy.Block, Reason: "path " + path + " is protected"}, nil
			}
		}
	}
	if call.Tool.Name == "messages_send" {
		return policy.Verdict{Decision: policy.RequireApproval, Reason: "sending needs approval",
			Title: "Send a message?", TimeoutMs: 60000}, nil
	}
	return policy.Verdict{Decision: policy.Allow}, nil
}

func sanitize(req *policy.SanitizeRequest) (policy.SanitizeResult, error) {
	taken := map[string]bool{}
	for _, r := range req.Reserved {
		taken[strings.ToLower(r)] = true
	}
	res := policy.SanitizeResult{Servers: make([]policy.SanitizedServer, len(req.Servers))}
	for i, s := range req.Servers {
		safe := clean(strings.TrimSpace(s.Name))
		if len(safe) > maxServerLen {
			safe = safe[:maxServerLen]
		}
		if safe == "" {
			safe = "mcp"
		}
		out := policy.SanitizedServer{Safe: safe, Tools: make([]policy.ToolName, len(s.Tools))}
		for j, tool := range s.Tools {
			tool = strings.TrimSpace(tool)
			name := safe + "__" + clean(tool)
			switch {
			case tool == "":
				out.Tools[j].Reject = "empty tool name"
			case len(name) > policy.MaxToolNameLen:
				out.Tools[j].Reject = "name longer than 64 characters"
			case taken[strings.ToLower(name)]:
				out.Tools[j].Reject = "name " + name + " is taken"
			default:
				taken[strings.ToLower(name)] = true
				out.Tools[j].Name = name
			}
		}
		res.Servers[i] = out
	}
	return res, nil
}

// maxServerLen caps the server part of an exposed name, as OpenClaw does.
const maxServerLen = 30

// clean replaces every character outside [A-Za-z0-9_-] with "_".
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

func decideApprovalRequest(req *policy.ApprovalRequest) (policy.ApprovalDecision, error) {
	const twoMinutes = 120000
	switch req.Kind {
	case policy.KindExec:
		first, _, _ := strings.Cut(strings.TrimSpace(req.Command), " ")
		switch first {
		case "":
			return policy.ApprovalDecision{Decision: policy.Deny, Reason: "exec request without a command"}, nil
		case "rm", "sudo", "dd", "mkfs":
			return policy.ApprovalDecision{Decision: policy.Deny, Reason: "command " + first + " is not allowed"}, nil
		case "ls", "pwd", "cat", "echo":
			return policy.ApprovalDecision{Decision: policy.AllowOnce, Reason: "read-only command"}, nil
		}
		return policy.ApprovalDecision{Decision: policy.Ask, Reason: "needs a human", TTLMs: twoMinutes}, nil
	case policy.KindPlugin:
		return policy.ApprovalDecision{Decision: policy.Ask, Reason: "needs a human", TTLMs: twoMinutes}, nil
	}
	return policy.ApprovalDecision{Decision: policy.Ask, Reason: "needs a human"}, nil
}

func main() {}
