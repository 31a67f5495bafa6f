package policy

import (
	"errors"
	"strconv"
)

// The approval kinds of ABI v1 ([ApprovalRequest.Kind]).
const (
	KindExec   = "exec"   // a Gateway exec.approval request
	KindPlugin = "plugin" // a Gateway plugin.approval request
	KindTool   = "tool"   // a before_tool_call require_approval outcome
)

// ApprovalRequest is the input of decide_approval (docs/policy-abi.md
// §6.2). Kind is KindExec, KindPlugin or KindTool; ID the approval's id;
// Surface where a tool approval's call entered (empty for Gateway
// approvals); SessionKey the Gateway session; Requester the MCP client
// whose call raised a tool approval, or the Gateway's agent
// ("agent:<agentId>") for exec approvals; Tool the tool concerned (the
// called tool for KindTool, the plugin's toolName for KindPlugin, empty
// for KindExec); Command the command of an exec approval. Request is the
// full payload: the Gateway's request object (exec: command, cwd, host,
// …; plugin: pluginId, title, description, …), or for KindTool the
// before_tool_call verdict that asked ({"reason","title","description",
// "module"}); it is valid only during the hook call.
type ApprovalRequest struct {
	Kind       string
	ID         string
	Surface    Surface
	SessionKey string
	Requester  Caller
	// Identity is the authenticated caller whose call raised a tool
	// approval, nil when the surface has none.
	Identity *Identity
	Tool     ToolRef
	Command  string
	Request  Raw
}

// ApprovalOutcome is a decide_approval decision.
type ApprovalOutcome string

// The decide_approval outcomes.
const (
	AllowOnce   ApprovalOutcome = "allow-once"
	AllowAlways ApprovalOutcome = "allow-always"
	Deny        ApprovalOutcome = "deny"
	Ask         ApprovalOutcome = "ask" // leave it to a human
)

// ApprovalDecision is the output of decide_approval. TTLMs is in
// milliseconds: for Ask, how long a human has to answer before the request
// is denied (0: the request's own expiry or the surface's default); for
// AllowAlways, how long the grant is remembered (0: for the life of the
// host process); ignored otherwise.
type ApprovalDecision struct {
	Decision ApprovalOutcome
	Reason   string
	TTLMs    int64
}

// DecideApproval serves the decide_approval export like [BeforeToolCall]
// serves before_tool_call; any failure is a deny on the host.
//
//	//go:wasmexport decide_approval
//	func decideApproval(ptr, size uint32) uint64 { return policy.DecideApproval(ptr, size, decide) }
func DecideApproval(ptr, size uint32, decide func(req *ApprovalRequest) (ApprovalDecision, error)) uint64 {
	var req ApprovalRequest
	if err := DecodeApprovalRequest(view(ptr, size), &req); err != nil {
		return result(nil, err)
	}
	dec, err := decide(&req)
	if err != nil {
		return result(nil, err)
	}
	b, err := AppendApprovalDecision(out[:0], &dec)
	return result(b, err)
}

// DecodeApprovalRequest decodes a decide_approval input. Unknown members
// are ignored.
func DecodeApprovalRequest(in []byte, req *ApprovalRequest) error {
	d := decoder{b: in}
	err := d.object(func(k []byte, d *decoder) error {
		var err error
		switch string(k) {
		case "kind":
			req.Kind, err = d.str()
		case "id":
			req.ID, err = d.str()
		case "surface":
			var s string
			s, err = d.str()
			req.Surface = Surface(s)
		case "command":
			req.Command, err = d.str()
		case "tool":
			err = d.object(func(k []byte, d *decoder) error {
				switch string(k) {
				case "name":
					req.Tool.Name, err = d.str()
				case "server":
					req.Tool.Server, err = d.str()
				case "original":
					req.Tool.Original, err = d.str()
				default:
					_, err = d.skip()
				}
				return err
			})
		case "session_key":
			req.SessionKey, err = d.str()
		case "requester":
			err = d.object(func(k []byte, d *decoder) error {
				switch string(k) {
				case "name":
					req.Requester.Name, err = d.str()
				case "version":
					req.Requester.Version, err = d.str()
				default:
					_, err = d.skip()
				}
				return err
			})
		case "identity":
			req.Identity, err = decodeIdentity(d)
		case "request":
			req.Request, err = d.skip()
		default:
			_, err = d.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	return d.end()
}

// AppendApprovalDecision appends dec's JSON encoding to b.
func AppendApprovalDecision(b []byte, dec *ApprovalDecision) ([]byte, error) {
	switch dec.Decision {
	case AllowOnce, AllowAlways, Deny, Ask:
	default:
		return b, errors.New("approval: unknown decision " + strconv.Quote(string(dec.Decision)) + " (want allow-once, allow-always, deny or ask)")
	}
	if dec.TTLMs < 0 {
		return b, errors.New("approval: negative TTLMs " + strconv.FormatInt(dec.TTLMs, 10))
	}
	b = append(b, `{"decision":"`...)
	b = append(b, dec.Decision...)
	b = append(b, '"')
	if dec.Reason != "" {
		b = appendString(append(b, `,"reason":`...), dec.Reason)
	}
	if dec.TTLMs != 0 {
		b = strconv.AppendInt(append(b, `,"ttl_ms":`...), dec.TTLMs, 10)
	}
	return append(b, '}'), nil
}
