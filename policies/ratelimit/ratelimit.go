// Package ratelimit is the [policies.Limiter] of the policy file's
// rate_limits (docs/policy-file.md): per identity, tool pattern and
// server, requests per fixed window and calls in progress, with the
// counters in a [Store] ([MemoryStore] in one process). A refused call is
// a [*policies.LimitError] and an audit record under
// [policies.HookRateLimit].
package ratelimit

import (
	"context"
	"strconv"
	"time"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/glob"
	"github.com/openclaw-go/openclaw/policies"
)

// Limiter checks a call against every limit that matches it, in the
// policy file's order. It implements [policies.Limiter]. A limit split
// per "identity" counts the calls of the authenticated caller (the
// Identity's issuer and subject) apart, and, for a call without an
// Identity, those of its [policies.RequesterKey] (session key, else
// clientInfo; calls with neither share one counter). A Limiter with
// no limits admits every call without touching its store.
type Limiter struct {
	limits []limit
	store  Store
	audit  policies.AuditSink
}

// limit is a compiled config.PolicyRateLimit.
type limit struct {
	name                string
	tool, server        glob.Pattern
	perID, perSrv, perT bool
	requests            int64
	interval            time.Duration
	concurrent          int64
}

// New compiles limits (validated by config.ParsePolicyFile; New checks
// them again, so that a limit built another way fails closed too) over
// store. audit receives the record of every refusal; nil records nothing.
func New(limits []config.PolicyRateLimit, store Store, audit policies.AuditSink) (*Limiter, error) {
	if err := config.ValidateRateLimits(limits); err != nil {
		return nil, err
	}
	l := &Limiter{store: store, audit: audit}
	for _, c := range limits {
		pat := func(p string) glob.Pattern {
			if p == "" {
				p = "*"
			}
			return glob.Compile(p)
		}
		per := c.Per
		if len(per) == 0 {
			per = []string{"identity"}
		}
		li := limit{name: c.Name, tool: pat(c.Tool), server: pat(c.Server), requests: c.Requests,
			interval: time.Duration(c.IntervalS) * time.Second, concurrent: c.Concurrent}
		for _, p := range per {
			switch p {
			case "identity":
				li.perID = true
			case "server":
				li.perSrv = true
			case "tool":
				li.perT = true
			}
		}
		l.limits = append(l.limits, li)
	}
	return l, nil
}

// PerIdentity returns the names of the limits that keep a counter per
// identity, in the policy file's order.
func (l *Limiter) PerIdentity() []string {
	var names []string
	for _, li := range l.limits {
		if li.perID {
			names = append(names, li.name)
		}
	}
	return names
}

// Len returns the number of limits.
func (l *Limiter) Len() int { return len(l.limits) }

// key is the counter key of call under li, kind 'r' or 'c': the kind,
// the limit's name and each split value, each prefixed by its length, so
// that no two calls that differ share a key.
func (li *limit) key(kind byte, call *policies.ToolCall) string {
	var buf [160]byte
	b := append(buf[:0], kind)
	part := func(tag byte, vs ...string) {
		b = append(b, '|', tag)
		for _, v := range vs {
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(b, ':')
			b = append(b, v...)
		}
	}
	part('n', li.name)
	if li.perID {
		if id := call.Identity; id != nil {
			part('i', "sub", id.Issuer, id.Subject)
		} else {
			part('i', "req", policies.RequesterKey(call.SessionKey, call.Caller))
		}
	}
	if li.perSrv {
		part('s', call.Tool.Server)
	}
	if li.perT {
		part('t', call.Tool.Name)
	}
	return string(b)
}

// Acquire implements [policies.Limiter]. The counters a refused call took
// are given back, so a refusal costs no limit a call. The release it
// returns gives back the concurrent slots, with a context that is not
// cancelled (a cancelled call releases too).
func (l *Limiter) Acquire(ctx context.Context, call *policies.ToolCall) (func(), error) {
	if bs, ok := l.store.(BatchStore); ok {
		return l.acquireAll(ctx, bs, call)
	}
	var tk, hd [4]string
	taken, held := tk[:0], hd[:0] // request counters, concurrent slots
	undo := func(keys []string) {
		for _, k := range keys {
			_ = l.store.Release(context.WithoutCancel(ctx), k)
		}
	}
	for i := range l.limits {
		li := &l.limits[i]
		if !li.tool.Match(call.Tool.Name) || !li.server.Match(call.Tool.Server) {
			continue
		}
		if li.requests > 0 {
			k := li.key('r', call)
			ok, exp, err := l.store.Take(ctx, k, li.requests, li.interval)
			if err != nil || !ok {
				undo(taken)
				undo(held)
				return nil, l.refuse(call, li, policies.LimitRequests, exp, err)
			}
			taken = append(taken, k)
		}
		if li.concurrent > 0 {
			k := li.key('c', call)
			ok, _, err := l.store.Take(ctx, k, li.concurrent, 0)
			if err != nil || !ok {
				undo(taken)
				undo(held)
				return nil, l.refuse(call, li, policies.LimitConcurrent, time.Time{}, err)
			}
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		return func() {}, nil
	}
	return func() { undo(held) }, nil
}

// refuse builds the refusal of call by li and audits it.
func (l *Limiter) refuse(call *policies.ToolCall, li *limit, kind string, expires time.Time, err error) error {
	e := &policies.LimitError{Limit: li.name, Kind: kind, RetryAfter: time.Second}
	switch {
	case err != nil:
		e.Kind, e.Err = policies.LimitStore, err
	case kind == policies.LimitRequests:
		e.Max, e.Interval = li.requests, li.interval
		if !expires.IsZero() {
			e.RetryAfter = max(time.Second, (time.Until(expires) + time.Second - 1).Truncate(time.Second))
		}
	default:
		e.Max = li.concurrent
	}
	if l.audit != nil {
		r := policies.AuditRecord{Time: time.Now().UTC(), Hook: policies.HookRateLimit, Surface: call.Surface,
			SessionKey: call.SessionKey, Caller: call.Caller.Name, Tool: call.Tool.Name, Server: call.Tool.Server,
			Module: li.name, Mode: policies.Enforce, Decision: string(policies.Block), Reason: e.Error()}
		if err != nil {
			r.Error = err.Error()
		}
		r.SetIdentity(call.Identity)
		l.audit.Record(r)
	}
	return e
}

// acquireAll is Acquire over a [BatchStore]: the counters of every
// limit that matches call are taken in one TakeAll, all or none.
func (l *Limiter) acquireAll(ctx context.Context, bs BatchStore, call *policies.ToolCall) (func(), error) {
	// whose[i] is the limit and kind of takes[i].
	type owner struct {
		li   *limit
		kind string
	}
	var tk [4]Take
	var of [4]owner
	takes, whose := tk[:0], of[:0]
	var held []string
	for i := range l.limits {
		li := &l.limits[i]
		if !li.tool.Match(call.Tool.Name) || !li.server.Match(call.Tool.Server) {
			continue
		}
		if li.requests > 0 {
			takes = append(takes, Take{Key: li.key('r', call), Max: li.requests, TTL: li.interval})
			whose = append(whose, owner{li, policies.LimitRequests})
		}
		if li.concurrent > 0 {
			k := li.key('c', call)
			takes = append(takes, Take{Key: k, Max: li.concurrent})
			whose = append(whose, owner{li, policies.LimitConcurrent})
			held = append(held, k)
		}
	}
	if len(takes) == 0 {
		return func() {}, nil
	}
	refused, exp, err := bs.TakeAll(ctx, takes)
	switch {
	case err != nil:
		return nil, l.refuse(call, whose[0].li, whose[0].kind, time.Time{}, err)
	case refused >= 0:
		w := whose[refused]
		if w.kind == policies.LimitConcurrent {
			exp = time.Time{}
		}
		return nil, l.refuse(call, w.li, w.kind, exp, nil)
	case len(held) == 0:
		return func() {}, nil
	}
	return func() {
		for _, k := range held {
			_ = bs.Release(context.WithoutCancel(ctx), k)
		}
	}, nil
}
