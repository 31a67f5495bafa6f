package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// InjectRequest is an inbound message for [Server.Inject] and POST
// /admin/v1/inject: what a channel plugin would deliver to a real Gateway.
type InjectRequest struct {
	// SessionKey names the session; it is created when missing. Required.
	SessionKey string `json:"sessionKey"`
	// Role is "user" (default: an inbound channel message) or "assistant".
	Role string `json:"role,omitempty"`
	// Text is the message text. Required.
	Text string `json:"text"`
	// SenderIsOwner marks an inbound user message as sent by the owner
	// (session.message payload senderIsOwner:true); `openclaw mcp serve`
	// needs it to accept a Claude permission reply ("yes abcde").
	SenderIsOwner bool `json:"senderIsOwner,omitempty"`
	// DisplayName and Route set the session's display name and reply route
	// (when the session is created, or to update them); optional.
	DisplayName string `json:"displayName,omitempty"`
	Route       *Route `json:"route,omitempty"`
}

// InjectResult identifies the stored message.
type InjectResult struct {
	SessionKey string `json:"sessionKey"`
	MessageID  string `json:"messageId"`
	MessageSeq int    `json:"messageSeq"`
}

// Inject stores an inbound message and emits its session.message event to
// subscribed connections, as if a channel had delivered it.
func (s *Server) Inject(ctx context.Context, req InjectRequest) (*InjectResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.SessionKey) == "" {
		return nil, errors.New("gateway: inject: sessionKey is required")
	}
	if strings.TrimSpace(req.Text) == "" {
		return nil, errors.New("gateway: inject: text is required")
	}
	role := req.Role
	if role == "" {
		role = "user"
	}
	if role != "user" && role != "assistant" {
		return nil, fmt.Errorf("gateway: inject: role must be user or assistant, not %q", req.Role)
	}
	if req.Route != nil && !req.Route.valid() {
		return nil, errors.New("gateway: inject: route needs both channel and to")
	}
	if s.isClosed() {
		return nil, ErrServerClosed
	}
	s.events.Lock()
	defer s.events.Unlock()
	m, _, e := s.appendInbound(req.SessionKey, req.Route, req.DisplayName, role, req.Text, req.SenderIsOwner && role == "user", "", nil)
	if e != nil {
		return nil, &protocol.RequestError{Method: "inject", ErrorShape: *e}
	}
	return &InjectResult{SessionKey: req.SessionKey, MessageID: m.id, MessageSeq: m.seq}, nil
}

// ApprovalRequest raises an exec or plugin approval through [Server.RequestApproval]
// or POST /admin/v1/approvals/{exec|plugin}, as an agent's tool call or a
// plugin would on a real Gateway.
type ApprovalRequest struct {
	// Kind is "exec" or "plugin" (the URL path sets it for the admin API).
	Kind string `json:"kind,omitempty"`
	// ID is the exec approval id; empty: a new UUID. Plugin ids are always
	// "plugin:<uuid>".
	ID string `json:"id,omitempty"`
	// Command (required for exec), Cwd and Host describe an exec request.
	Command string `json:"command,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Host    string `json:"host,omitempty"`
	// PluginID, Title and Description (all required for plugin), Severity,
	// ToolName and ToolCallID describe a plugin request.
	PluginID    string `json:"pluginId,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Severity    string `json:"severity,omitempty"`
	ToolName    string `json:"toolName,omitempty"`
	ToolCallID  string `json:"toolCallId,omitempty"`
	// AgentID and SessionKey link the request to a session; optional.
	AgentID    string `json:"agentId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	// TimeoutMs is the expiry; zero: the kind's default (Options).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// RequestedByDeviceID makes the request visible only to connections
	// signed with that device id (and operator.admin ones), as for a
	// requester connected with that device identity. Empty: visible to every
	// approval client.
	RequestedByDeviceID string `json:"requestedByDeviceId,omitempty"`
	// Wait makes the call return the final decision instead of the
	// "accepted" acknowledgement.
	Wait bool `json:"wait,omitempty"`
}

// ApprovalResult is the answer to an approval request: the "accepted"
// acknowledgement (Status "accepted") or the final payload, whose Decision is
// nil when the request expired or had no recipient.
type ApprovalResult struct {
	ID          string
	Status      string // "accepted" or "" for a final result
	Decision    *string
	CreatedAtMs int64
	ExpiresAtMs int64
}

// MarshalJSON writes OpenClaw's shapes: {status:"accepted", id,
// deliveryRoute, createdAtMs, expiresAtMs} or {id, decision, createdAtMs,
// expiresAtMs}.
func (r *ApprovalResult) MarshalJSON() ([]byte, error) {
	if r.Status == "accepted" {
		return json.Marshal(object{{"status", "accepted"}, {"id", r.ID}, {"deliveryRoute", "approval-client"},
			{"createdAtMs", r.CreatedAtMs}, {"expiresAtMs", r.ExpiresAtMs}})
	}
	var d any
	if r.Decision != nil {
		d = *r.Decision
	}
	return json.Marshal(object{{"id", r.ID}, {"decision", d}, {"createdAtMs", r.CreatedAtMs}, {"expiresAtMs", r.ExpiresAtMs}})
}

// RequestApproval raises an approval request. Without req.Wait it returns
// at once: "accepted", or the final decision:null when no connection may see
// the request. With req.Wait it returns the final result, or ctx's error.
func (s *Server) RequestApproval(ctx context.Context, req ApprovalRequest) (*ApprovalResult, error) {
	if req.Kind != kindExec && req.Kind != kindPlugin {
		return nil, fmt.Errorf("gateway: approval kind must be exec or plugin, not %q", req.Kind)
	}
	if s.isClosed() {
		return nil, ErrServerClosed
	}
	p := approvalParams{}
	put := func(k, v string) {
		if v != "" {
			p[k], _ = json.Marshal(v)
		}
	}
	put("id", req.ID)
	put("command", req.Command)
	put("cwd", req.Cwd)
	put("host", req.Host)
	put("pluginId", req.PluginID)
	put("title", req.Title)
	put("description", req.Description)
	put("severity", req.Severity)
	put("toolName", req.ToolName)
	put("toolCallId", req.ToolCallID)
	put("agentId", req.AgentID)
	put("sessionKey", req.SessionKey)
	if req.TimeoutMs != 0 {
		p["timeoutMs"], _ = json.Marshal(req.TimeoutMs)
	}
	a, routed, e := s.openApproval(req.Kind, p, nil, req.RequestedByDeviceID)
	if e != nil {
		return nil, &protocol.RequestError{Method: req.Kind + ".approval.request", ErrorShape: *e}
	}
	res := &ApprovalResult{ID: a.id, CreatedAtMs: a.createdAt, ExpiresAtMs: a.expiresAt}
	if routed && !req.Wait {
		res.Status = "accepted"
		return res, nil
	}
	select {
	case <-a.done:
		s.mu.Lock()
		res.Decision = a.decision
		s.mu.Unlock()
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// maxAdminBody caps admin request bodies (a seed can be large).
const maxAdminBody = 32 << 20

// adminMux serves the admin HTTP API. Every endpoint takes
// "Authorization: Bearer <gateway token or password>" and JSON bodies, and
// answers JSON; errors are {"error":{"code","message"}}.
//
//	POST /admin/v1/inject                 InjectRequest → InjectResult
//	POST /admin/v1/approvals/{exec|plugin} ApprovalRequest → accepted or final payload
//	POST /admin/v1/seed[?name=demo]        Seed → SeedResult
//	GET  /admin/v1/status                  {ok, sessions, connections, approvals}
func (s *Server) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admin/v1/inject", s.admin_(func(r *http.Request) (any, error) {
		var req InjectRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		return s.Inject(r.Context(), req)
	}))
	mux.HandleFunc("POST /admin/v1/approvals/{kind}", s.admin_(func(r *http.Request) (any, error) {
		var req ApprovalRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		req.Kind = r.PathValue("kind")
		if req.Kind != kindExec && req.Kind != kindPlugin {
			return nil, &adminError{http.StatusNotFound, "NOT_FOUND", "unknown approval kind: " + req.Kind}
		}
		return s.RequestApproval(r.Context(), req)
	}))
	mux.HandleFunc("POST /admin/v1/seed", s.admin_(func(r *http.Request) (any, error) {
		var sd *Seed
		switch name := r.URL.Query().Get("name"); name {
		case "demo":
			sd = DemoSeed()
		case "":
			data, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, &adminError{http.StatusBadRequest, protocol.CodeInvalidRequest, "reading body: " + err.Error()}
			}
			if sd, err = ParseSeed(data); err != nil {
				return nil, &adminError{http.StatusBadRequest, protocol.CodeInvalidRequest, err.Error()}
			}
		default:
			return nil, &adminError{http.StatusNotFound, "NOT_FOUND", "unknown built-in seed: " + name}
		}
		return s.ApplySeed(r.Context(), sd)
	}))
	mux.HandleFunc("GET /admin/v1/status", s.admin_(func(r *http.Request) (any, error) {
		s.store.mu.Lock()
		n := len(s.store.sessions)
		s.store.mu.Unlock()
		s.mu.Lock()
		conns, appr := len(s.conns), len(s.approvals)
		s.mu.Unlock()
		return object{{"ok", true}, {"sessions", n}, {"connections", conns}, {"approvals", appr}}, nil
	}))
	return mux
}

type adminError struct {
	status  int
	code    string
	message string
}

func (e *adminError) Error() string { return e.message }

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &adminError{http.StatusBadRequest, protocol.CodeInvalidRequest, "invalid JSON body: " + err.Error()}
	}
	return nil
}

// admin_ wraps an admin endpoint with bearer auth, the body cap and JSON
// encoding of the result or error.
func (s *Server) admin_(fn func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !(checkSecret(bearer, s.token) || checkSecret(bearer, s.opts.Password)) {
			writeAdminError(w, &adminError{http.StatusUnauthorized, "UNAUTHORIZED", "unauthorized: missing or wrong bearer token"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
		res, err := fn(r)
		if err != nil {
			var ae *adminError
			var re *protocol.RequestError
			switch {
			case errors.As(err, &ae):
			case errors.As(err, &re):
				ae = &adminError{http.StatusBadRequest, re.Code, re.Message}
			case errors.Is(err, ErrServerClosed):
				ae = &adminError{http.StatusServiceUnavailable, protocol.CodeUnavailable, err.Error()}
			case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
				ae = &adminError{http.StatusServiceUnavailable, protocol.CodeUnavailable, err.Error()}
			default:
				ae = &adminError{http.StatusBadRequest, protocol.CodeInvalidRequest, strings.TrimPrefix(err.Error(), "gateway: ")}
			}
			writeAdminError(w, ae)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	}
}

func writeAdminError(w http.ResponseWriter, e *adminError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(object{{"error", object{{"code", e.code}, {"message", e.message}}}})
}

// AdminClient calls a Gateway's admin HTTP API (what `openclaw gateway
// inject|approval|seed` use).
type AdminClient struct {
	base  string
	token string
	http  *http.Client
}

// AdminError is a failed admin API call: the HTTP status and the error
// object the Gateway returned.
type AdminError struct {
	Status  int
	Code    string
	Message string
}

// Error reads `gateway admin: <message> (<code>, HTTP <status>)`.
func (e *AdminError) Error() string {
	return fmt.Sprintf("gateway admin: %s (%s, HTTP %d)", e.Message, e.Code, e.Status)
}

// NewAdminClient returns a client for the Gateway at gatewayURL, which may
// be the WebSocket URL (ws://127.0.0.1:18789) or its http:// form. hc nil:
// http.DefaultClient.
func NewAdminClient(gatewayURL, token string, hc *http.Client) (*AdminClient, error) {
	u, err := url.Parse(gatewayURL)
	if err != nil {
		return nil, fmt.Errorf("gateway admin: bad URL %q: %w", gatewayURL, err)
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	case "http", "https":
	default:
		return nil, fmt.Errorf("gateway admin: bad URL %q: scheme must be ws, wss, http or https", gatewayURL)
	}
	u.Path, u.RawQuery, u.Fragment = "", "", ""
	if hc == nil {
		hc = http.DefaultClient
	}
	return &AdminClient{base: u.String(), token: token, http: hc}, nil
}

func (a *AdminClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("gateway admin: encoding request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("gateway admin: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("gateway admin: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody))
	if err != nil {
		return fmt.Errorf("gateway admin: reading %s response: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Message == "" {
			e.Error.Message = strings.TrimSpace(string(data))
		}
		return &AdminError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], bytes.TrimSpace(data)...)
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("gateway admin: decoding %s response: %w", path, err)
	}
	return nil
}

// Inject calls POST /admin/v1/inject.
func (a *AdminClient) Inject(ctx context.Context, req InjectRequest) (*InjectResult, error) {
	var res InjectResult
	if err := a.do(ctx, http.MethodPost, "/admin/v1/inject", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RequestApproval calls POST /admin/v1/approvals/{req.Kind} and returns the
// payload as the Gateway wrote it.
func (a *AdminClient) RequestApproval(ctx context.Context, req ApprovalRequest) (json.RawMessage, error) {
	if req.Kind != kindExec && req.Kind != kindPlugin {
		return nil, fmt.Errorf("gateway admin: approval kind must be exec or plugin, not %q", req.Kind)
	}
	var raw json.RawMessage
	if err := a.do(ctx, http.MethodPost, "/admin/v1/approvals/"+req.Kind, req, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Seed calls POST /admin/v1/seed with sd, or with ?name=demo when sd is nil.
func (a *AdminClient) Seed(ctx context.Context, sd *Seed) (*SeedResult, error) {
	var res SeedResult
	path := "/admin/v1/seed"
	var body any = sd
	if sd == nil {
		path += "?name=demo"
		body = nil
	}
	if err := a.do(ctx, http.MethodPost, path, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
