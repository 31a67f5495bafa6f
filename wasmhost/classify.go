package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/sys"
)

// CallFailure is what the host knows of a guest call that failed, for
// [ClassifyCall]. Module and adapters that instantiate modules themselves
// (the OPA adapter) classify their failures with it, so that a failure
// gets the same kind and message whichever runs the module.
type CallFailure struct {
	Module, Export string
	// Err is the error wazero returned.
	Err error
	// Limit is the call's deadline, for the timeout message.
	Limit time.Duration
	// MemoryLimitPages is the instance's memory cap; RefusedGrow the size
	// in bytes that a memory.grow refused by the cap asked for during the
	// call, 0 if none.
	MemoryLimitPages uint32
	RefusedGrow      uint64
	// Closing reports whether the module is shutting down.
	Closing bool
	// ABIErr is set when a host function found the guest broke the ABI
	// and trapped it (KindABI with this message); TrapMessage when a host
	// function trapped the guest for another reason (KindTrap with this
	// message, e.g. the guest's own abort).
	ABIErr, TrapMessage error
	// Stderr is the guest's captured output, attached to the error.
	Stderr string
}

// ClassifyCall turns a failed guest call into an *Error: the caller's own
// deadline or cancellation (callerCtx ended) as KindTimeout or
// KindCanceled; the call's deadline (ctx ended) as KindTimeout with the
// [DeadlineError] message; an interruption by Close as KindClosed; a WASI
// exit as KindExit; a trap after a refused memory.grow as
// KindMemoryLimit; anything else as KindTrap. The wazero error stays the
// cause (errors.Unwrap).
func ClassifyCall(ctx, callerCtx context.Context, f CallFailure) *Error {
	e := &Error{Module: f.Module, Export: f.Export, Err: f.Err, Stderr: f.Stderr}
	var exit *sys.ExitError
	switch {
	case f.ABIErr != nil:
		e.Kind, e.Err = KindABI, f.ABIErr
	case errors.As(f.Err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled):
		if cerr := callerCtx.Err(); cerr != nil {
			return ctxError(f.Module, f.Export, cerr, "")
		}
		if f.Closing {
			e.Kind, e.Err = KindClosed, wrapMsg(f.Err, "module closed during the call")
			break
		}
		e.Kind, e.Err = KindTimeout, wrapMsg(f.Err, "%s", timeoutMessage(ctx, f.Limit))
	case errors.As(f.Err, &exit) && f.Closing:
		e.Kind, e.Err = KindClosed, wrapMsg(f.Err, "module closed during the call")
	case errors.As(f.Err, &exit):
		e.Kind, e.Err = KindExit, wrapMsg(f.Err, "guest exited with code %d", exit.ExitCode())
	case f.RefusedGrow != 0:
		limit := f.MemoryLimitPages
		e.Kind, e.Err = KindMemoryLimit, wrapMsg(f.Err, "out of memory: growing to %d pages was refused by the cap of %d pages (%d MiB): %s",
			(f.RefusedGrow+pageSize-1)/pageSize, limit, uint64(limit)*pageSize>>20, firstLine(f.Err))
	case f.TrapMessage != nil:
		e.Kind, e.Err = KindTrap, wrapMsg(f.Err, "%s", f.TrapMessage.Error())
	default:
		e.Kind = KindTrap
	}
	return e
}

// InitError is the error of an instance creation of module that failed
// with err: a load error saying the init deadline (limit) was exceeded
// when ictx, the creation's context, ended while the caller's ctx did
// not; otherwise err as a load error (see [AsLoad]).
func InitError(module string, ctx, ictx context.Context, limit time.Duration, err error) error {
	if ctx.Err() == nil && ictx.Err() != nil {
		return &Error{Module: module, Kind: KindLoad, Err: wrapMsg(err, "initializing instance: %s", timeoutMessage(ictx, limit))}
	}
	return AsLoad(err)
}

// AsLoad turns a call error during an instance's initialization into a
// load error, keeping its export and cause; other errors pass unchanged,
// and so do a closed module and the caller's own cancellation or
// deadline.
func AsLoad(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind != KindLoad && e.Kind != KindClosed && e.Kind != KindCanceled && e.Kind != KindTimeout {
		c := *e
		c.Kind = KindLoad
		c.Err = wrapMsg(e.Err, "initializing instance: %s", firstLine(e.Err))
		return &c
	}
	return err
}

// ctxError classifies a done caller context for a call of export: a
// KindTimeout *Error for a deadline, KindCanceled otherwise; prefix
// starts the message.
func ctxError(module, export string, err error, prefix string) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Module: module, Export: export, Kind: KindTimeout, Err: fmt.Errorf("%scaller's deadline exceeded: %w", prefix, err)}
	}
	return &Error{Module: module, Export: export, Kind: KindCanceled, Err: fmt.Errorf("%s%w", prefix, err)}
}
