package wasmpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/openclaw-go/openclaw/policies"
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

// SanitizeToolNames implements [policies.Sanitizer] with one guest call
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
// no unknown field and nothing after it. It does not check the names
// against a request ([policies.ValidateSanitized] does).
func DecodeSanitized(out []byte) (*policies.SanitizeResult, error) {
	var res policies.SanitizeResult
	if err := decodeStrict(out, &res, "names"); err != nil {
		return nil, err
	}
	if res.Servers == nil {
		return nil, fmt.Errorf("invalid names %s: no \"servers\"", quoteOutput(out))
	}
	return &res, nil
}

// DecideApproval implements [policies.ApprovalDecider] with one guest
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
	_, err = m.host.CallBytesChecked(ctx, export, input, func(out []byte) error {
		var err error
		v, err = DecodeApprovalVerdict(out)
		return err
	})
	return v, err
}

// DecodeApprovalVerdict decodes a decide_approval output strictly: one
// JSON object with only the fields of [policies.ApprovalVerdict], a known
// decision and a non-negative ttl_ms, with nothing after it.
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

// decodeStrict decodes exactly one JSON value of out into v, refusing
// unknown fields and trailing data.
func decodeStrict(out []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid %s %s: %w", what, quoteOutput(out), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("invalid %s %s: data after the JSON object", what, quoteOutput(out))
	}
	return nil
}

var (
	_ policies.Sanitizer       = (*Module)(nil)
	_ policies.ApprovalDecider = (*Module)(nil)
)
