// Package protocol holds the OpenClaw Gateway WebSocket vocabulary shared by
// the bridge (the client side, package bridge) and the local Gateway (package
// gateway): frame types, error codes, the connect parameters and the Ed25519
// device identity with its signed connect string.
//
// It mirrors OpenClaw 2026.9.6 (protocol version 4) as captured on the wire;
// see docs/protocol-facts.md, Gateway frames to Connect failures. It imports only the
// standard library, so both sides can depend on it without depending on each
// other.
//
// Every WebSocket text message carries exactly one JSON object, a [Frame]:
//
//	{"type":"req","id":"1:<uuid>","method":"connect","params":{…}}
//	{"type":"res","id":"1:<uuid>","ok":true,"payload":{…}}
//	{"type":"res","id":"1:<uuid>","ok":false,"error":{"code":"INVALID_REQUEST","message":"…"}}
//	{"type":"event","event":"tick","payload":{"ts":…},"seq":7}
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the Gateway protocol version this package speaks (minProtocol
// and maxProtocol of connect, "protocol" of hello-ok).
const Version = 4

// Frame types ("type" of a [Frame]).
const (
	TypeRequest  = "req"
	TypeResponse = "res"
	TypeEvent    = "event"
)

// Error codes seen from the real Gateway ("code" of an [ErrorShape]).
const (
	CodeInvalidRequest = "INVALID_REQUEST"
	CodeUnavailable    = "UNAVAILABLE"
)

// Event names the bridge consumes (docs/protocol-facts.md, Gateway events) or the handshake uses (docs/protocol-facts.md, Connect handshake).
const (
	EventConnectChallenge        = "connect.challenge"
	EventTick                    = "tick"
	EventSessionMessage          = "session.message"
	EventExecApprovalRequested   = "exec.approval.requested"
	EventExecApprovalResolved    = "exec.approval.resolved"
	EventPluginApprovalRequested = "plugin.approval.requested"
	EventPluginApprovalResolved  = "plugin.approval.resolved"
)

// WebSocket close codes used by OpenClaw (docs/protocol-facts.md, Gateway frames).
const (
	// ClosePolicyViolation (1008) follows a rejected connect or a challenge timeout.
	ClosePolicyViolation = 1008
	// CloseTickTimeout (4000) is used by the client when no frame arrived for
	// 2 × tickIntervalMs, or when a whole connect attempt took too long.
	CloseTickTimeout = 4000
)

// MaxPreConnectFrame is the largest frame a Gateway accepts before connect
// completes (64 KiB, OpenClaw docs).
const MaxPreConnectFrame = 64 << 10

// Frame is one Gateway WebSocket message. Which fields are set depends on
// Type: requests carry ID, Method and Params; responses ID, OK and Payload or
// Error; events Event, Payload and optionally Seq and StateVersion.
type Frame struct {
	Type         string          `json:"type"`
	ID           string          `json:"id,omitempty"`
	Method       string          `json:"method,omitempty"`
	Params       json.RawMessage `json:"params,omitempty"`
	OK           *bool           `json:"ok,omitempty"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	Error        *ErrorShape     `json:"error,omitempty"`
	Event        string          `json:"event,omitempty"`
	Seq          *int64          `json:"seq,omitempty"`
	StateVersion json.RawMessage `json:"stateVersion,omitempty"`
}

// ErrorShape is the "error" object of a failed response.
type ErrorShape struct {
	Code         string          `json:"code"`
	Message      string          `json:"message"`
	Details      json.RawMessage `json:"details,omitempty"`
	Retryable    *bool           `json:"retryable,omitempty"`
	RetryAfterMs *int64          `json:"retryAfterMs,omitempty"`
}

// RequestError is a failed Gateway response surfaced as a Go error. Its
// Error() is the Gateway's message alone, which is what `openclaw mcp serve`
// puts in an MCP tool error (docs/protocol-facts.md, mcp serve tools).
type RequestError struct {
	Method string
	ErrorShape
}

// Error returns the Gateway's message alone.
func (e *RequestError) Error() string { return e.Message }

// IsRetryable reports whether the Gateway marked the error retryable.
func (e *RequestError) IsRetryable() bool { return e.Retryable != nil && *e.Retryable }

// ErrMalformedFrame is wrapped by [Decode] for input that is not a valid frame.
var ErrMalformedFrame = errors.New("protocol: malformed frame")

// Decode parses one WebSocket text message and checks it the way the OpenClaw
// client does: a response needs a non-empty id and a boolean ok, an event a
// non-empty name, a request an id and a method, and seq must be ≥ 0.
// Errors wrap [ErrMalformedFrame] and say what is wrong.
func Decode(data []byte) (*Frame, error) {
	var f Frame
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedFrame, err)
	}
	switch f.Type {
	case TypeResponse:
		if f.ID == "" {
			return nil, fmt.Errorf("%w: response without id", ErrMalformedFrame)
		}
		if f.OK == nil {
			return nil, fmt.Errorf("%w: response %s without boolean ok", ErrMalformedFrame, f.ID)
		}
	case TypeEvent:
		if f.Event == "" {
			return nil, fmt.Errorf("%w: event without name", ErrMalformedFrame)
		}
		if f.Seq != nil && *f.Seq < 0 {
			return nil, fmt.Errorf("%w: event %s with negative seq", ErrMalformedFrame, f.Event)
		}
	case TypeRequest:
		if f.ID == "" || f.Method == "" {
			return nil, fmt.Errorf("%w: request without id or method", ErrMalformedFrame)
		}
	default:
		return nil, fmt.Errorf("%w: unknown type %q", ErrMalformedFrame, f.Type)
	}
	return &f, nil
}

// Request builds a request frame. params is marshalled with encoding/json;
// nil becomes {}.
func Request(id, method string, params any) (*Frame, error) {
	raw, err := marshalObject(params)
	if err != nil {
		return nil, fmt.Errorf("protocol: encoding %s params: %w", method, err)
	}
	return &Frame{Type: TypeRequest, ID: id, Method: method, Params: raw}, nil
}

// Response builds a successful response frame for request id.
func Response(id string, payload any) (*Frame, error) {
	raw, err := marshalObject(payload)
	if err != nil {
		return nil, fmt.Errorf("protocol: encoding response %s: %w", id, err)
	}
	ok := true
	return &Frame{Type: TypeResponse, ID: id, OK: &ok, Payload: raw}, nil
}

// ErrorResponse builds a failed response frame for request id.
func ErrorResponse(id string, e ErrorShape) *Frame {
	ok := false
	return &Frame{Type: TypeResponse, ID: id, OK: &ok, Error: &e}
}

// Event builds an event frame; seq < 0 leaves "seq" out (connect.challenge).
func Event(name string, payload any, seq int64) (*Frame, error) {
	raw, err := marshalObject(payload)
	if err != nil {
		return nil, fmt.Errorf("protocol: encoding event %s: %w", name, err)
	}
	f := &Frame{Type: TypeEvent, Event: name, Payload: raw}
	if seq >= 0 {
		f.Seq = &seq
	}
	return f, nil
}

func marshalObject(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(`{}`), nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(v)
}

// Challenge is the payload of connect.challenge, the Gateway's first frame.
type Challenge struct {
	Nonce        string   `json:"nonce"`
	TS           int64    `json:"ts"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// ClientInfo is connect's "client" object. ID must be one of the Gateway's
// known client ids (for example "cli"); Mode one of webchat, cli, ui,
// backend, node, worker, probe, test.
type ClientInfo struct {
	ID           string `json:"id"`
	DisplayName  string `json:"displayName,omitempty"`
	Version      string `json:"version"`
	Platform     string `json:"platform"`
	DeviceFamily string `json:"deviceFamily,omitempty"`
	Mode         string `json:"mode"`
}

// Auth is connect's "auth" object; exactly one field is normally set.
type Auth struct {
	Token          string `json:"token,omitempty"`
	Password       string `json:"password,omitempty"`
	BootstrapToken string `json:"bootstrapToken,omitempty"`
	DeviceToken    string `json:"deviceToken,omitempty"`
}

// DeviceProof is connect's "device" object (docs/protocol-facts.md, Device identity).
type DeviceProof struct {
	ID        string `json:"id"`
	PublicKey string `json:"publicKey"`
	Signature string `json:"signature"`
	SignedAt  int64  `json:"signedAt"`
	Nonce     string `json:"nonce"`
}

// ConnectParams are the params of the connect request, field for field as
// `openclaw mcp serve` sends them (fixture gateway-frames/02-connect.req.json).
type ConnectParams struct {
	MinProtocol int          `json:"minProtocol"`
	MaxProtocol int          `json:"maxProtocol"`
	Client      ClientInfo   `json:"client"`
	Caps        []string     `json:"caps"`
	Auth        *Auth        `json:"auth,omitempty"`
	Role        string       `json:"role"`
	Scopes      []string     `json:"scopes"`
	Device      *DeviceProof `json:"device,omitempty"`
}

// Scopes and roles used by operator clients.
const (
	RoleOperator          = "operator"
	ScopeOperatorRead     = "operator.read"
	ScopeOperatorWrite    = "operator.write"
	ScopeOperatorApproval = "operator.approvals"
	ScopeOperatorAdmin    = "operator.admin"
)
