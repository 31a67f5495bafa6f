package policy

import (
	"errors"
	"strconv"
)

// ToolName is one (server, tool) pair of a catalog: the MCP server's
// configured name and the tool's own name on that server.
type ToolName struct {
	Server string
	Name   string
}

// SanitizeRequest is the input of sanitize_tool_names (docs/policy-abi.md
// §6): every tool of a catalog, in one batch, and the longest exposed name
// the host accepts (MaxLen, in bytes; 64 for the LLM APIs of today).
type SanitizeRequest struct {
	MaxLen int
	Tools  []ToolName
}

// SanitizedName is the answer for one tool: the exposed Name, or a
// non-empty Reject explaining why the tool is not exposed. Exactly one of
// the two is set.
type SanitizedName struct {
	Name   string
	Reject string
}

// SanitizeResponse is the output of sanitize_tool_names: one entry per
// input tool, in the same order.
type SanitizeResponse struct {
	Tools []SanitizedName
}

// SanitizeToolNames serves the sanitize_tool_names export like
// [BeforeToolCall] serves before_tool_call. A response whose length
// differs from the request's, or an entry with both or neither of Name and
// Reject, returns 0 with last_error set: the host then fails the catalog
// build rather than expose an unsanitized name.
//
//	//go:wasmexport sanitize_tool_names
//	func sanitizeToolNames(ptr, size uint32) uint64 { return policy.SanitizeToolNames(ptr, size, sanitize) }
func SanitizeToolNames(ptr, size uint32, sanitize func(req *SanitizeRequest) (SanitizeResponse, error)) uint64 {
	var req SanitizeRequest
	if err := DecodeSanitizeRequest(view(ptr, size), &req); err != nil {
		return result(nil, err)
	}
	resp, err := sanitize(&req)
	if err != nil {
		return result(nil, err)
	}
	if len(resp.Tools) != len(req.Tools) {
		return result(nil, errors.New("sanitize_tool_names: "+strconv.Itoa(len(resp.Tools))+" answers for "+strconv.Itoa(len(req.Tools))+" tools"))
	}
	b, err := AppendSanitizeResponse(out[:0], &resp)
	return result(b, err)
}

// DecodeSanitizeRequest decodes a sanitize_tool_names input. Unknown
// members are ignored.
func DecodeSanitizeRequest(in []byte, req *SanitizeRequest) error {
	d := decoder{b: in}
	err := d.object(func(k []byte, d *decoder) error {
		switch string(k) {
		case "max_len":
			n, err := d.integer()
			req.MaxLen = int(n)
			return err
		case "tools":
			return d.array(func(d *decoder) error {
				var t ToolName
				err := d.object(func(k []byte, d *decoder) error {
					var err error
					switch string(k) {
					case "server":
						t.Server, err = d.str()
					case "name":
						t.Name, err = d.str()
					default:
						_, err = d.skip()
					}
					return err
				})
				req.Tools = append(req.Tools, t)
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

// AppendSanitizeResponse appends resp's JSON encoding to b.
func AppendSanitizeResponse(b []byte, resp *SanitizeResponse) ([]byte, error) {
	b = append(b, `{"tools":[`...)
	for i, t := range resp.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		switch {
		case (t.Name == "") == (t.Reject == ""):
			return b, errors.New("sanitize_tool_names: answer " + strconv.Itoa(i) + " must set exactly one of Name and Reject")
		case t.Name != "":
			b = appendString(append(b, `{"name":`...), t.Name)
		default:
			b = appendString(append(b, `{"reject":`...), t.Reject)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}
