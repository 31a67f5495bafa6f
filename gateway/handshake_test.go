package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/gateway"
	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// hello-ok must have the real Gateway's keys and types at every level the
// OpenClaw clients read, and the values that describe this Gateway.
func TestHelloOKShape(t *testing.T) {
	t.Parallel()
	real := fixture(t, "03-connect.res.hello-ok.json")
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok", TickInterval: 1234 * time.Millisecond})
	dev := newDevice(t)
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: dev, DisplayName: "OpenClaw MCP"})
	ours := decode(t, c.Hello())
	sameShape(t, "hello-ok", ours, obj(t, real["payload"], "payload"), "server", "features", "snapshot", "auth", "policy",
		"suspension", "stateVersion", "sessionDefaults", "updateSchedule", "attachments")

	auth := obj(t, ours["auth"], "auth")
	if auth["method"] != "token" || auth["role"] != "operator" || auth["deviceToken"] == "" {
		t.Errorf("auth = %v", auth)
	}
	policy := obj(t, ours["policy"], "policy")
	if policy["tickIntervalMs"] != 1234.0 || policy["maxPayload"] != 26214400.0 || policy["maxBufferedBytes"] != 52428800.0 {
		t.Errorf("policy = %v", policy)
	}
	methods, _ := obj(t, ours["features"], "features")["methods"].([]any)
	for _, m := range []string{"sessions.subscribe", "sessions.list", "sessions.describe", "sessions.get", "chat.message.get",
		"send", "chat.send", "chat.inject", "exec.approval.request", "exec.approval.resolve", "plugin.approval.request", "plugin.approval.resolve"} {
		found := false
		for _, x := range methods {
			found = found || x == m
		}
		if !found {
			t.Errorf("features.methods lacks %s", m)
		}
	}
	if ch := c.Challenge(); ch.Nonce == "" || ch.TS == 0 || len(ch.Capabilities) == 0 {
		t.Errorf("challenge = %+v", ch)
	}

	// The device token issued in hello-ok authenticates the same device.
	tok, _ := auth["deviceToken"].(string)
	c2 := dial(t, gw.URL, &gatewaytest.DialOptions{Device: dev, DeviceToken: tok})
	if m := obj(t, decode(t, c2.Hello())["auth"], "auth")["method"]; m != "device-token" {
		t.Errorf("auth.method with a device token = %v", m)
	}
}

func TestDeviceTokenAuth(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	dev := newDevice(t)
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: dev})
	tok := obj(t, decode(t, c.Hello())["auth"], "auth")["deviceToken"].(string)

	ctx := testCtx(t)
	// deviceToken needs the device proof signed over it.
	d2, err := dialRawAuth(ctx, gw.URL, &protocol.Auth{DeviceToken: tok}, dev)
	if err != nil {
		t.Fatalf("device token rejected: %v", err)
	}
	if m := obj(t, d2["auth"], "auth")["method"]; m != "device-token" {
		t.Errorf("auth.method = %v, want device-token", m)
	}
	if _, err := dialRawAuth(ctx, gw.URL, &protocol.Auth{DeviceToken: tok}, newDevice(t)); err == nil {
		t.Errorf("another device's token was accepted")
	}
}

// dialRawAuth connects with an explicit auth block (which gatewaytest.Dial
// does not expose for device tokens) and returns hello-ok.
func dialRawAuth(ctx context.Context, url string, auth *protocol.Auth, dev *protocol.DeviceIdentity) (map[string]any, error) {
	res, _, err := rawConnect(ctx, url, func(p *protocol.ConnectParams, ch protocol.Challenge) {
		p.Auth = auth
		p.Device = dev.Prove(protocol.SignedFields{ClientID: p.Client.ID, ClientMode: p.Client.Mode, Role: p.Role,
			Scopes: p.Scopes, SignedAtMs: ch.TS, Token: protocol.TokenForSignature(auth), Nonce: ch.Nonce,
			Platform: p.Client.Platform, DeviceFamily: p.Client.DeviceFamily})
	})
	if err != nil {
		return nil, err
	}
	if !*res.OK {
		return nil, &protocol.RequestError{Method: "connect", ErrorShape: *res.Error}
	}
	var m map[string]any
	return m, json.Unmarshal(res.Payload, &m)
}

// rawConnect performs a handshake by hand: mutate edits the default connect
// params (token "tok", client cli/cli, operator read/write/approvals). It
// returns the connect response and, when the Gateway then closes the socket,
// its close status (-1 when the socket stayed open).
func rawConnect(ctx context.Context, url string, mutate func(*protocol.ConnectParams, protocol.Challenge)) (*protocol.Frame, websocket.StatusCode, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, -1, err
	}
	defer ws.CloseNow()
	_, data, err := ws.Read(ctx)
	if err != nil {
		return nil, -1, err
	}
	f, err := protocol.Decode(data)
	if err != nil {
		return nil, -1, err
	}
	if f.Seq != nil {
		return nil, -1, errors.New("connect.challenge carries a seq")
	}
	var ch protocol.Challenge
	if err := json.Unmarshal(f.Payload, &ch); err != nil {
		return nil, -1, err
	}
	p := protocol.ConnectParams{MinProtocol: 4, MaxProtocol: 4,
		Client: protocol.ClientInfo{ID: "cli", DisplayName: "raw", Version: "1", Platform: "linux", DeviceFamily: "Linux", Mode: "cli"},
		Caps:   []string{"approvals"}, Auth: &protocol.Auth{Token: "tok"}, Role: "operator",
		Scopes: []string{protocol.ScopeOperatorRead, protocol.ScopeOperatorWrite, protocol.ScopeOperatorApproval}}
	mutate(&p, ch)
	req, _ := protocol.Request("1:raw", "connect", p)
	out, _ := json.Marshal(req)
	if err := ws.Write(ctx, websocket.MessageText, out); err != nil {
		return nil, -1, err
	}
	_, data, err = ws.Read(ctx)
	if err != nil {
		return nil, websocket.CloseStatus(err), err
	}
	res, err := protocol.Decode(data)
	if err != nil {
		return nil, -1, err
	}
	if *res.OK {
		return res, -1, nil
	}
	_, _, err = ws.Read(ctx)
	return res, websocket.CloseStatus(err), nil
}

// Every rejected connect answers res ok:false INVALID_REQUEST with OpenClaw's
// message and details, then closes with 1008.
func TestConnectRejections(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	dev := newDevice(t)
	sign := func(p *protocol.ConnectParams, ch protocol.Challenge, edit func(*protocol.SignedFields)) {
		f := protocol.SignedFields{ClientID: p.Client.ID, ClientMode: p.Client.Mode, Role: p.Role, Scopes: p.Scopes,
			SignedAtMs: ch.TS, Token: protocol.TokenForSignature(p.Auth), Nonce: ch.Nonce,
			Platform: p.Client.Platform, DeviceFamily: p.Client.DeviceFamily}
		if edit != nil {
			edit(&f)
		}
		p.Device = dev.Prove(f)
	}
	tests := []struct {
		name        string
		mutate      func(*protocol.ConnectParams, protocol.Challenge)
		wantMsg     string // prefix
		wantCode    string // details.code
		wantReason  string // details.reason
		wantDetails bool
	}{
		{"wrong token", func(p *protocol.ConnectParams, _ protocol.Challenge) { p.Auth.Token = "nope" },
			"unauthorized: gateway token mismatch (set gateway.remote.token to match gateway.auth.token)", gateway.DetailAuthTokenMismatch, "token_mismatch", true},
		{"no token", func(p *protocol.ConnectParams, _ protocol.Challenge) { p.Auth = nil },
			"unauthorized: gateway token missing (", gateway.DetailAuthTokenMissing, "token_missing", true},
		{"wrong token, non-cli client", func(p *protocol.ConnectParams, _ protocol.Challenge) {
			p.Auth.Token, p.Client.ID, p.Client.Mode = "nope", "gateway-client", "backend"
		}, "unauthorized: gateway token mismatch (provide gateway auth token)", gateway.DetailAuthTokenMismatch, "token_mismatch", true},
		{"bad signature", func(p *protocol.ConnectParams, ch protocol.Challenge) {
			sign(p, ch, func(f *protocol.SignedFields) { f.Scopes = []string{"operator.admin"} })
		}, "device signature invalid", "DEVICE_AUTH_SIGNATURE_INVALID", protocol.ReasonSignature, true},
		{"stale signature", func(p *protocol.ConnectParams, ch protocol.Challenge) {
			sign(p, ch, func(f *protocol.SignedFields) { f.SignedAtMs = ch.TS - 10*60*1000 })
		}, "device signature expired", "DEVICE_AUTH_SIGNATURE_EXPIRED", protocol.ReasonSignatureStale, true},
		{"wrong nonce", func(p *protocol.ConnectParams, ch protocol.Challenge) {
			sign(p, ch, func(f *protocol.SignedFields) { f.Nonce = "other" })
		}, "device nonce mismatch", "DEVICE_AUTH_NONCE_MISMATCH", protocol.ReasonNonceMismatch, true},
		{"device id mismatch", func(p *protocol.ConnectParams, ch protocol.Challenge) {
			sign(p, ch, nil)
			p.Device.ID = strings.Repeat("0", 64)
		}, "device identity mismatch", "DEVICE_AUTH_DEVICE_ID_MISMATCH", protocol.ReasonDeviceIDMismatch, true},
		{"unknown client id", func(p *protocol.ConnectParams, _ protocol.Challenge) { p.Client.ID = "my-bot" },
			`invalid connect params: unknown client.id "my-bot"`, "", "", false},
		{"unknown mode", func(p *protocol.ConnectParams, _ protocol.Challenge) { p.Client.Mode = "robot" },
			`invalid connect params: unknown client.mode "robot"`, "", "", false},
		{"unknown scope", func(p *protocol.ConnectParams, _ protocol.Challenge) { p.Scopes = []string{"root"} },
			`invalid connect params: unknown scope "root"`, "", "", false},
		{"unknown role", func(p *protocol.ConnectParams, _ protocol.Challenge) { p.Role = "god" },
			`invalid connect params: unknown role "god"`, "", "", false},
		{"protocol 3", func(p *protocol.ConnectParams, _ protocol.Challenge) { p.MinProtocol, p.MaxProtocol = 3, 3 },
			"protocol mismatch", "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, code, err := rawConnect(testCtx(t), gw.URL, tt.mutate)
			if err != nil {
				t.Fatal(err)
			}
			if *res.OK {
				t.Fatalf("connect accepted")
			}
			if res.Error.Code != protocol.CodeInvalidRequest || !strings.HasPrefix(res.Error.Message, tt.wantMsg) {
				t.Errorf("error = %s %q, want INVALID_REQUEST %q…", res.Error.Code, res.Error.Message, tt.wantMsg)
			}
			if code != protocol.ClosePolicyViolation {
				t.Errorf("close status = %d, want 1008", code)
			}
			if tt.wantDetails != (len(res.Error.Details) > 0) {
				t.Errorf("details = %s", res.Error.Details)
			}
			if tt.wantCode != "" {
				var d struct{ Code, Reason string }
				json.Unmarshal(res.Error.Details, &d)
				if d.Code != tt.wantCode || d.Reason != tt.wantReason {
					t.Errorf("details = %s, want code %s reason %s", res.Error.Details, tt.wantCode, tt.wantReason)
				}
			}
		})
	}
}

func TestConnectWithoutDeviceAndWithPassword(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok", Password: "pw"})
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok"})
	if a := obj(t, decode(t, c.Hello())["auth"], "auth"); a["deviceToken"] != nil || a["method"] != "token" {
		t.Errorf("auth without device = %v", a)
	}
	p := dial(t, gw.URL, &gatewaytest.DialOptions{Password: "pw"})
	if m := obj(t, decode(t, p.Hello())["auth"], "auth")["method"]; m != "password" {
		t.Errorf("auth.method = %v, want password", m)
	}
	_, err := gatewaytest.Dial(testCtx(t), gw.URL, &gatewaytest.DialOptions{Password: "wrong"})
	var re *protocol.RequestError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Message, "unauthorized: gateway password mismatch (") {
		t.Errorf("wrong password: %v", err)
	}
}

// Frames that break the protocol get an error response or a close with a
// clear reason; the Gateway keeps serving others.
func TestMalformedFrames(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	type result struct {
		res    *protocol.Frame
		status websocket.StatusCode
		reason string
	}
	run := func(t *testing.T, handshake bool, typ websocket.MessageType, frame []byte, expectClose bool) result {
		ctx := testCtx(t)
		ws, _, err := websocket.Dial(ctx, gw.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(1 << 20)
		if _, _, err := ws.Read(ctx); err != nil { // challenge
			t.Fatal(err)
		}
		if handshake {
			connect := `{"type":"req","id":"1","method":"connect","params":{"minProtocol":4,"maxProtocol":4,"client":{"id":"cli","version":"1","platform":"linux","mode":"cli"},"caps":[],"auth":{"token":"tok"},"role":"operator","scopes":["operator.read"]}}`
			ws.Write(ctx, websocket.MessageText, []byte(connect))
			if _, _, err := ws.Read(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := ws.Write(ctx, typ, frame); err != nil {
			t.Fatal(err)
		}
		var got result
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				var ce websocket.CloseError
				errors.As(err, &ce)
				got.status, got.reason = websocket.CloseStatus(err), ce.Reason
				return got
			}
			f, err := protocol.Decode(data)
			if err == nil && f.Type == protocol.TypeResponse {
				got.res, got.status = f, -1
				if !expectClose {
					return got
				}
			}
		}
	}
	tests := []struct {
		name       string
		handshake  bool
		typ        websocket.MessageType
		frame      string
		wantStatus websocket.StatusCode
		wantText   string // in the close reason or the error message
	}{
		{"not json before connect", false, websocket.MessageText, "hello", protocol.ClosePolicyViolation, "invalid handshake"},
		{"request before connect", false, websocket.MessageText, `{"type":"req","id":"1","method":"sessions.list","params":{}}`, protocol.ClosePolicyViolation, "first request must be connect"},
		{"oversized pre-connect frame", false, websocket.MessageText, `{"type":"req","id":"1","method":"connect","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`, websocket.StatusMessageTooBig, ""},
		{"binary frame", true, websocket.MessageBinary, "\x00\x01", websocket.StatusUnsupportedData, "binary frames are not supported"},
		{"not json after connect", true, websocket.MessageText, "{oops", protocol.ClosePolicyViolation, "invalid frame"},
		{"request without method", true, websocket.MessageText, `{"type":"req","id":"7"}`, -1, "invalid request frame"},
		{"unknown method", true, websocket.MessageText, `{"type":"req","id":"7","method":"nope.nope","params":{}}`, -1, "unknown method: nope.nope"},
		{"params of the wrong type", true, websocket.MessageText, `{"type":"req","id":"7","method":"sessions.list","params":{"limit":"ten"}}`, -1, "invalid sessions.list params"},
		{"second connect", true, websocket.MessageText, `{"type":"req","id":"7","method":"connect","params":{}}`, -1, "already connected"},
		{"missing scope", true, websocket.MessageText, `{"type":"req","id":"7","method":"chat.send","params":{}}`, -1, "missing scope: operator.write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := run(t, tt.handshake, tt.typ, []byte(tt.frame), tt.wantStatus != -1)
			if got.status != tt.wantStatus {
				t.Fatalf("close status = %d (%q), want %d", got.status, got.reason, tt.wantStatus)
			}
			text := got.reason
			if got.res != nil {
				if *got.res.OK || got.res.Error.Code != protocol.CodeInvalidRequest {
					t.Fatalf("response = %+v, want INVALID_REQUEST", got.res)
				}
				text = got.res.Error.Message
			}
			if !strings.Contains(text, tt.wantText) {
				t.Errorf("got %q, want it to contain %q", text, tt.wantText)
			}
		})
	}
	// The Gateway is still serving.
	dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok"})
}

func TestTicksAndSeq(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok", TickInterval: 10 * time.Millisecond})
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok"})
	for want := int64(1); want <= 3; want++ {
		f, p := nextEvent(t, c, protocol.EventTick)
		if f.Seq == nil || *f.Seq != want {
			t.Fatalf("tick seq = %v, want %d", f.Seq, want)
		}
		if _, ok := p["ts"].(float64); !ok {
			t.Fatalf("tick payload = %v", p)
		}
	}
}

func TestHandshakeTimeout(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok", HandshakeTimeout: 50 * time.Millisecond})
	ctx := testCtx(t)
	ws, _, err := websocket.Dial(ctx, gw.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	var last error
	for last == nil {
		_, _, last = ws.Read(ctx)
	}
	if st := websocket.CloseStatus(last); st != protocol.ClosePolicyViolation {
		t.Fatalf("close = %v, want 1008", last)
	}
}

func TestShutdownEvent(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok"})
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok"})
	go gw.Close(context.Background())
	nextEvent(t, c, "shutdown")
	<-c.Done()
	if st := c.CloseStatus(); st != websocket.StatusServiceRestart {
		t.Errorf("close status = %d, want 1012", st)
	}
}
