package wasmhost

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Pool is a bounded pool of module instances of type T, the policy
// engines' shared discipline: at most Size calls hold an instance at once,
// an idle instance is reused, a missing one is created on demand, and an
// instance that failed is discarded, never reused. Module uses it for its
// *Instance values; adapters that instantiate modules themselves (the OPA
// adapter links an imported memory, which Load refuses) use it for theirs.
// Its methods are safe for concurrent use.
//
// A failure is cheap for everyone else: the instance that replaces a
// discarded one is created in the background, off every caller's path, so
// the failing call returns at once and the next caller finds it ready.
// And a caller whose last call failed (named by [WithCaller]) is served
// after every waiting caller in good standing, and such callers together
// hold at most Size-1 slots (with Size ≥ 2): a session that keeps sending
// input that makes the module fail cannot take the pool from the others.
type Pool[T any] struct {
	module  string // the module's name, for errors
	create  func(ctx context.Context) (T, error)
	destroy func(T)
	size    int

	mu        sync.Mutex
	inUse     int            // slots taken
	suspects  int            // of them, by callers whose last call failed
	held      map[string]int // suspect slots by caller
	failed    map[string]struct{}
	live      int // instances idle, in use or being created
	refilling int // background creations in flight
	idle      []T
	waiters   [2][]*slotWaiter    // callers waiting for a slot: [0] in good standing, [1] suspect
	instWait  []chan instGrant[T] // slot holders waiting for an instance being created

	done    chan struct{} // closed when Shutdown starts
	drained chan struct{} // closed once closing with no slot taken and no creation in flight
	closing atomic.Bool
}

type slotWaiter struct {
	key     string
	suspect bool
	ready   chan struct{} // closed when the slot is granted
	granted bool
}

// instGrant hands a slot holder an instance, or (ok false) the duty to
// create one itself, with the live count already taken for it.
type instGrant[T any] struct {
	inst T
	ok   bool
}

// maxFailedCallers bounds the callers remembered as failed.
const maxFailedCallers = 4096

type callerKey struct{}

// WithCaller returns ctx naming the caller on whose behalf guest calls
// made with it run (a session key, a client name). A [Pool] serves a
// caller whose last call failed after the others; "" (the default) names
// no one and is always in good standing.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

func callerOf(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// NewPool returns a pool of at most size instances (size < 1 means 1) of
// the module named module. create makes a new instance (its error is
// returned by Acquire as is); destroy releases one that is discarded.
func NewPool[T any](module string, size int, create func(ctx context.Context) (T, error), destroy func(T)) *Pool[T] {
	return &Pool[T]{
		module:  module,
		create:  create,
		destroy: destroy,
		size:    max(size, 1),
		held:    map[string]int{},
		failed:  map[string]struct{}{},
		done:    make(chan struct{}),
		drained: make(chan struct{}),
	}
}

// Size returns the most instances that can be in use at once.
func (p *Pool[T]) Size() int { return p.size }

// Closing reports whether Shutdown has started.
func (p *Pool[T]) Closing() bool { return p.closing.Load() }

// Put adds inst to the idle instances without taking a slot: Load uses it
// for the pre-warmed first instance.
func (p *Pool[T]) Put(inst T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live++
	p.idle = append(p.idle, inst)
}

// canGrant reports whether a free slot may go to a caller of this class.
func (p *Pool[T]) canGrant(suspect bool) bool {
	return p.inUse < p.size && (!suspect || p.size == 1 || p.suspects < p.size-1)
}

// take records a granted slot; p.mu is held.
func (p *Pool[T]) take(key string, suspect bool) {
	p.inUse++
	if suspect {
		p.suspects++
		p.held[key]++
	}
}

// freeSlot frees the slot of key and grants waiting callers, those in
// good standing first; p.mu is held.
func (p *Pool[T]) freeSlot(key string) {
	p.inUse--
	if p.held[key] > 0 {
		p.suspects--
		if p.held[key]--; p.held[key] == 0 {
			delete(p.held, key)
		}
	}
	for {
		var w *slotWaiter
		switch {
		case len(p.waiters[0]) > 0 && p.canGrant(false):
			w, p.waiters[0] = p.waiters[0][0], p.waiters[0][1:]
		case len(p.waiters[1]) > 0 && p.canGrant(true):
			w, p.waiters[1] = p.waiters[1][0], p.waiters[1][1:]
		default:
			p.checkDrained()
			return
		}
		p.take(w.key, w.suspect)
		w.granted = true
		close(w.ready)
	}
}

func (p *Pool[T]) checkDrained() {
	if p.closing.Load() && p.inUse == 0 && p.refilling == 0 {
		select {
		case <-p.drained:
		default:
			close(p.drained)
		}
	}
}

// Acquire takes a slot and an instance for a call of export (named in
// errors), creating one when none is idle or being created. It waits for
// a slot until ctx is done (a KindTimeout or KindCanceled *Error) and
// fails at once with a KindClosed *Error once Shutdown has started. The
// caller named by [WithCaller] in ctx is served after callers in good
// standing when its last call failed. Every successful Acquire must be
// followed by one Release with a context naming the same caller.
func (p *Pool[T]) Acquire(ctx context.Context, export string) (T, error) {
	var zero T
	if p.closing.Load() {
		return zero, p.ClosedError(export)
	}
	key := callerOf(ctx)
	p.mu.Lock()
	_, suspect := p.failed[key]
	class := 0
	if suspect {
		class = 1
	}
	if p.canGrant(suspect) && len(p.waiters[0]) == 0 && (!suspect || len(p.waiters[1]) == 0) {
		p.take(key, suspect)
		p.mu.Unlock()
	} else {
		w := &slotWaiter{key: key, suspect: suspect, ready: make(chan struct{})}
		p.waiters[class] = append(p.waiters[class], w)
		p.mu.Unlock()
		select {
		case <-w.ready:
		case <-ctx.Done():
			p.abandon(w, class)
			return zero, ctxError(p.module, export, ctx.Err(), "waiting for an instance: ")
		case <-p.done:
			p.abandon(w, class)
			return zero, p.ClosedError(export)
		}
	}
	if p.closing.Load() {
		p.mu.Lock()
		p.freeSlot(key)
		p.mu.Unlock()
		return zero, p.ClosedError(export)
	}
	return p.instance(ctx, export, key)
}

// abandon withdraws a slot waiter, freeing the slot if it was granted
// meanwhile.
func (p *Pool[T]) abandon(w *slotWaiter, class int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		p.freeSlot(w.key)
		return
	}
	q := p.waiters[class]
	for i, x := range q {
		if x == w {
			p.waiters[class] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
}

// instance returns an instance for the slot of key: an idle one, a new one
// when fewer than Size exist, or the next one a background creation
// finishes.
func (p *Pool[T]) instance(ctx context.Context, export, key string) (T, error) {
	var zero T
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	if p.live < p.size {
		p.live++
		p.mu.Unlock()
		return p.createFor(ctx, key)
	}
	ch := make(chan instGrant[T], 1)
	p.instWait = append(p.instWait, ch)
	p.mu.Unlock()
	select {
	case g := <-ch:
		if g.ok {
			return g.inst, nil
		}
		return p.createFor(ctx, key)
	case <-ctx.Done():
		p.giveUp(ch, key)
		return zero, ctxError(p.module, export, ctx.Err(), "waiting for an instance: ")
	case <-p.done:
		p.giveUp(ch, key)
		return zero, p.ClosedError(export)
	}
}

// giveUp withdraws the instance waiter ch and frees the slot of key.
func (p *Pool[T]) giveUp(ch chan instGrant[T], key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.withdraw(ch)
	p.freeSlot(key)
}

// createFor creates an instance inline for the slot of key, whose live
// count is taken; on failure it gives both back.
func (p *Pool[T]) createFor(ctx context.Context, key string) (T, error) {
	inst, err := p.create(ctx)
	if err != nil {
		p.mu.Lock()
		p.lost()
		p.freeSlot(key)
		p.mu.Unlock()
		return inst, err
	}
	return inst, nil
}

// withdraw removes an instance waiter that gave up; a grant already sent
// to it goes to the next one. p.mu is held.
func (p *Pool[T]) withdraw(ch chan instGrant[T]) {
	for i, x := range p.instWait {
		if x == ch {
			p.instWait = append(p.instWait[:i:i], p.instWait[i+1:]...)
			return
		}
	}
	if g := <-ch; g.ok {
		p.handOut(g.inst)
	} else {
		p.lost()
	}
}

// handOut gives inst to the first slot holder waiting for one, or makes
// it idle. p.mu is held.
func (p *Pool[T]) handOut(inst T) {
	if len(p.instWait) > 0 {
		ch := p.instWait[0]
		p.instWait = p.instWait[1:]
		ch <- instGrant[T]{inst: inst, ok: true}
		return
	}
	p.idle = append(p.idle, inst)
}

// lost accounts for an instance that will not exist after all (its
// creation failed): a slot holder waiting for one creates it instead.
// p.mu is held.
func (p *Pool[T]) lost() {
	if len(p.instWait) > 0 {
		ch := p.instWait[0]
		p.instWait = p.instWait[1:]
		ch <- instGrant[T]{} // the live count passes to it
		return
	}
	p.live--
}

// Release returns inst to the pool, or destroys it when discard is true
// or Shutdown has started, and frees its slot. A discarded instance is
// replaced in the background. ctx names the caller (see [WithCaller]):
// a discard marks it as failed, a clean release as in good standing.
func (p *Pool[T]) Release(ctx context.Context, inst T, discard bool) {
	key := callerOf(ctx)
	p.mu.Lock()
	if key != "" {
		if discard {
			if len(p.failed) >= maxFailedCallers {
				for k := range p.failed {
					delete(p.failed, k)
					break
				}
			}
			p.failed[key] = struct{}{}
		} else {
			delete(p.failed, key)
		}
	}
	switch {
	case p.closing.Load():
		// Destroyed while its slot is still held: Shutdown, and the
		// Runtime's Close after it, wait for it.
		p.mu.Unlock()
		p.destroy(inst)
		releaseMemory()
		p.mu.Lock()
		p.live--
		p.freeSlot(key)
		p.mu.Unlock()
		return
	case discard:
		p.refilling++
		p.freeSlot(key)
		p.mu.Unlock()
		p.destroy(inst)
		releaseMemory()
		go p.refill()
		return
	}
	p.handOut(inst)
	p.freeSlot(key)
	p.mu.Unlock()
}

// refill creates the replacement of a discarded instance, off every
// caller's path (create bounds its own time).
func (p *Pool[T]) refill() {
	inst, err := p.create(context.Background())
	p.mu.Lock()
	if err == nil && p.closing.Load() {
		// Destroyed while still counted as being created: Shutdown, and
		// the Runtime's Close after it, wait for it.
		p.mu.Unlock()
		p.destroy(inst)
		releaseMemory()
		p.mu.Lock()
		p.live--
		p.refilling--
		p.checkDrained()
		p.mu.Unlock()
		return
	}
	p.refilling--
	if err != nil {
		p.lost()
	} else {
		p.handOut(inst)
	}
	p.checkDrained()
	p.mu.Unlock()
}

// Shutdown makes later Acquire calls fail with KindClosed and waits until
// every slot is free (the calls in flight have released their instances)
// and no replacement is being created, or ctx is done, whichever comes
// first. It must be called once; the caller then closes the wazero
// Runtime, which releases the idle instances with it.
func (p *Pool[T]) Shutdown(ctx context.Context) {
	p.closing.Store(true)
	close(p.done)
	p.mu.Lock()
	p.checkDrained()
	p.mu.Unlock()
	select {
	case <-p.drained:
	case <-ctx.Done():
	}
}

// ClosedError is the KindClosed *Error of a call of export after Shutdown.
func (p *Pool[T]) ClosedError(export string) *Error {
	return &Error{Module: p.module, Export: export, Kind: KindClosed, Err: errors.New("module is closed")}
}
