package policy

import (
	"errors"
	"strconv"
)

// MaxToolNameLen is the longest exposed tool name the host accepts: LLM
// APIs take tool names matching ^[a-zA-Z0-9_-]{1,64}$.
const MaxToolNameLen = 64

// SanitizeServer is one declared MCP server of a catalog with the raw names
// of its tools, in the order its tools/list gave them (possibly none).
type SanitizeServer struct {
	Name  string
	Tools []string
}

// ToolName is the answer for one tool: the exposed Name, or a non-empty
// Reject saying why the tool is not exposed. Exactly one of the two is set.
type ToolName struct {
	Name   string
	Reject string
}

// SanitizedServer is the answer for one server: its Safe name (the server
// part of "server__tool", matching ^[a-zA-Z0-9_-]{1,64}$) and one
// [ToolName] per tool of the request, in the same order.
type SanitizedServer struct {
	Safe  string
	Tools []ToolName
}

// SanitizeRequest is the input of sanitize_tool_names (docs/policy-abi.md
// §6.1): a whole catalog in one batch. Reserved are names the surface's
// own tools already hold: no exposed name may equal one, ignoring ASCII
// case. Proposed is the previous sanitizer's answer when several run in a
// chain (nil for the first): a module may keep or change it. Exposed holds
// the names the host already exposed in its running session (nil on a
// fresh start): keep a tool's name where your rules allow, and give none
// of them to another tool (docs/tool-names.md §8).
type SanitizeRequest struct {
	Reserved []string
	Servers  []SanitizeServer
	Proposed []SanitizedServer
	Exposed  []ExposedServer
}

// ExposedServer is what the host already exposed for one server: the raw
// Server name, its Safe server part, and pairs of a raw tool name
// (Tools[i]) and the name it was exposed under (Names[i]).
type ExposedServer struct {
	Server, Safe string
	Tools, Names []string
}

// SanitizeResult is the output of sanitize_tool_names: one
// [SanitizedServer] per server of the request, in the same order. The
// host checks it: every name valid and unique ignoring ASCII case, none
// reserved; otherwise the catalog build fails naming the module.
type SanitizeResult struct {
	Servers []SanitizedServer
}

// SanitizeToolNames serves the sanitize_tool_names export like
// [BeforeToolCall] serves before_tool_call. An answer whose shape differs
// from the request's (server or tool counts), or an entry with both or
// neither of Name and Reject, returns 0 with last_error set: the host then
// fails the catalog build rather than expose an unsanitized name.
//
//	//go:wasmexport sanitize_tool_names
//	func sanitizeToolNames(ptr, size uint32) uint64 { return policy.SanitizeToolNames(ptr, size, sanitize) }
func SanitizeToolNames(ptr, size uint32, sanitize func(req *SanitizeRequest) (SanitizeResult, error)) uint64 {
	var req SanitizeRequest
	if err := DecodeSanitizeRequest(view(ptr, size), &req); err != nil {
		return result(nil, err)
	}
	res, err := sanitize(&req)
	if err != nil {
		return result(nil, err)
	}
	if len(res.Servers) != len(req.Servers) {
		return result(nil, errors.New("sanitize_tool_names: "+strconv.Itoa(len(res.Servers))+" servers answered for "+strconv.Itoa(len(req.Servers))))
	}
	for i, s := range res.Servers {
		if len(s.Tools) != len(req.Servers[i].Tools) {
			return result(nil, errors.New("sanitize_tool_names: server "+strconv.Quote(req.Servers[i].Name)+": "+
				strconv.Itoa(len(s.Tools))+" tools answered for "+strconv.Itoa(len(req.Servers[i].Tools))))
		}
	}
	b, err := AppendSanitizeResult(out[:0], &res)
	return result(b, err)
}

// DecodeSanitizeRequest decodes a sanitize_tool_names input. Unknown
// members are ignored.
func DecodeSanitizeRequest(in []byte, req *SanitizeRequest) error {
	d := decoder{b: in}
	err := d.object(func(k []byte, d *decoder) error {
		switch string(k) {
		case "reserved":
			return d.array(func(d *decoder) error {
				s, err := d.str()
				req.Reserved = append(req.Reserved, s)
				return err
			})
		case "servers":
			return d.array(func(d *decoder) error {
				var s SanitizeServer
				err := d.object(func(k []byte, d *decoder) error {
					switch string(k) {
					case "name":
						var err error
						s.Name, err = d.str()
						return err
					case "tools":
						s.Tools = []string{}
						return d.array(func(d *decoder) error {
							t, err := d.str()
							s.Tools = append(s.Tools, t)
							return err
						})
					}
					_, err := d.skip()
					return err
				})
				req.Servers = append(req.Servers, s)
				return err
			})
		case "exposed":
			return d.array(func(d *decoder) error {
				var e ExposedServer
				err := d.object(func(k []byte, d *decoder) error {
					var err error
					switch string(k) {
					case "server":
						e.Server, err = d.str()
					case "safe":
						e.Safe, err = d.str()
					case "tools":
						e.Tools, err = d.strs()
					case "names":
						e.Names, err = d.strs()
					default:
						_, err = d.skip()
					}
					return err
				})
				if err == nil && len(e.Tools) != len(e.Names) {
					err = errors.New("exposed: server " + strconv.Quote(e.Server) + ": tools and names differ in length")
				}
				req.Exposed = append(req.Exposed, e)
				return err
			})
		case "proposed":
			return d.array(func(d *decoder) error {
				var s SanitizedServer
				err := d.object(func(k []byte, d *decoder) error {
					switch string(k) {
					case "safe":
						var err error
						s.Safe, err = d.str()
						return err
					case "tools":
						return d.array(func(d *decoder) error {
							var t ToolName
							err := d.object(func(k []byte, d *decoder) error {
								var err error
								switch string(k) {
								case "name":
									t.Name, err = d.str()
								case "reject":
									t.Reject, err = d.str()
								default:
									_, err = d.skip()
								}
								return err
							})
							s.Tools = append(s.Tools, t)
							return err
						})
					}
					_, err := d.skip()
					return err
				})
				req.Proposed = append(req.Proposed, s)
				return err
			})
		}
		_, err := d.skip()
		return err
	})
	if err != nil {
		return err
	}
	return d.end()
}

// AppendSanitizeResult appends res's JSON encoding to b. It fails on an
// entry with both or neither of Name and Reject.
func AppendSanitizeResult(b []byte, res *SanitizeResult) ([]byte, error) {
	b = append(b, `{"servers":[`...)
	for i, s := range res.Servers {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(b, `{"safe":`...), s.Safe)
		b = append(b, `,"tools":[`...)
		for j, t := range s.Tools {
			if j > 0 {
				b = append(b, ',')
			}
			switch {
			case (t.Name == "") == (t.Reject == ""):
				return b, errors.New("sanitize_tool_names: server " + strconv.Quote(s.Safe) + " tool " + strconv.Itoa(j) + ": set exactly one of Name and Reject")
			case t.Name != "":
				b = appendString(append(b, `{"name":`...), t.Name)
			default:
				b = appendString(append(b, `{"reject":`...), t.Reject)
			}
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...), nil
}

// strs decodes an array of strings.
func (d *decoder) strs() ([]string, error) {
	var out []string
	err := d.array(func(d *decoder) error {
		s, err := d.str()
		out = append(out, s)
		return err
	})
	return out, err
}
