package wasmpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/internal/strictjson"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// sanitizeInput is the sanitize_tool_names input: the request with "abi"
// first (docs/policy-abi.md §6.1).
type sanitizeInput struct {
	ABI int `json:"abi"`
	*policies.SanitizeRequest
}

// approvalInput is the decide_approval input (docs/policy-abi.md §6.2).
type approvalInput struct {
	ABI int `json:"abi"`
	*policies.ApprovalRequest
}

// SanitizeToolNames implements [policies.SanitizeToolNamesHook] with one guest call
// per catalog. The output is decoded strictly ([DecodeSanitized]) and
// checked against the request ([policies.ValidateSanitized]); any failure
// is a *wasmhost.Error naming the module (kind ABI for a wrong answer), and
// the instance that answered it is discarded.
func (m *Module) SanitizeToolNames(ctx context.Context, req *policies.SanitizeRequest) (*policies.SanitizeResult, error) {
	const export = string(policies.HookSanitizeToolNames)
	if !m.hooks[policies.HookSanitizeToolNames] {
		return nil, &wasmhost.Error{Module: m.name, Export: export, Kind: wasmhost.KindABI,
			Err: errors.New("module does not export sanitize_tool_names")}
	}
	in := *req
	if in.Servers == nil {
		in.Servers = []policies.SanitizeServer{}
	}
	servers := make([]policies.SanitizeServer, len(in.Servers))
	for i, s := range in.Servers {
		if s.Tools == nil {
			s.Tools = []string{}
		}
		servers[i] = s
	}
	in.Servers = servers
	input, err := json.Marshal(sanitizeInput{ABI: ABIVersion, SanitizeRequest: &in})
	if err != nil {
		return nil, &wasmhost.Error{Module: m.name, Export: export, Kind: wasmhost.KindABI,
			Err: fmt.Errorf("encoding the input: %w", err)}
	}
	var res *policies.SanitizeResult
	_, err = m.host.CallBytesChecked(ctx, export, input, func(out []byte) error {
		var err error
		if res, err = DecodeSanitized(out); err != nil {
			return err
		}
		if err := policies.ValidateSanitized(m.name, req, res); err != nil {
			var se *policies.SanitizeError
			if errors.As(err, &se) {
				if c := se.Culprit(); c != "" {
					return fmt.Errorf("%s: %w", c, se.Err)
				}
				return se.Err
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// DecodeSanitized decodes a sanitize_tool_names output strictly: one JSON
// object {"servers":[{"safe":…,"tools":[{"name":…}|{"reject":…}]}]} with
// no unknown or repeated field and nothing after it. It does not check the
// names against a request ([policies.ValidateSanitized] does). It is
// written by hand: encoding/json took longer than the guest's whole work
// on a catalog of 5,000 tools.
func DecodeSanitized(out []byte) (*policies.SanitizeResult, error) {
	// One string for the whole output: names are substrings of it (one
	// allocation instead of one per tool).
	d := namesDecoder{b: out, s: string(out)}
	res, err := d.result()
	if err != nil {
		return nil, fmt.Errorf("invalid names %s: %w", quoteOutput(out), err)
	}
	return res, nil
}

// namesDecoder reads the one JSON shape of a sanitize_tool_names output.
type namesDecoder struct {
	b []byte
	s string // b as a string
	i int
}

func (d *namesDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", d.i, fmt.Sprintf(format, args...))
}

func (d *namesDecoder) ws() {
	for d.i < len(d.b) && (d.b[d.i] == ' ' || d.b[d.i] == '\t' || d.b[d.i] == '\n' || d.b[d.i] == '\r') {
		d.i++
	}
}

// eat consumes c after optional white space.
func (d *namesDecoder) eat(c byte) error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != c {
		return d.errorf("want %q", c)
	}
	d.i++
	return nil
}

// more reports whether another member or element follows (consuming the
// comma) or the container ends (consuming close).
func (d *namesDecoder) more(close byte) (bool, error) {
	d.ws()
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case ',':
			d.i++
			return true, nil
		case close:
			d.i++
			return false, nil
		}
	}
	return false, d.errorf("want ',' or %q", close)
}

// str reads a JSON string; escapes and non-ASCII take encoding/json.
func (d *namesDecoder) str() (string, error) {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", d.errorf("want a string")
	}
	start := d.i
	for j := d.i + 1; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			return d.s[start+1 : j], nil
		case c == '\\' || c < 0x20 || c >= 0x80:
			// The general case: find the end, let encoding/json decode.
			dec := json.NewDecoder(bytes.NewReader(d.b[start:]))
			var s string
			if err := dec.Decode(&s); err != nil {
				return "", d.errorf("%v", err)
			}
			d.i = start + int(dec.InputOffset())
			return s, nil
		}
	}
	return "", d.errorf("unterminated string")
}

// object reads {"key":…} calling member for each key once.
func (d *namesDecoder) object(keys []string, member func(key string) error) error {
	if err := d.eat('{'); err != nil {
		return err
	}
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return nil
	}
	var seen uint
	for {
		k, err := d.str()
		if err != nil {
			return err
		}
		idx := -1
		for n, want := range keys {
			if k == want {
				idx = n
			}
		}
		if idx < 0 {
			return d.errorf("unknown field %q", k)
		}
		if seen&(1<<idx) != 0 {
			return d.errorf("repeated field %q", k)
		}
		seen |= 1 << idx
		if err := d.eat(':'); err != nil {
			return err
		}
		if err := member(k); err != nil {
			return err
		}
		if more, err := d.more('}'); err != nil || !more {
			return err
		}
	}
}

// array reads [elem, …].
func (d *namesDecoder) array(elem func() error) error {
	if err := d.eat('['); err != nil {
		return err
	}
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if more, err := d.more(']'); err != nil || !more {
			return err
		}
	}
}

var (
	resultKeys = []string{"servers"}
	serverKeys = []string{"safe", "tools"}
	toolKeys   = []string{"name", "reject"}
)

func (d *namesDecoder) result() (*policies.SanitizeResult, error) {
	res := &policies.SanitizeResult{}
	err := d.object(resultKeys, func(string) error {
		res.Servers = []policies.SanitizedServer{}
		return d.array(func() error {
			var s policies.SanitizedServer
			err := d.object(serverKeys, func(k string) error {
				if k == "safe" {
					var err error
					s.Safe, err = d.str()
					return err
				}
				s.Tools = []policies.ToolName{}
				return d.array(func() error {
					var t policies.ToolName
					err := d.object(toolKeys, func(k string) error {
						v, err := d.str()
						if k == "name" {
							t.Name = v
						} else {
							t.Reject = v
						}
						return err
					})
					s.Tools = append(s.Tools, t)
					return err
				})
			})
			res.Servers = append(res.Servers, s)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, d.errorf("data after the JSON object")
	}
	if res.Servers == nil {
		return nil, errors.New("no \"servers\"")
	}
	return res, nil
}

// DecideApproval implements [policies.DecideApprovalHook] with one guest
// call. On any failure it returns a deny verdict whose reason is the
// error's message, and the error (a *wasmhost.Error naming the module);
// the instance that answered garbage is discarded.
func (m *Module) DecideApproval(ctx context.Context, req *policies.ApprovalRequest) (policies.ApprovalVerdict, error) {
	v, err := m.decideApproval(ctx, req)
	if err != nil {
		return policies.ApprovalVerdict{Decision: policies.Deny, Reason: err.Error()}, err
	}
	return v, nil
}

func (m *Module) decideApproval(ctx context.Context, req *policies.ApprovalRequest) (policies.ApprovalVerdict, error) {
	const export = string(policies.HookDecideApproval)
	if !m.hooks[policies.HookDecideApproval] {
		return policies.ApprovalVerdict{}, &wasmhost.Error{Module: m.name, Export: export, Kind: wasmhost.KindABI,
			Err: errors.New("module does not export decide_approval")}
	}
	if len(req.Request) > 0 && !json.Valid(req.Request) {
		return policies.ApprovalVerdict{}, &wasmhost.Error{Module: m.name, Export: export, Kind: wasmhost.KindABI,
			Err: errors.New("encoding the input: request is not valid JSON")}
	}
	input, err := json.Marshal(approvalInput{ABI: ABIVersion, ApprovalRequest: req})
	if err != nil {
		return policies.ApprovalVerdict{}, &wasmhost.Error{Module: m.name, Export: export, Kind: wasmhost.KindABI,
			Err: fmt.Errorf("encoding the input: %w", err)}
	}
	var v policies.ApprovalVerdict
	ctx = wasmhost.WithCaller(ctx, policies.RequesterKey(req.SessionKey, req.Requester))
	_, err = m.host.CallBytesChecked(ctx, export, input, func(out []byte) error {
		var err error
		v, err = DecodeApprovalVerdict(out)
		return err
	})
	return v, err
}

// DecodeApprovalVerdict decodes a decide_approval output strictly: one
// JSON object with only the fields of [policies.ApprovalVerdict], each at
// most once and spelt exactly (case included), a known decision and a
// non-negative ttl_ms, with nothing after it.
func DecodeApprovalVerdict(out []byte) (policies.ApprovalVerdict, error) {
	var v policies.ApprovalVerdict
	if err := decodeStrict(out, &v, "approval verdict"); err != nil {
		return v, err
	}
	switch {
	case v.Decision == "":
		return v, fmt.Errorf("invalid approval verdict %s: no decision", quoteOutput(out))
	case !v.Decision.Valid():
		return v, fmt.Errorf("unknown decision %q (want allow-once, allow-always, deny or ask)", v.Decision)
	case v.TTLMs < 0:
		return v, fmt.Errorf("invalid approval verdict: negative ttl_ms %d", v.TTLMs)
	}
	return v, nil
}

// decodeStrict decodes exactly one JSON value of out into v with
// strictjson.Unmarshal: a repeated key, a key that is not exactly a field's
// name (encoding/json would match it whatever its case) or an unknown key
// is an error, as is anything after the value. what names the output in
// the error ("verdict", "approval verdict").
func decodeStrict(out []byte, v any, what string) error {
	if err := strictjson.Unmarshal(out, v); err != nil {
		return fmt.Errorf("invalid %s %s: %w", what, quoteOutput(out), err)
	}
	return nil
}

var (
	_ policies.SanitizeToolNamesHook = (*Module)(nil)
	_ policies.DecideApprovalHook    = (*Module)(nil)
)
