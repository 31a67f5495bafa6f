package policy

import (
	"errors"
	"strconv"
)

// ApprovalRequest is the input of decide_approval (docs/policy-abi.md §6):
// what kind of approval is asked ("exec" and "plugin" for the Gateway's
// exec.approval and plugin.approval requests), the session it belongs
// to, the client that asked, and the request payload as the Gateway sent
// it (for "exec": command, cwd, host, …; for "plugin": pluginId, title,
// description, …). Request is valid only during the hook call.
type ApprovalRequest struct {
	Kind       string
	SessionKey string
	Requester  Caller
	Request    Raw
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

// ApprovalDecision is the output of decide_approval. TTLMs is how long, in
// milliseconds, the request may wait for a human after Ask before it is
// denied (0: the surface's default).
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
