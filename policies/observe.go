package policies

import "context"

// RunObserver is told of every module run of a before_tool_call or
// decide_approval chain ([Chain], [ApprovalChain]), with the context of
// the call it decided: the audit record of that run, arguments never
// included. A surface uses it to trace module runs under the call's span.
// ObserveRun is called on the caller's goroutine after the module
// answered; it must not keep r.
type RunObserver interface {
	ObserveRun(ctx context.Context, r *AuditRecord)
}

type runObserverKey struct{}

// WithRunObserver returns ctx naming o as the observer of the module runs
// made with it. A nil o leaves ctx unchanged.
func WithRunObserver(ctx context.Context, o RunObserver) context.Context {
	if o == nil {
		return ctx
	}
	return context.WithValue(ctx, runObserverKey{}, o)
}

// runObserver returns the observer ctx names, or nil.
func runObserver(ctx context.Context) RunObserver {
	o, _ := ctx.Value(runObserverKey{}).(RunObserver)
	return o
}
