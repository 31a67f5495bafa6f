package wasmhost

import (
	"context"
	"errors"
	"sync/atomic"
)

// Pool is a bounded pool of module instances of type T, the policy
// engines' shared discipline: at most Size instances are in use at once, an
// idle instance is reused, a missing one is created on demand, and an
// instance that failed is discarded, never reused. Module uses it for its
// *Instance values; adapters that instantiate modules themselves (the OPA
// adapter links an imported memory, which Load refuses) use it for theirs.
// Its methods are safe for concurrent use.
type Pool[T any] struct {
	module  string // the module's name, for errors
	create  func(ctx context.Context) (T, error)
	destroy func(T)

	sem  chan struct{} // one token per instance in use
	idle chan T        // instances ready for a call
	done chan struct{} // closed when Shutdown starts

	closing atomic.Bool
}

// NewPool returns a pool of at most size instances (size < 1 means 1) of
// the module named module. create makes a new instance (its error is
// returned by Acquire as is); destroy releases one that is discarded.
func NewPool[T any](module string, size int, create func(ctx context.Context) (T, error), destroy func(T)) *Pool[T] {
	size = max(size, 1)
	return &Pool[T]{
		module:  module,
		create:  create,
		destroy: destroy,
		sem:     make(chan struct{}, size),
		idle:    make(chan T, size),
		done:    make(chan struct{}),
	}
}

// Size returns the most instances that can be in use at once.
func (p *Pool[T]) Size() int { return cap(p.sem) }

// Closing reports whether Shutdown has started.
func (p *Pool[T]) Closing() bool { return p.closing.Load() }

// Put adds inst to the idle instances without taking a slot: Load uses it
// for the pre-warmed first instance. It blocks if the pool already holds
// Size idle instances.
func (p *Pool[T]) Put(inst T) { p.idle <- inst }

// Acquire takes a slot and an instance for a call of export (named in
// errors), creating one when none is idle. It waits for a slot until ctx
// is done (a KindTimeout or KindCanceled *Error) and fails at once with a
// KindClosed *Error once Shutdown has started. Every successful Acquire
// must be followed by one Release.
func (p *Pool[T]) Acquire(ctx context.Context, export string) (T, error) {
	var zero T
	if p.closing.Load() {
		return zero, p.ClosedError(export)
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return zero, ctxError(p.module, export, ctx.Err(), "waiting for an instance: ")
	case <-p.done:
		return zero, p.ClosedError(export)
	}
	if p.closing.Load() {
		<-p.sem
		return zero, p.ClosedError(export)
	}
	select {
	case inst := <-p.idle:
		return inst, nil
	default:
	}
	inst, err := p.create(ctx)
	if err != nil {
		<-p.sem
		return zero, err
	}
	return inst, nil
}

// Release returns inst to the idle instances, or destroys it when discard
// is true or Shutdown has started, and frees its slot. The memory of a
// destroyed instance is returned to the operating system soon after, off
// the call path and at most once a second for the whole process.
func (p *Pool[T]) Release(inst T, discard bool) {
	if discard || p.closing.Load() {
		p.destroy(inst)
		releaseMemory()
	} else {
		p.idle <- inst
	}
	<-p.sem
}

// Shutdown makes later Acquire calls fail with KindClosed and waits until
// every slot is free (the calls in flight have released their instances)
// or ctx is done, whichever comes first. It must be called once; the
// caller then closes the wazero Runtime, which releases the idle
// instances with it.
func (p *Pool[T]) Shutdown(ctx context.Context) {
	p.closing.Store(true)
	close(p.done)
	for range cap(p.sem) {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
	}
}

// ClosedError is the KindClosed *Error of a call of export after Shutdown.
func (p *Pool[T]) ClosedError(export string) *Error {
	return &Error{Module: p.module, Export: export, Kind: KindClosed, Err: errors.New("module is closed")}
}
