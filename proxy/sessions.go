//lint:file-ignore SA1019 logging is deprecated by SEP-2577 but still served during its deprecation window: a session taken over keeps its client's log level

package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/openclaw-go/openclaw/proxy/sharedstate"
	"github.com/openclaw-go/openclaw/runtime"
)

// SessionStore keeps the records of MCP sessions where every replica
// reads them (*sharedstate.State, in Redis). Errors name the store.
type SessionStore interface {
	// PutSession writes the record of session id, expiring ttl from now.
	PutSession(ctx context.Context, id string, rec sharedstate.Session, ttl time.Duration) error
	// GetSession reads the record of session id; found is false when
	// there is none.
	GetSession(ctx context.Context, id string) (rec sharedstate.Session, found bool, err error)
	// TouchSession moves the record's expiry to ttl from now.
	TouchSession(ctx context.Context, id string, ttl time.Duration) error
	// DeleteSession removes the record.
	DeleteSession(ctx context.Context, id string) error
}

// CodeSharedState is the JSON-RPC error code of a request refused, with
// 503, because the shared state (Redis) it needs did not answer.
const CodeSharedState = -32005

// sessionStateTimeout bounds one access to the session records on the
// path of a request.
const sessionStateTimeout = 2 * time.Second

// keptSessionTTL is the TTL of a session record when idle sessions are
// kept (--session-idle-timeout 0).
const keptSessionTTL = 24 * time.Hour

// sharedSessions serves the streamable HTTP sessions of a replica whose
// records are shared: it writes a record when a session opens (the
// identity that opened it, the negotiated revision, the client's
// initialize params) and when its client sets a log level or subscribes;
// slides the record's expiry as requests arrive; and takes over a session
// another replica opened: a session of the same id is connected here
// from the record (go-sdk's ServerSessionState: initialize params, log
// level), the log level and the resource subscriptions are replayed
// upstream through this replica's own server connections, and the
// session's requests are served by its transport from then on. A
// different identity is refused with 403, as go-sdk refuses one for a
// session it holds.
type sharedSessions struct {
	h     *HTTPHandler
	store SessionStore
	ttl   time.Duration
	group singleflight.Group // one takeover of a session at a time

	mu      sync.Mutex
	adopted map[string]*adoptedSession     // taken over here, by id
	touched map[string]time.Time           // the latest TouchSession of each session seen here
	records map[string]sharedstate.Session // the latest record written or read of each session held here
}

// adoptedSession is a session taken over from another replica.
type adoptedSession struct {
	transport *mcp.StreamableServerTransport
	session   *mcp.ServerSession
	owner     string
}

func newSharedSessions(h *HTTPHandler) *sharedSessions {
	ttl := h.limits.SessionIdleTimeout
	if ttl <= 0 {
		ttl = keptSessionTTL
	}
	return &sharedSessions{h: h, store: h.opts.Sessions, ttl: ttl, adopted: map[string]*adoptedSession{}, touched: map[string]time.Time{},
		records: map[string]sharedstate.Session{}}
}

// requestUser is the session user of r (go-sdk's auth.TokenInfo.UserID,
// set by authorized), "" without one.
func requestUser(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		return ti.UserID
	}
	return ""
}

// serve routes a stateful /mcp request: a session held here (opened or
// taken over) is served here; one held nowhere here is looked up in the
// shared records and taken over; a request without a session, or for a
// session without a record, goes to go-sdk's handler next (which opens a
// session, or answers 404).
func (s *sharedSessions) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		next.ServeHTTP(w, r)
		return
	}
	if a := s.get(sid); a != nil {
		s.serveAdopted(a, w, r)
		return
	}
	if s.h.session(sid) != nil {
		s.touch(r.Context(), sid)
		next.ServeHTTP(w, r)
		if r.Method == http.MethodDelete {
			s.forget(r.Context(), sid)
		}
		return
	}
	if a := s.adopt(next, w, r, sid); a != nil {
		s.serveAdopted(a, w, r)
	}
}

// The outcomes of a session_takeover span (attribute
// openclaw.session.takeover).
const (
	takeoverDone     = "taken_over"
	takeoverNoRecord = "no_record"
	takeoverRefused  = "refused"
	takeoverFailed   = "failed"
)

// adopt looks session sid, which this replica does not hold, up in the
// shared records and takes it over, or answers r itself (nil): 503 when
// the records cannot be read, go-sdk's 404 when there is none, 403 for
// another identity, the DELETE of a session held elsewhere, a refusal
// while draining or at the session limit. Traced (Proxy.tracer), it is a
// span of its own, session_takeover, in the trace of the request's _meta
// when it carries one; the record's read and the replays upstream are
// its children.
func (s *sharedSessions) adopt(next http.Handler, w http.ResponseWriter, r *http.Request, sid string) *adoptedSession {
	ctx := r.Context()
	outcome := ""
	if tracer := s.h.p.tracer; tracer != nil {
		var span trace.Span
		ctx, span = tracer.Start(runtime.TraceContextFromMeta(ctx, requestMeta(r)), "session_takeover",
			trace.WithAttributes(append(runtime.IdentityAttributes(requestIdentity(ctx)), runtime.AttrMCPSession.String(sid))...))
		defer func() {
			span.SetAttributes(attrTakeover.String(outcome))
			if outcome == takeoverFailed {
				span.SetStatus(codes.Error, "session takeover failed")
			}
			span.End()
		}()
	}
	sctx, cancel := context.WithTimeout(ctx, sessionStateTimeout)
	rec, found, err := s.store.GetSession(sctx, sid)
	cancel()
	outcome = takeoverRefused
	switch {
	case err != nil:
		outcome = takeoverFailed
		s.h.logger.Warn("openclaw mcp proxy: a session opened elsewhere cannot be taken over", "err", err)
		writeRPCError(w, http.StatusServiceUnavailable, jsonrpc.ID{}, CodeSharedState,
			fmt.Sprintf("proxy: this session was opened on another replica and its record cannot be read: %v", err))
		return nil
	case !found:
		outcome = takeoverNoRecord
		next.ServeHTTP(w, r) // go-sdk's 404: the client initializes again
		return nil
	case rec.Owner != requestUser(r):
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return nil
	case r.Method == http.MethodDelete:
		s.forget(ctx, sid)
		w.WriteHeader(http.StatusNoContent)
		return nil
	case s.h.refuseDraining(w, jsonrpc.ID{}):
		return nil
	case !s.h.admitSession(false):
		writeTooManySessions(w, jsonrpc.ID{}, s.h.limits.MaxSessions)
		return nil
	}
	v, err, _ := s.group.Do(sid, func() (any, error) { return s.takeOver(ctx, sid, rec) })
	if err != nil {
		outcome = takeoverFailed
		s.h.logger.Warn("openclaw mcp proxy: session takeover failed", "err", err)
		writeRPCError(w, http.StatusInternalServerError, jsonrpc.ID{}, jsonrpc.CodeInternalError, "proxy: taking over the session failed: "+err.Error())
		return nil
	}
	outcome = takeoverDone
	return v.(*adoptedSession)
}

// attrTakeover is the outcome of a session_takeover span: taken_over,
// no_record (the client initializes again), refused (another identity,
// a DELETE, draining, the session limit) or failed (the records could
// not be read, or the session not connected here).
const attrTakeover = attribute.Key("openclaw.session.takeover")

// requestMeta is the _meta of the JSON-RPC request in r's body (a POST),
// nil without one. The body was read and bounded before (checkFrames);
// it is left for the handler to read again.
func requestMeta(r *http.Request) map[string]any {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return nil
	}
	return msg.Params.Meta
}

// serveAdopted serves a request of a session taken over here.
func (s *sharedSessions) serveAdopted(a *adoptedSession, w http.ResponseWriter, r *http.Request) {
	if requestUser(r) != a.owner {
		http.Error(w, "session user mismatch", http.StatusForbidden)
		return
	}
	sid := a.transport.SessionID
	if r.Method == http.MethodDelete {
		_ = a.session.Close()
		s.forget(r.Context(), sid)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.touch(r.Context(), sid)
	a.transport.ServeHTTP(w, r)
}

func (s *sharedSessions) get(sid string) *adoptedSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adopted[sid]
}

// takeOver connects session sid here from its record and replays
// upstream what its client set: the log level and the resource
// subscriptions (a subscription the server refuses is logged and
// skipped). go-sdk's handler owns the ids of the sessions it opens, so
// the session is connected on a StreamableServerTransport of its own,
// with the record's id.
func (s *sharedSessions) takeOver(ctx context.Context, sid string, rec sharedstate.Session) (*adoptedSession, error) {
	if a := s.get(sid); a != nil {
		return a, nil
	}
	var ip mcp.InitializeParams
	if err := json.Unmarshal(rec.Initialize, &ip); err != nil {
		return nil, fmt.Errorf("the record's initialize params: %w", err)
	}
	t := &mcp.StreamableServerTransport{SessionID: sid}
	// The session outlives the takeover: its requests are not in the
	// takeover's trace (the span in ctx).
	cctx := trace.ContextWithSpanContext(context.WithoutCancel(ctx), trace.SpanContext{})
	ss, err := s.h.p.Server().Connect(cctx, t, &mcp.ServerSessionOptions{State: &mcp.ServerSessionState{
		InitializeParams: &ip, InitializedParams: &mcp.InitializedParams{},
		NegotiatedProtocolVersion: rec.Protocol, LogLevel: mcp.LoggingLevel(rec.LogLevel),
	}})
	if err != nil {
		return nil, err
	}
	a := &adoptedSession{transport: t, session: ss, owner: rec.Owner}
	s.mu.Lock()
	s.adopted[sid] = a
	s.records[sid] = rec
	s.mu.Unlock()
	if s.h.idle != nil {
		s.h.idle.opened(sid)
	}
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		delete(s.adopted, sid)
		delete(s.touched, sid)
		delete(s.records, sid)
		s.mu.Unlock()
		s.h.p.releaseEnded(context.Background())
	}()
	p := s.h.p
	if rec.LogLevel != "" && p.caps.Logging != nil {
		p.setLevel(ctx, ss, mcp.LoggingLevel(rec.LogLevel))
	}
	if p.caps.Resources != nil {
		for _, uri := range rec.Subscriptions {
			if err := p.subscribe(ctx, &mcp.SubscribeRequest{Session: ss, Params: &mcp.SubscribeParams{URI: uri}}); err != nil {
				s.h.logger.Warn("openclaw mcp proxy: a resource subscription of a session taken over was not renewed upstream", "uri", uri, "err", err)
			}
		}
	}
	s.h.logger.Info("openclaw mcp proxy: took over a session opened on another replica",
		"protocol", rec.Protocol, "log_level", rec.LogLevel, "subscriptions", len(rec.Subscriptions))
	return a, nil
}

// touch slides the expiry of session sid's record, at most once per
// tenth of the TTL: off the path of most requests. A failure is logged
// (the session is served here; another replica could not take it over
// once the record expired).
func (s *sharedSessions) touch(ctx context.Context, sid string) {
	now := time.Now()
	s.mu.Lock()
	due := now.Sub(s.touched[sid]) >= s.ttl/10
	if due {
		s.touched[sid] = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionStateTimeout)
	defer cancel()
	if err := s.store.TouchSession(ctx, sid, s.ttl); err != nil {
		s.h.logger.Warn("openclaw mcp proxy: the session's record was not renewed", "err", err)
	}
}

// forget deletes session sid's record (its client ended it).
func (s *sharedSessions) forget(ctx context.Context, sid string) {
	s.mu.Lock()
	delete(s.touched, sid)
	delete(s.records, sid)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionStateTimeout)
	defer cancel()
	if err := s.store.DeleteSession(ctx, sid); err != nil {
		s.h.logger.Warn("openclaw mcp proxy: the record of an ended session was not deleted; it expires", "err", err)
	}
}

// record is a receiving middleware that writes the record of a
// streamable HTTP session when it opens (initialize), and again when its
// client sets a log level or changes its resource subscriptions. A
// failure is logged: the session is served here, but another replica
// cannot take it over.
func (s *sharedSessions) record(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch method {
		case "initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		default:
			return res, err
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		extra := req.GetExtra()
		// Only streamable HTTP sets the request's header: legacy SSE
		// sessions and stdio are not shared.
		if !ok || ss.ID() == "" || extra == nil || extra.Header == nil {
			return res, err
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionStateTimeout)
		defer cancel()
		var span trace.Span
		if tracer := s.h.p.tracer; tracer != nil {
			// This middleware runs outside the request's span (traceRequests).
			sctx, span = tracer.Start(runtime.TraceContextFromMeta(sctx, req.GetParams().GetMeta()), "session_record",
				trace.WithAttributes(runtime.AttrMCPMethod.String(method), runtime.AttrMCPSession.String(ss.ID())))
			defer span.End()
		}
		if werr := s.update(sctx, ss, method, req, res, extra); werr != nil {
			if span != nil {
				span.SetStatus(codes.Error, "session record not written")
			}
			s.h.logger.Warn("openclaw mcp proxy: the session's record was not written: another replica cannot take it over", "method", method, "err", werr)
		}
		return res, err
	}
}

// update writes session ss's record after method succeeded.
func (s *sharedSessions) update(ctx context.Context, ss *mcp.ServerSession, method string, req mcp.Request, res mcp.Result, extra *mcp.RequestExtra) error {
	var rec sharedstate.Session
	if method == "initialize" {
		ir, ok := res.(*mcp.InitializeResult)
		if !ok || ir.ProtocolVersion >= sessionlessRevision || ss.InitializeParams() == nil {
			return nil
		}
		raw, err := json.Marshal(ss.InitializeParams())
		if err != nil {
			return err
		}
		rec = sharedstate.Session{Protocol: ir.ProtocolVersion, Initialize: raw}
		if extra.TokenInfo != nil {
			rec.Owner = extra.TokenInfo.UserID
		}
	} else {
		var found bool
		var err error
		if rec, found, err = s.store.GetSession(ctx, ss.ID()); err != nil || !found {
			return err
		}
		switch r := req.(type) {
		case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
			rec.LogLevel = string(r.Params.Level)
		case *mcp.SubscribeRequest:
			if !slices.Contains(rec.Subscriptions, r.Params.URI) {
				rec.Subscriptions = append(rec.Subscriptions, r.Params.URI)
			}
		case *mcp.UnsubscribeRequest:
			rec.Subscriptions = slices.DeleteFunc(rec.Subscriptions, func(u string) bool { return u == r.Params.URI })
		}
	}
	s.mu.Lock()
	s.touched[ss.ID()] = time.Now()
	s.records[ss.ID()] = rec
	s.mu.Unlock()
	return s.store.PutSession(ctx, ss.ID(), rec, s.ttl)
}

// rewrite writes again the record of every session held here (records
// of sessions that ended are dropped): after Redis came back, perhaps
// empty, the sessions held here can move again.
func (s *sharedSessions) rewrite(ctx context.Context) error {
	s.mu.Lock()
	recs := make(map[string]sharedstate.Session, len(s.records))
	for sid, rec := range s.records {
		if s.h.session(sid) == nil {
			delete(s.records, sid)
			delete(s.touched, sid)
			continue
		}
		recs[sid] = rec
	}
	s.mu.Unlock()
	for sid, rec := range recs {
		if err := s.store.PutSession(ctx, sid, rec, s.ttl); err != nil {
			return err
		}
	}
	return nil
}

// RewriteSessions writes again the shared record of every streamable HTTP
// session this handler holds, for a replica whose connection to the
// shared state came back (Redis restarted, perhaps empty). Without
// HTTPOptions.Sessions it does nothing. The error is the store's.
func (h *HTTPHandler) RewriteSessions(ctx context.Context) error {
	if h.shared == nil {
		return nil
	}
	return h.shared.rewrite(ctx)
}
