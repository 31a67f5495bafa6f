package gwclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
)

// RequestTwoPhase sends one two-phase Gateway RPC, such as
// plugin.approval.request or exec.approval.request with twoPhase:true
// (docs/protocol-facts.md, Gateway RPCs), and returns the payload of its final
// response. The Gateway answers such a request twice with the same id:
// first {"status":"accepted","id",…,"createdAtMs","expiresAtMs"}, which is
// passed to accepted (when non-nil) from the connection's read goroutine,
// so accepted must return quickly and must not call the client; then the
// final payload ({"id","decision":<string|null>,…}). A request nobody may
// see is answered once, directly with the final payload, and accepted is
// not called.
//
// The wait for the accepted response and the final one is bounded by ctx
// only (an approval may stay open for minutes), not by
// Options.RequestTimeout; the write is. Like Request, it waits for the
// first connection (here bounded by ctx only) and fails at once with
// [ErrNotConnected] while a later one is being re-established. Errors are
// those of [Client.Request].
func (c *Client) RequestTwoPhase(ctx context.Context, method string, params any, accepted func(payload json.RawMessage)) (json.RawMessage, error) {
	s, err := c.waitReady(ctx, method, true)
	if err != nil {
		return nil, err
	}
	if accepted == nil {
		accepted = func(json.RawMessage) {}
	}
	return s.callPhased(ctx, method, params, c.opts.RequestTimeout, accepted)
}

// ApprovalRaiser raises Gateway approval requests on short-lived
// connections of their own, one per request, signed with the same device
// identity as the bridge's main connection.
//
// Why a second connection: the Gateway never delivers an approval event to
// the connection that raised it (docs/protocol-facts.md, Approval delivery), and a record
// carrying requestedByDeviceId is visible only to connections of that
// device (and to operator.admin connections such as the control UI). Raised
// from a sibling connection of the same device, the request therefore
// reaches the bridge's own connection (permissions_list_open lists it), the
// control UI, and any other approval client of this device.
//
// An ApprovalRaiser is safe for concurrent use; it holds no connection
// between calls. [ApprovalRaiser.Close] ends the raises in flight.
type ApprovalRaiser struct {
	opts Options
	life context.Context // cancelled by Close
	stop context.CancelFunc
}

// NewApprovalRaiser returns a raiser dialling with opts (copied; the same
// options as the main [Client], typically). Event, state and fatal
// callbacks are dropped: the side connection serves one request only. Its
// connect and disconnect records are logged at Debug, tagged
// conn=approval, so that they do not read like the main connection's.
func NewApprovalRaiser(opts *Options) *ApprovalRaiser {
	o := opts.withDefaults(nil)
	o.OnEvent, o.OnStateChange, o.OnFatal = nil, nil, nil
	o.Logger = slog.New(debugHandler{o.Logger.Handler()}).With("conn", "approval")
	life, stop := context.WithCancel(context.Background())
	return &ApprovalRaiser{opts: o, life: life, stop: stop}
}

// Close ends every RaiseApproval in flight (each closes its connection and
// returns an error wrapping [ErrClosed]) and makes later calls fail the
// same way at once. `mcp serve` calls it when its MCP client goes away: a
// call waiting for a human's decision then ends instead of holding the
// process until the approval expires. Idempotent; safe concurrently; it
// always returns nil (it is an io.Closer, like [Client]).
func (r *ApprovalRaiser) Close() error {
	r.stop()
	return nil
}

// debugHandler logs every record below Warn at Debug.
type debugHandler struct{ slog.Handler }

func (h debugHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelWarn {
		l = slog.LevelDebug
	}
	return h.Handler.Enabled(ctx, l)
}

func (h debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h debugHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return debugHandler{h.Handler.WithAttrs(as)}
}

func (h debugHandler) WithGroup(name string) slog.Handler {
	return debugHandler{h.Handler.WithGroup(name)}
}

// ErrNoApprovalRoute is wrapped by [ApprovalRaiser.RaiseApproval] when the
// side connection could not be established, so no approval was raised.
var ErrNoApprovalRoute = errors.New("gwclient: cannot raise the approval on the gateway")

// RaiseApproval opens a connection, sends method (for example
// "plugin.approval.request") with params as a two-phase request (params
// must carry twoPhase:true), reports the accepted payload to accepted (see
// [Client.RequestTwoPhase]), waits for the final payload, then closes the
// connection. When ctx ends first the connection is closed and ctx's error
// returned; withdrawing the pending approval is the caller's job (resolve
// it with deny from another connection). A failed connection is an error
// wrapping [ErrNoApprovalRoute].
func (r *ApprovalRaiser) RaiseApproval(ctx context.Context, method string, params any, accepted func(payload json.RawMessage)) (json.RawMessage, error) {
	if r.life.Err() != nil {
		return nil, fmt.Errorf("%w: %s not raised", ErrClosed, method)
	}
	c := New(&r.opts)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Close ends the raise with ErrClosed as the cause.
	defer context.AfterFunc(r.life, func() { cancel(ErrClosed) })()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	defer func() {
		_ = c.Close()
		<-runErr
	}()
	if err := c.WaitReady(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, raiseEnded(ctx, method)
		}
		return nil, fmt.Errorf("%w: %w", ErrNoApprovalRoute, err)
	}
	payload, err := c.RequestTwoPhase(ctx, method, params, accepted)
	if err != nil && errors.Is(context.Cause(ctx), ErrClosed) {
		return nil, raiseEnded(ctx, method)
	}
	return payload, err
}

// raiseEnded is the error of a raise whose ctx ended: ctx's error, or
// ErrClosed when Close ended it.
func raiseEnded(ctx context.Context, method string) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrClosed) {
		return fmt.Errorf("%w: stopped waiting for %s", ErrClosed, method)
	}
	return ctx.Err()
}
