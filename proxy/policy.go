package proxy

import (
	"context"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/runtime"
)

// Enforcer wraps the runtime session's before_tool_call enforcer so that
// calls made through the proxy are decided (and audited) with surface
// "proxy" and the calling MCP client's identity (clientInfo of its
// initialize). Calls that did not come through the proxy pass unchanged.
// Hand the result to runtime.Options.Enforcer.
//
// The runtime has no per-call surface or caller of its own; this wrapper is
// how the proxy sets them without changing it.
func Enforcer(inner policies.Enforcer) policies.Enforcer { return enforcer{inner} }

type enforcer struct{ inner policies.Enforcer }

func (e enforcer) BeforeToolCall(ctx context.Context, call *policies.ToolCall) policies.Decision {
	if c, ok := CallerFrom(ctx); ok {
		cp := *call
		cp.Surface = policies.SurfaceProxy
		cp.Caller = c
		call = &cp
	}
	return e.inner.BeforeToolCall(ctx, call)
}

// ApprovalDecider wraps the runtime session's decide_approval decider the
// same way as [Enforcer]: a tool approval raised by a proxy call carries
// surface "proxy" and the calling client as requester. nil stays nil.
func ApprovalDecider(inner runtime.ApprovalDecider) runtime.ApprovalDecider {
	if inner == nil {
		return nil
	}
	return decider{inner}
}

type decider struct{ inner runtime.ApprovalDecider }

func (d decider) DecideApproval(ctx context.Context, req *policies.ApprovalRequest) policies.ApprovalOutcome {
	if c, ok := CallerFrom(ctx); ok {
		cp := *req
		cp.Surface = policies.SurfaceProxy
		cp.Requester = c
		req = &cp
	}
	return d.inner.DecideApproval(ctx, req)
}
