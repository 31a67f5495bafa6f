package policy

import (
	"errors"
	"strconv"
)

// Caller is the MCP client that made a call: the clientInfo of its
// initialize request (docs/policy-abi.md §4, "caller"). Members are empty
// when unknown.
type Caller struct {
	Name    string
	Version string
}

// Identity is the authenticated caller (docs/policy-abi.md §4,
// "identity"): present only when the surface verified a bearer token, and
// unlike [Caller], which the client declares about itself, a basis for
// access decisions. Claims are the claims the operator named (e.g.
// "groups"), as the token carries them, valid only during the hook call.
type Identity struct {
	Issuer   string
	Subject  string
	ClientID string
	Scopes   []string
	Claims   map[string]Raw
}

// ClaimStrings returns claim name as strings: a string claim as one, the
// string elements of an array claim; nil for a missing claim or any other
// value.
func (id *Identity) ClaimStrings(name string) []string {
	raw, ok := id.Claims[name]
	if !ok {
		return nil
	}
	var out []string
	d := decoder{b: raw}
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '"' {
		if s, err := d.str(); err == nil {
			return []string{s}
		}
		return nil
	}
	if d.array(func(d *decoder) error {
		if d.i < len(d.b) && d.b[d.i] == '"' {
			s, err := d.str()
			out = append(out, s)
			return err
		}
		_, err := d.skip()
		return err
	}) != nil {
		return nil
	}
	return out
}

// decodeIdentity reads an "identity" member.
func decodeIdentity(d *decoder) (*Identity, error) {
	id := &Identity{}
	err := d.object(func(k []byte, d *decoder) error {
		var err error
		switch string(k) {
		case "issuer":
			id.Issuer, err = d.str()
		case "subject":
			id.Subject, err = d.str()
		case "client_id":
			id.ClientID, err = d.str()
		case "scopes":
			err = d.array(func(d *decoder) error {
				s, err := d.str()
				id.Scopes = append(id.Scopes, s)
				return err
			})
		case "claims":
			err = d.object(func(k []byte, d *decoder) error {
				v, err := d.skip()
				if id.Claims == nil {
					id.Claims = map[string]Raw{}
				}
				id.Claims[string(k)] = v
				return err
			})
		default:
			_, err = d.skip()
		}
		return err
	})
	return id, err
}

// ToolRef names the tool being called: Name is the name the client sees;
// Server and Original are the upstream MCP server and its own name for the
// tool, for an imported tool (empty for the bridge's own tools).
type ToolRef struct {
	Name     string
	Server   string
	Original string
}

// Surface is where a tool call entered: "serve" (openclaw mcp serve),
// "proxy" (openclaw mcp proxy) or "embedded" (the runtime library).
type Surface string

// The surfaces of ABI v1.
const (
	SurfaceServe    Surface = "serve"
	SurfaceProxy    Surface = "proxy"
	SurfaceEmbedded Surface = "embedded"
)

// Pin is the pin state of an imported tool whose server has pins
// (docs/policy-abi.md §4, "pin"; docs/tool-pins.md): State is PinTrusted
// when the listed definition is the one the user trusted, PinChanged when
// it differs, PinNew when the server's pins have no such tool. Digest is
// the listed definition's digest and Pinned the trusted one ("" for a new
// tool), each "sha256:" and 64 lowercase hex digits. All are "" for a tool
// of a server without pins.
type Pin struct {
	State  string
	Digest string
	Pinned string
}

// The pin states of Pin.State.
const (
	PinTrusted = "trusted"
	PinChanged = "changed"
	PinNew     = "new"
)

// ToolCall is the input of before_tool_call (docs/policy-abi.md §4).
// Arguments are the call's arguments as the client sent them (normally an
// object), valid only during the hook call.
type ToolCall struct {
	Surface    Surface
	SessionKey string
	Caller     Caller
	// Identity is the authenticated caller, nil when the surface has none.
	Identity  *Identity
	Tool      ToolRef
	Pin       Pin
	Arguments Raw
}

// Decision is a before_tool_call outcome.
type Decision string

// The before_tool_call outcomes.
const (
	Allow           Decision = "allow"
	Block           Decision = "block"
	RequireApproval Decision = "require_approval"
)

// Verdict is the output of before_tool_call (docs/policy-abi.md §4).
// Title, Description and TimeoutMs describe the approval a
// RequireApproval asks for (TimeoutMs 0: the surface's default, in
// milliseconds). Arguments, when not nil, must be a JSON object: it
// replaces the call's arguments for later modules and the tool.
type Verdict struct {
	Decision    Decision
	Reason      string
	Title       string
	Description string
	TimeoutMs   int64
	Arguments   Raw
}

// BeforeToolCall serves the before_tool_call export: it decodes the input
// at [ptr, ptr+size), calls decide, and returns the encoded verdict packed
// for the host. An input that does not decode, an error from decide, or a
// verdict with an unknown decision returns 0 with the message set for
// last_error, which the host turns into a block naming the module. Call it
// from the program's own export:
//
//	//go:wasmexport before_tool_call
//	func beforeToolCall(ptr, size uint32) uint64 { return policy.BeforeToolCall(ptr, size, decide) }
func BeforeToolCall(ptr, size uint32, decide func(call *ToolCall) (Verdict, error)) uint64 {
	var call ToolCall
	if err := decodeToolCall(view(ptr, size), &call); err != nil {
		return result(nil, err)
	}
	v, err := decide(&call)
	if err != nil {
		return result(nil, err)
	}
	b, err := AppendVerdict(out[:0], &v)
	return result(b, err)
}

// decodeToolCall is the decoder BeforeToolCall uses: DecodeToolCall, or
// encoding/json when the module is built with -tags policy_stdjson (to
// measure the difference, docs/benchmarks.md "Guest languages").
var decodeToolCall = DecodeToolCall

// DecodeToolCall decodes a before_tool_call input into call. Unknown
// members are ignored (the host may add fields within ABI v1); a known
// member of the wrong type is an error.
func DecodeToolCall(in []byte, call *ToolCall) error {
	d := decoder{b: in}
	err := d.object(func(k []byte, d *decoder) error {
		var err error
		switch string(k) {
		case "surface":
			var s string
			s, err = d.str()
			call.Surface = Surface(s)
		case "session_key":
			call.SessionKey, err = d.str()
		case "caller":
			err = d.object(func(k []byte, d *decoder) error {
				switch string(k) {
				case "name":
					call.Caller.Name, err = d.str()
				case "version":
					call.Caller.Version, err = d.str()
				default:
					_, err = d.skip()
				}
				return err
			})
		case "tool":
			err = d.object(func(k []byte, d *decoder) error {
				switch string(k) {
				case "name":
					call.Tool.Name, err = d.str()
				case "server":
					call.Tool.Server, err = d.str()
				case "original":
					call.Tool.Original, err = d.str()
				default:
					_, err = d.skip()
				}
				return err
			})
		case "pin":
			err = d.object(func(k []byte, d *decoder) error {
				switch string(k) {
				case "state":
					call.Pin.State, err = d.str()
				case "digest":
					call.Pin.Digest, err = d.str()
				case "pinned":
					call.Pin.Pinned, err = d.str()
				default:
					_, err = d.skip()
				}
				return err
			})
		case "identity":
			call.Identity, err = decodeIdentity(d)
		case "arguments":
			call.Arguments, err = d.skip()
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

// AppendVerdict appends v's JSON encoding to b. It fails on a decision
// other than the three outcomes and on Arguments that are not an object,
// which the host would refuse.
func AppendVerdict(b []byte, v *Verdict) ([]byte, error) {
	switch v.Decision {
	case Allow, Block, RequireApproval:
	default:
		return b, errors.New("verdict: unknown decision " + strconv.Quote(string(v.Decision)) + " (want allow, block or require_approval)")
	}
	b = append(b, `{"decision":"`...)
	b = append(b, v.Decision...)
	b = append(b, '"')
	if v.Reason != "" {
		b = appendString(append(b, `,"reason":`...), v.Reason)
	}
	if v.Title != "" {
		b = appendString(append(b, `,"title":`...), v.Title)
	}
	if v.Description != "" {
		b = appendString(append(b, `,"description":`...), v.Description)
	}
	if v.TimeoutMs != 0 {
		if v.TimeoutMs < 0 {
			return b, errors.New("verdict: negative TimeoutMs " + strconv.FormatInt(v.TimeoutMs, 10))
		}
		b = strconv.AppendInt(append(b, `,"timeout_ms":`...), v.TimeoutMs, 10)
	}
	if v.Arguments != nil {
		d := decoder{b: v.Arguments}
		if _, err := d.skip(); err != nil || d.end() != nil || v.Arguments[0] != '{' {
			return b, errors.New("verdict: Arguments must be one JSON object")
		}
		b = append(append(b, `,"arguments":`...), v.Arguments...)
	}
	return append(b, '}'), nil
}
