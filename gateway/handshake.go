package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// ClientIDs is the closed set of connect client.id values the Gateway
// accepts (OpenClaw 2026.9.6; docs/protocol-facts.md, Connect handshake).
var ClientIDs = []string{
	"openclaw-control-ui", "openclaw-browser-copilot", "openclaw-tui", "openclaw-macos", "openclaw-linux",
	"openclaw-ios", "openclaw-watchos", "openclaw-android", "openclaw-worker", "openclaw-probe",
	"webchat-ui", "webchat", "cli", "gateway-client", "node-host", "test", "fingerprint",
}

// ClientModes is the set of connect client.mode values.
var ClientModes = []string{"webchat", "cli", "ui", "backend", "node", "worker", "probe", "test"}

// Roles and scopes a connect may ask for.
var (
	roles       = []string{protocol.RoleOperator, "node"}
	knownScopes = []string{protocol.ScopeOperatorRead, protocol.ScopeOperatorWrite, protocol.ScopeOperatorApproval,
		protocol.ScopeOperatorAdmin, "operator.pairing", "operator.talk.secrets"}
)

// Details codes of connect failures, as OpenClaw reports them in
// error.details.code.
const (
	DetailAuthTokenMissing     = "AUTH_TOKEN_MISSING"
	DetailAuthTokenMismatch    = "AUTH_TOKEN_MISMATCH"
	DetailAuthPasswordMismatch = "AUTH_PASSWORD_MISMATCH"
	DetailAuthPasswordMissing  = "AUTH_PASSWORD_MISSING"
)

// deviceFailure maps a protocol.VerifyConnect reason to OpenClaw's message
// and details.code.
var deviceFailure = map[string][2]string{
	protocol.ReasonNonceMissing:     {"device nonce required", "DEVICE_AUTH_NONCE_REQUIRED"},
	protocol.ReasonNonceMismatch:    {"device nonce mismatch", "DEVICE_AUTH_NONCE_MISMATCH"},
	protocol.ReasonSignature:        {"device signature invalid", "DEVICE_AUTH_SIGNATURE_INVALID"},
	protocol.ReasonSignatureStale:   {"device signature expired", "DEVICE_AUTH_SIGNATURE_EXPIRED"},
	protocol.ReasonDeviceIDMismatch: {"device identity mismatch", "DEVICE_AUTH_DEVICE_ID_MISMATCH"},
	protocol.ReasonDevicePublicKey:  {"device public key invalid", "DEVICE_AUTH_PUBLIC_KEY_INVALID"},
}

// handshake reads the connect request and answers hello-ok, or answers the
// failure and starts a 1008 close. It reports whether the connection is
// ready.
func (c *conn) handshake(ctx context.Context) bool {
	timer := time.AfterFunc(c.srv.opts.HandshakeTimeout, func() {
		if !c.isReady() {
			c.closeWith(protocol.ClosePolicyViolation, "handshake timeout")
		}
	})
	defer timer.Stop()
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		c.logClose(err)
		return false
	}
	if typ != websocket.MessageText {
		c.closeWith(websocket.StatusUnsupportedData, "binary frames are not supported")
		return false
	}
	f, err := protocol.Decode(data)
	if err != nil {
		c.closeWith(protocol.ClosePolicyViolation, "invalid handshake: "+err.Error())
		return false
	}
	if f.Type != protocol.TypeRequest || f.Method != "connect" {
		if f.Type == protocol.TypeRequest {
			c.respondErr(f.ID, invalid("invalid handshake: first request must be connect"))
		}
		c.closeWith(protocol.ClosePolicyViolation, "invalid handshake: first request must be connect")
		return false
	}
	hello, fail := c.connect(f.Params)
	if fail != nil {
		c.respondErr(f.ID, fail)
		c.closeWith(protocol.ClosePolicyViolation, fail.Message)
		c.srv.opts.Logger.Info("gateway: connect rejected", "conn", c.id, "reason", fail.Message)
		return false
	}
	c.ready.Store(true)
	c.respond(f.ID, hello)
	c.srv.opts.Logger.Info("gateway: client connected", "conn", c.id, "client", c.params.Client.ID,
		"name", c.params.Client.DisplayName, "device", c.deviceID)
	return true
}

func invalid(msg string) *protocol.ErrorShape {
	return &protocol.ErrorShape{Code: protocol.CodeInvalidRequest, Message: msg}
}

func invalidDetails(msg string, details any) *protocol.ErrorShape {
	raw, _ := json.Marshal(details)
	return &protocol.ErrorShape{Code: protocol.CodeInvalidRequest, Message: msg, Details: raw}
}

// connect validates the connect params, authenticates and verifies the
// device proof, in that order, and builds hello-ok.
func (c *conn) connect(raw json.RawMessage) (object, *protocol.ErrorShape) {
	var p protocol.ConnectParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, invalid("invalid connect params: " + err.Error())
	}
	if p.MinProtocol > protocol.Version || p.MaxProtocol < protocol.Version {
		return nil, invalidDetails("protocol mismatch", object{{"expectedProtocol", protocol.Version},
			{"minProtocol", p.MinProtocol}, {"maxProtocol", p.MaxProtocol}})
	}
	if !slices.Contains(ClientIDs, p.Client.ID) {
		return nil, invalid(fmt.Sprintf("invalid connect params: unknown client.id %q", p.Client.ID))
	}
	if !slices.Contains(ClientModes, p.Client.Mode) {
		return nil, invalid(fmt.Sprintf("invalid connect params: unknown client.mode %q", p.Client.Mode))
	}
	if p.Role == "" {
		p.Role = protocol.RoleOperator
	}
	if !slices.Contains(roles, p.Role) {
		return nil, invalid(fmt.Sprintf("invalid connect params: unknown role %q", p.Role))
	}
	for _, sc := range p.Scopes {
		if !slices.Contains(knownScopes, sc) {
			return nil, invalid(fmt.Sprintf("invalid connect params: unknown scope %q", sc))
		}
	}
	method, fail := c.authenticate(&p)
	if fail != nil {
		return nil, fail
	}
	now := c.srv.nowMs()
	if p.Device != nil {
		if reason := protocol.VerifyConnect(&p, c.nonce, now); reason != "" {
			f := deviceFailure[reason]
			return nil, invalidDetails(f[0], object{{"code", f[1]}, {"reason", reason}})
		}
		c.deviceID = p.Device.ID
	}
	c.params = &p
	c.scopes = map[string]bool{}
	for _, sc := range p.Scopes {
		c.scopes[sc] = true
	}
	c.caps = map[string]bool{}
	for _, cp := range p.Caps {
		c.caps[cp] = true
	}
	scopes := p.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	auth := object{{"method", method}, {"role", p.Role}, {"scopes", scopes}, {"recoveryScope", randomToken(32)}}
	if c.deviceID != "" {
		auth = auth.set("recoveryMigrationAllowed", true).
			set("deviceToken", c.srv.deviceToken(c.deviceID)).set("issuedAtMs", now)
	}
	s := c.srv
	hello := object{{"type", "hello-ok"}, {"protocol", protocol.Version},
		{"server", object{{"version", s.opts.ServerVersion}, {"buildId", "openclaw-go-local-gateway"},
			{"bootId", s.bootID}, {"controlUiBuildSource", "none"}, {"connId", c.id}}},
		{"features", object{{"methods", methodNames()}, {"events", eventNames}, {"capabilities", []string{}}}},
		{"snapshot", object{
			{"suspension", object{{"phase", "accepting"}}},
			{"presence", []any{}},
			{"health", object{{"ok", true}, {"ts", now}}},
			{"stateVersion", object{{"presence", 0}, {"health", 0}}},
			{"uptimeMs", now - s.start.UnixMilli()},
			{"appliedConfigHash", ""},
			{"sessionDefaults", object{{"defaultAgentId", "main"}, {"modelConfigured", false}, {"ownership", "sole"},
				{"selectionRequired", false}, {"mainKey", "main"}, {"mainSessionKey", "agent:main:main"}, {"scope", "per-sender"}}},
			{"updateSchedule", object{{"channel", "stable"}, {"autoEnabled", false}}},
		}},
		{"controlUiWidgetKinds", []any{}}, {"controlUiLinkReaders", []any{}}, {"pluginSurfaceUrls", object{}},
		{"auth", auth},
		{"policy", object{{"maxPayload", s.opts.MaxPayload}, {"maxBufferedBytes", s.opts.MaxBufferedBytes},
			{"tickIntervalMs", s.opts.TickInterval.Milliseconds()},
			{"attachments", object{{"maxBytes", 19464192}, {"maxImageBytes", 6291456}}},
			{"allowedSessionVisibilities", []string{"shared", "read-only", "suggest", "draft"}},
			{"hasMultipleSessionSharingIdentities", false}}},
	}
	return hello, nil
}

// authenticate checks connect auth against the shared token, the password
// and the device tokens this Gateway issued, and returns the auth method.
// Failures carry OpenClaw's messages ("unauthorized: gateway token mismatch
// (…)") and details {code, reason}.
func (c *conn) authenticate(p *protocol.ConnectParams) (string, *protocol.ErrorShape) {
	s := c.srv
	a := p.Auth
	if a == nil {
		a = &protocol.Auth{}
	}
	tokenHint, passwordHint := authHints(p.Client)
	fail := func(msg, code, reason string) (string, *protocol.ErrorShape) {
		return "", invalidDetails("unauthorized: "+msg, object{{"code", code}, {"reason", reason}})
	}
	switch {
	case a.Token != "":
		if checkSecret(a.Token, s.token) {
			return "token", nil
		}
		if s.token == "" {
			return fail("gateway token not configured on gateway (set gateway.auth.token)", DetailAuthTokenMismatch, "token_missing_config")
		}
		return fail("gateway token mismatch ("+tokenHint+")", DetailAuthTokenMismatch, "token_mismatch")
	case a.Password != "":
		if checkSecret(a.Password, s.opts.Password) {
			return "password", nil
		}
		if s.opts.Password == "" {
			return fail("gateway password not configured on gateway (set gateway.auth.password)", DetailAuthPasswordMismatch, "password_missing_config")
		}
		return fail("gateway password mismatch ("+passwordHint+")", DetailAuthPasswordMismatch, "password_mismatch")
	case a.DeviceToken != "" && p.Device != nil:
		s.mu.Lock()
		want := s.deviceTokens[p.Device.ID]
		s.mu.Unlock()
		if checkSecret(a.DeviceToken, want) {
			return "device-token", nil
		}
		return fail("device token mismatch (re-pair the device)", "AUTH_DEVICE_TOKEN_MISMATCH", "device_token_mismatch")
	case s.token == "" && s.opts.Password != "":
		return fail("gateway password missing ("+passwordHint+")", DetailAuthPasswordMissing, "password_missing")
	default:
		return fail("gateway token missing ("+tokenHint+")", DetailAuthTokenMissing, "token_missing")
	}
}

// authHints returns the advice OpenClaw appends to auth failures, which
// depends on the kind of client.
func authHints(ci protocol.ClientInfo) (token, password string) {
	switch {
	case ci.ID == "cli" || ci.Mode == "cli":
		return "set gateway.remote.token to match gateway.auth.token", "set gateway.remote.password to match gateway.auth.password"
	case ci.ID == "openclaw-control-ui" || strings.HasPrefix(ci.ID, "webchat") || ci.Mode == "webchat":
		return "open the dashboard URL and paste the token in Control UI settings", "enter the password in Control UI settings"
	default:
		return "provide gateway auth token", "provide gateway auth password"
	}
}

// deviceToken returns the device token issued to a device id, issuing one
// on first use. Device tokens live in memory: a restart re-issues them.
func (s *Server) deviceToken(deviceID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.deviceTokens[deviceID]
	if !ok {
		t = randomToken(32)
		s.deviceTokens[deviceID] = t
	}
	return t
}

// hasScope reports whether the connection was granted scope; operator.admin
// implies every scope and operator.write implies operator.read.
func (c *conn) hasScope(scope string) bool {
	if c.scopes[protocol.ScopeOperatorAdmin] || c.scopes[scope] {
		return true
	}
	return scope == protocol.ScopeOperatorRead && c.scopes[protocol.ScopeOperatorWrite]
}
