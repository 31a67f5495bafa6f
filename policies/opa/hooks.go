package opa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/wasmpolicy"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// sanitizeInput is the sanitize_tool_names input (docs/policy-abi.md),
// the same JSON wasmpolicy gives an ABI module.
type sanitizeInput struct {
	ABI int `json:"abi"`
	*policies.SanitizeRequest
}

// approvalInput is the decide_approval input (docs/policy-abi.md).
type approvalInput struct {
	ABI int `json:"abi"`
	*policies.ApprovalRequest
}

// SanitizeToolNames implements [policies.SanitizeToolNamesHook] with one evaluation
// of the sanitize_tool_names entrypoint per catalog. The rule's value is
// decoded strictly (wasmpolicy.DecodeSanitized) and checked against the
// request (policies.ValidateSanitized); any failure, an undefined result
// included, is a *wasmhost.Error naming the module, and the catalog build
// fails.
func (m *Module) SanitizeToolNames(ctx context.Context, req *policies.SanitizeRequest) (*policies.SanitizeResult, error) {
	const h = policies.HookSanitizeToolNames
	in := *req
	servers := make([]policies.SanitizeServer, len(in.Servers))
	for i, s := range in.Servers {
		if s.Tools == nil {
			s.Tools = []string{}
		}
		servers[i] = s
	}
	in.Servers = servers
	input, err := json.Marshal(sanitizeInput{ABI: 1, SanitizeRequest: &in})
	if err != nil {
		return nil, &wasmhost.Error{Module: m.name, Export: string(h), Kind: wasmhost.KindABI,
			Err: fmt.Errorf("encoding the input: %w", err)}
	}
	var res *policies.SanitizeResult
	_, err = m.eval(ctx, h, input, func(out []byte) error {
		var err error
		if res, err = wasmpolicy.DecodeSanitized(out); err != nil {
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

// DecideApproval implements [policies.DecideApprovalHook] with one
// evaluation of the decide_approval entrypoint, decoded strictly
// (wasmpolicy.DecodeApprovalVerdict). On any failure it returns a deny
// verdict whose reason is the error's message, and the error (a
// *wasmhost.Error naming the module).
func (m *Module) DecideApproval(ctx context.Context, req *policies.ApprovalRequest) (policies.ApprovalVerdict, error) {
	v, err := m.decideApproval(ctx, req)
	if err != nil {
		return policies.ApprovalVerdict{Decision: policies.Deny, Reason: err.Error()}, err
	}
	return v, nil
}

func (m *Module) decideApproval(ctx context.Context, req *policies.ApprovalRequest) (policies.ApprovalVerdict, error) {
	const h = policies.HookDecideApproval
	if len(req.Request) > 0 && !json.Valid(req.Request) {
		return policies.ApprovalVerdict{}, &wasmhost.Error{Module: m.name, Export: string(h), Kind: wasmhost.KindABI,
			Err: errors.New("encoding the input: request is not valid JSON")}
	}
	input, err := json.Marshal(approvalInput{ABI: 1, ApprovalRequest: req})
	if err != nil {
		return policies.ApprovalVerdict{}, &wasmhost.Error{Module: m.name, Export: string(h), Kind: wasmhost.KindABI,
			Err: fmt.Errorf("encoding the input: %w", err)}
	}
	var v policies.ApprovalVerdict
	ctx = wasmhost.WithCaller(ctx, policies.RequesterKey(req.SessionKey, req.Requester))
	_, err = m.eval(ctx, h, input, func(out []byte) error {
		var err error
		v, err = wasmpolicy.DecodeApprovalVerdict(out)
		return err
	})
	return v, err
}

var (
	_ policies.SanitizeToolNamesHook = (*Module)(nil)
	_ policies.DecideApprovalHook    = (*Module)(nil)
)
