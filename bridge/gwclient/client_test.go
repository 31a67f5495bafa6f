package gwclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

const testToken = "octest-token-123"

var idPattern = regexp.MustCompile(`^([0-9]+):[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// idNumber checks a request id's "<n>:<uuid-v4>" form and returns n.
func idNumber(t testing.TB, id string) int {
	t.Helper()
	m := idPattern.FindStringSubmatch(id)
	if m == nil {
		t.Fatalf("request id %q is not <n>:<uuid-v4>", id)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newIdentity(t testing.TB) *protocol.DeviceIdentity {
	t.Helper()
	id, err := protocol.NewDeviceIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// baseOptions are the options of `openclaw mcp serve` 2026.9.6 on Linux,
// with short backoffs.
func baseOptions(t testing.TB, url string) *gwclient.Options {
	return &gwclient.Options{
		URL:            url,
		Token:          testToken,
		Identity:       newIdentity(t),
		ClientVersion:  "2026.9.6",
		Platform:       "linux",
		DeviceFamily:   "Linux",
		InitialBackoff: 5 * time.Millisecond,
		MaxBackoff:     40 * time.Millisecond,
	}
}

type running struct {
	c    *gwclient.Client
	errc chan error
}

// start runs a client until the test ends.
func start(t testing.TB, opts *gwclient.Options) *running {
	t.Helper()
	r := &running{c: gwclient.New(opts), errc: make(chan error, 1)}
	go func() { r.errc <- r.c.Run(context.Background()) }()
	t.Cleanup(func() { r.c.Close() })
	return r
}

func (r *running) runErr(t testing.TB) error {
	t.Helper()
	select {
	case err := <-r.errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

func waitReady(t testing.TB, c *gwclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

// The connect frame must be byte-for-byte the captured one of the real
// `openclaw mcp serve`, except for the per-connection values: the uuid of
// the id and the device proof (our key, the fake's nonce and ts).
func TestConnectMatchesCapture(t *testing.T) {
	t.Parallel()
	capture := readFixture(t, "gateway-frames/02-connect.req.json")
	var want bytes.Buffer
	if err := json.Compact(&want, capture); err != nil {
		t.Fatal(err)
	}
	capFrame := fixtureFrame(t, "02-connect.req.json")
	var capParams protocol.ConnectParams
	if err := json.Unmarshal(capFrame.Params, &capParams); err != nil {
		t.Fatal(err)
	}

	g := newFakeGateway(t, false, nil)
	r := start(t, baseOptions(t, g.URL))
	waitReady(t, r.c)

	recs := g.connectsSnapshot()
	if len(recs) != 1 {
		t.Fatalf("got %d connects, want 1", len(recs))
	}
	rec := recs[0]
	if rec.Verify != "" {
		t.Fatalf("device proof rejected by protocol.VerifyConnect: %s", rec.Verify)
	}
	if got, want := rec.Params.Device.SignedAt, rec.Challenge.TS; got != want {
		t.Errorf("device.signedAt = %d, want the challenge ts %d", got, want)
	}
	if idNumber(t, rec.Frame.ID) != 1 {
		t.Errorf("connect id %q, want 1:<uuid>", rec.Frame.ID)
	}
	d, cd := rec.Params.Device, capParams.Device
	expect := want.String()
	for _, rp := range [][2]string{
		{capFrame.ID, rec.Frame.ID}, {cd.ID, d.ID}, {cd.PublicKey, d.PublicKey}, {cd.Signature, d.Signature},
		{cd.Nonce, d.Nonce}, {strconv.FormatInt(cd.SignedAt, 10), strconv.FormatInt(d.SignedAt, 10)},
	} {
		if !strings.Contains(expect, rp[0]) {
			t.Fatalf("capture lacks %q", rp[0])
		}
		expect = strings.ReplaceAll(expect, rp[0], rp[1])
	}
	if string(rec.Raw) != expect {
		t.Errorf("connect frame differs from the capture\n got: %s\nwant: %s", rec.Raw, expect)
	}

	// sessions.subscribe {} is the second request, before anything else.
	frames := g.framesSnapshot()
	if len(frames) == 0 || frames[0].Frame.Method != "sessions.subscribe" {
		t.Fatalf("first request after connect: %+v, want sessions.subscribe", frames)
	}
	subReq, _ := fixturePair(t, "rpc-sessions.subscribe.json")
	if idNumber(t, frames[0].Frame.ID) != 2 || string(frames[0].Frame.Params) != string(subReq.Params) {
		t.Errorf("subscribe frame %s, want id 2:<uuid> and params %s", frames[0].Raw, subReq.Params)
	}

	// What the client keeps from hello-ok.
	hello := fixtureFrame(t, "03-connect.res.hello-ok.json")
	var wantHello struct {
		Auth struct{ DeviceToken string }
	}
	if err := json.Unmarshal(hello.Payload, &wantHello); err != nil {
		t.Fatal(err)
	}
	h := r.c.Hello()
	if h == nil || h.DeviceToken != wantHello.Auth.DeviceToken || h.TickInterval != 30*time.Second ||
		h.Protocol != 4 || h.ServerVersion != "2026.9.6" || len(h.Methods) != 466 {
		t.Errorf("Hello() = %+v", h)
	}
	for method, want := range map[string]bool{"chat.message.get": true, "sessions.list": true, "chat.inject": false, "": false} {
		if got := r.c.HasMethod(method); got != want {
			t.Errorf("HasMethod(%q) = %v, want %v", method, got, want)
		}
	}
}

// Auth and device variants: each is accepted by the fake's VerifyConnect
// and sends exactly the auth object OpenClaw would.
func TestConnectAuthVariants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		token, pw  string
		identity   bool
		wantAuth   string // JSON of params.auth, "" = absent
		wantDevice bool
	}{
		{name: "token", token: testToken, identity: true, wantAuth: `{"token":"octest-token-123"}`, wantDevice: true},
		{name: "password", pw: testToken, identity: true, wantAuth: `{"password":"octest-token-123"}`, wantDevice: true},
		{name: "token wins over password", token: testToken, pw: "pw", identity: true, wantAuth: `{"token":"octest-token-123"}`, wantDevice: true},
		{name: "no identity", token: testToken, wantAuth: `{"token":"octest-token-123"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newFakeGateway(t, false, nil)
			o := baseOptions(t, g.URL)
			o.Token, o.Password = tc.token, tc.pw
			if !tc.identity {
				o.Identity = nil
			}
			r := start(t, o)
			waitReady(t, r.c)
			rec := g.connectsSnapshot()[0]
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(rec.Frame.Params, &raw); err != nil {
				t.Fatal(err)
			}
			if string(raw["auth"]) != tc.wantAuth {
				t.Errorf("auth = %s, want %s", raw["auth"], tc.wantAuth)
			}
			if _, has := raw["device"]; has != tc.wantDevice {
				t.Errorf("device present = %v, want %v", has, tc.wantDevice)
			}
			if rec.Verify != "" {
				t.Errorf("VerifyConnect: %s", rec.Verify)
			}
		})
	}
}

// Requests wait for sessions.subscribe to be answered; a caller may give up
// while waiting.
func TestReadinessGate(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g := newFakeGateway(t, false, func(int) behavior { return behavior{holdSubscribe: release} })
	r := start(t, baseOptions(t, g.URL))
	g.waitFor("sessions.subscribe", func() bool { return len(g.frames) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.c.Request(ctx, "sessions.list", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Request with a cancelled ctx while not ready: %v, want context.Canceled", err)
	}
	if r.c.HasMethod("chat.message.get") != true {
		t.Error("HasMethod is false after hello-ok")
	}

	type res struct {
		payload json.RawMessage
		err     error
	}
	done := make(chan res, 1)
	go func() {
		p, err := r.c.Request(context.Background(), "sessions.list", map[string]any{"limit": 50})
		done <- res{p, err}
	}()
	time.Sleep(20 * time.Millisecond) // give an eager client the chance to send early
	close(release)
	got := <-done
	if got.err != nil {
		t.Fatalf("Request after readiness: %v", got.err)
	}
	if !jsonEqual(t, got.payload, g.listRes.Payload) {
		t.Error("sessions.list payload differs from the replayed capture")
	}
	for _, f := range g.framesSnapshot() {
		if f.Frame.Method == "sessions.list" && !f.AfterSubReply {
			t.Error("sessions.list was sent before sessions.subscribe was answered")
		}
	}
}

// Fatal first connections, as `MCP server failed to start: <message>`.
func TestInitialConnectFatal(t *testing.T) {
	t.Parallel()
	// A port with no listener.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()

	for _, tc := range []struct {
		name    string
		url     func(g *fakeGateway) string
		token   string
		behave  func(int) behavior
		check   func(t *testing.T, err error)
		connect int // connects the fake must have seen
	}{
		{
			name: "bad token", token: "wrong",
			check: func(t *testing.T, err error) {
				var re *protocol.RequestError
				if !errors.As(err, &re) || re.Code != protocol.CodeInvalidRequest {
					t.Fatalf("err = %#v, want *protocol.RequestError", err)
				}
				if !strings.HasPrefix(err.Error(), "unauthorized: gateway token mismatch") {
					t.Errorf("message %q, want the Gateway's", err)
				}
			},
			connect: 1,
		},
		{
			name: "refused", url: func(*fakeGateway) string { return "ws://" + refused },
			check: func(t *testing.T, err error) {
				var de *gwclient.DialError
				if !errors.As(err, &de) {
					t.Fatalf("err = %#v, want *gwclient.DialError", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, refused) || !strings.Contains(msg, "connection refused") {
					t.Errorf("message %q should name %s and the refusal", msg, refused)
				}
			},
		},
		{
			name: "not retryable gateway error",
			behave: func(int) behavior {
				return behavior{connectError: &protocol.ErrorShape{Code: protocol.CodeInvalidRequest, Message: "pairing required"}}
			},
			check: func(t *testing.T, err error) {
				if err.Error() != "pairing required" {
					t.Errorf("err = %v", err)
				}
			},
			connect: 1,
		},
		{
			name: "bad scheme", url: func(*fakeGateway) string { return "http://127.0.0.1:1" },
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "ws:// or wss://") {
					t.Errorf("err = %v", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newFakeGateway(t, false, tc.behave)
			o := baseOptions(t, g.URL)
			if tc.url != nil {
				o.URL = tc.url(g)
			}
			if tc.token != "" {
				o.Token = tc.token
			}
			r := start(t, o)
			err := r.runErr(t)
			if err == nil {
				t.Fatal("Run returned nil, want a fatal error")
			}
			t.Logf("user sees: MCP server failed to start: %v", err)
			tc.check(t, err)
			// Waiters are released with the same error.
			if _, rerr := r.c.Request(context.Background(), "sessions.list", nil); rerr == nil || !strings.Contains(rerr.Error(), err.Error()) {
				t.Errorf("Request after fatal start: %v, want it to carry %q", rerr, err)
			}
			if got := len(g.connectsSnapshot()); got != tc.connect {
				t.Errorf("fake saw %d connects, want %d (no retry)", got, tc.connect)
			}
		})
	}
}

// Retryable first-connect failures are retried (docs/protocol-facts.md, Connect failures).
func TestInitialConnectRetried(t *testing.T) {
	t.Parallel()
	one := int64(1)
	yes := true
	// The challenge timeout also bounds the dial and the connect response:
	// it must fire only on a first connection without a challenge. Seconds
	// (200 ms fired on a loaded machine and added a third state change).
	for _, tc := range []struct {
		name             string
		challengeTimeout time.Duration
		behave           func(n int) behavior
	}{
		{"retryable error", 30 * time.Second, func(n int) behavior {
			if n == 1 {
				return behavior{connectError: &protocol.ErrorShape{Code: protocol.CodeUnavailable, Message: "gateway starting", Retryable: &yes, RetryAfterMs: &one}}
			}
			return behavior{}
		}},
		{"challenge timeout", 2 * time.Second, func(n int) behavior { return behavior{skipChallenge: n == 1} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newFakeGateway(t, false, tc.behave)
			o := baseOptions(t, g.URL)
			o.ChallengeTimeout = tc.challengeTimeout
			var mu sync.Mutex
			var states []gwclient.StateChange
			connected := make(chan struct{})
			o.OnStateChange = func(sc gwclient.StateChange) {
				mu.Lock()
				states = append(states, sc)
				mu.Unlock()
				if sc.State == gwclient.StateConnected {
					close(connected)
				}
			}
			r := start(t, o)
			waitReady(t, r.c)
			if _, err := r.c.Request(context.Background(), "sessions.list", nil); err != nil {
				t.Fatal(err)
			}
			<-connected
			mu.Lock()
			defer mu.Unlock()
			if len(states) != 2 || states[0].State != gwclient.StateReconnecting || states[0].Err == nil ||
				states[1].State != gwclient.StateConnected {
				t.Errorf("state changes %+v, want reconnecting (with the error) then connected", states)
			}
		})
	}
	t.Run("challenge timeout closes 1008", func(t *testing.T) {
		t.Parallel()
		g := newFakeGateway(t, false, func(n int) behavior { return behavior{skipChallenge: true} })
		o := baseOptions(t, g.URL)
		// It also bounds the first dial, which must not fail (a failed
		// first dial ends Run): seconds, not 100 ms.
		o.ChallengeTimeout = 2 * time.Second
		start(t, o)
		g.waitFor("two connections", func() bool { return g.conns >= 2 && len(g.closes) >= 1 })
		if c := g.closesSnapshot()[0]; c.Code != protocol.ClosePolicyViolation || c.Reason != "connect challenge timeout" {
			t.Errorf("close %+v, want 1008 connect challenge timeout", c)
		}
	})
}

// A connection that drops mid-call fails that call, then the client
// reconnects and serves later calls; ids restart at 1 on the new connection.
func TestDropMidCallReconnects(t *testing.T) {
	t.Parallel()
	g := newFakeGateway(t, false, nil)
	g.handle = func(fc *fakeConn, f *protocol.Frame) bool {
		if fc.n == 1 && f.Method == "sessions.list" {
			fc.ws.CloseNow() // abrupt: no close frame
			return true
		}
		return false
	}
	o := baseOptions(t, g.URL)
	var mu sync.Mutex
	var states []gwclient.State
	reconnected := make(chan struct{})
	o.OnStateChange = func(sc gwclient.StateChange) {
		mu.Lock()
		states = append(states, sc.State)
		n := len(states)
		mu.Unlock()
		if n == 4 {
			close(reconnected)
		}
	}
	r := start(t, o)
	waitReady(t, r.c)
	_, err := r.c.Request(context.Background(), "sessions.list", nil)
	if !errors.Is(err, gwclient.ErrConnectionLost) || !strings.Contains(err.Error(), "sessions.list") {
		t.Fatalf("call on a dropped connection: %v, want ErrConnectionLost naming the method", err)
	}
	<-reconnected // a call before that fails with ErrNotConnected (TestNotConnectedFailsFast)
	payload, err := r.c.Request(context.Background(), "sessions.list", nil)
	if err != nil {
		t.Fatalf("call after reconnect: %v", err)
	}
	if !jsonEqual(t, payload, g.listRes.Payload) {
		t.Error("payload after reconnect differs from the capture")
	}
	var second []frameRecord
	for _, f := range g.framesSnapshot() {
		if f.Conn == 2 {
			second = append(second, f)
		}
	}
	if len(second) != 2 || idNumber(t, second[0].Frame.ID) != 2 || idNumber(t, second[1].Frame.ID) != 3 {
		t.Errorf("requests on the second connection: %+v, want subscribe 2:… then list 3:…", second)
	}
	if recs := g.connectsSnapshot(); len(recs) != 2 || idNumber(t, recs[1].Frame.ID) != 1 {
		t.Errorf("connects %+v, want a second connect with id 1:…", recs)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []gwclient.State{gwclient.StateConnected, gwclient.StateDisconnected, gwclient.StateReconnecting, gwclient.StateConnected}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("states %v, want %v", states, want)
	}
}

// Once a connection was ready, a call made while the client reconnects
// fails at once with "gateway not connected" and is not sent, as
// OpenClaw's client does; before, it waited up to the request timeout
// (3 minutes by default) for the Gateway to come back. Here the request
// timeout is an hour, and the reconnect never becomes ready.
func TestNotConnectedFailsFast(t *testing.T) {
	t.Parallel()
	never := make(chan struct{})
	g := newFakeGateway(t, false, func(n int) behavior {
		if n == 1 {
			return behavior{}
		}
		return behavior{holdSubscribe: never} // a Gateway that never gets ready again
	})
	g.handle = func(fc *fakeConn, f *protocol.Frame) bool {
		if f.Method == "drop" {
			fc.ws.CloseNow()
			return true
		}
		return false
	}
	o := baseOptions(t, g.URL)
	o.RequestTimeout = time.Hour
	dropped := make(chan struct{})
	var once sync.Once
	o.OnStateChange = func(sc gwclient.StateChange) {
		if sc.State == gwclient.StateDisconnected {
			once.Do(func() { close(dropped) })
		}
	}
	r := start(t, o)
	waitReady(t, r.c)
	if _, err := r.c.Request(context.Background(), "drop", nil); !errors.Is(err, gwclient.ErrConnectionLost) {
		t.Fatalf("call on the dropped connection: %v, want ErrConnectionLost", err)
	}
	<-dropped
	sent := len(g.framesSnapshot())
	_, err := r.c.Request(context.Background(), "sessions.list", nil)
	if !errors.Is(err, gwclient.ErrNotConnected) || !strings.HasPrefix(err.Error(), "gateway not connected") ||
		!strings.Contains(err.Error(), "sessions.list") {
		t.Fatalf("call while reconnecting: %v, want ErrNotConnected naming sessions.list", err)
	}
	for _, f := range g.framesSnapshot()[sent:] {
		if f.Frame.Method == "sessions.list" {
			t.Errorf("the refused call was sent on connection %d", f.Conn)
		}
	}
	// WaitReady still waits (here until its context ends).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.c.WaitReady(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitReady while reconnecting: %v, want it to wait for its context", err)
	}
}

// Malformed frames are logged and skipped; events arrive in order with the
// captured payloads; a panicking handler does not stop the client.
func TestMalformedFramesAndEvents(t *testing.T) {
	t.Parallel()
	eventFiles := []string{"event-session.message.json", "event-sessions.changed.json",
		"event-exec.approval.requested.json", "event-plugin.approval.requested.json",
		"event-exec.approval.resolved.json", "event-plugin.approval.resolved.json"}
	var want []*protocol.Frame
	for _, name := range eventFiles {
		want = append(want, fixtureFrame(t, name))
	}
	g := newFakeGateway(t, false, func(int) behavior {
		return behavior{afterReady: func(fc *fakeConn) {
			junk := []string{`not json`, `{"type":"res","ok":true}`, `{"type":"res","id":"1"}`,
				`{"type":"event"}`, `{"type":"event","event":"x","seq":-1}`, `{"type":"nope"}`, `[]`,
				`{"type":"res","id":"99:unknown","ok":true,"payload":{}}`,
				`{"type":"req","id":"s1","method":"node.invoke","params":{}}`}
			for i, j := range junk {
				fc.sendRaw(websocket.MessageText, []byte(j))
				if i == 0 {
					fc.sendRaw(websocket.MessageBinary, []byte{0xff, 0x00, 0x01})
				}
			}
			for _, name := range eventFiles {
				fc.sendRaw(websocket.MessageText, readFixture(t, "gateway-frames/"+name))
			}
		}}
	})
	var logs syncBuffer
	o := baseOptions(t, g.URL)
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var mu sync.Mutex
	var got []protocol.Frame
	gotAll := make(chan struct{})
	o.OnEvent = func(name string, payload json.RawMessage) {
		if name == "health" { // not sent by this fake, but harmless
			return
		}
		mu.Lock()
		got = append(got, protocol.Frame{Event: name, Payload: payload})
		n := len(got)
		mu.Unlock()
		if n == len(eventFiles) {
			close(gotAll)
		}
		if n == 1 {
			panic("handler bug")
		}
	}
	r := start(t, o)
	select {
	case <-gotAll:
	case <-time.After(30 * time.Second):
		t.Fatal("events not delivered")
	}
	mu.Lock()
	for i, f := range got {
		if f.Event != want[i].Event || !jsonEqual(t, f.Payload, want[i].Payload) {
			t.Errorf("event %d = %s, want %s with the captured payload", i, f.Event, want[i].Event)
		}
	}
	mu.Unlock()
	if _, err := r.c.Request(context.Background(), "sessions.list", nil); err != nil {
		t.Fatalf("Request after junk: %v", err)
	}
	if n := len(g.connectsSnapshot()); n != 1 {
		t.Errorf("client reconnected (%d connects); junk must not break the connection", n)
	}
	text := logs.String()
	for _, wantLog := range []string{"skipping malformed gateway frame", "unknown type", "without boolean ok",
		"dropping gateway response to unknown request", "99:unknown", "gateway event handler failed", "handler bug"} {
		if !strings.Contains(text, wantLog) {
			t.Errorf("log lacks %q:\n%s", wantLog, text)
		}
	}
}

// Gateway error responses and request timeouts.
func TestRequestErrors(t *testing.T) {
	t.Parallel()
	g := newFakeGateway(t, false, nil)
	type held struct {
		fc *fakeConn
		id string
	}
	late := make(chan held, 1)
	g.handle = func(fc *fakeConn, f *protocol.Frame) bool {
		if f.Method == "hang" {
			late <- held{fc, f.ID}
			return true
		}
		return false
	}
	o := baseOptions(t, g.URL)
	// It must fire for hang but not for send or sessions.list: seconds, as
	// a loaded machine can hold a local round trip for more than 150 ms.
	o.RequestTimeout = 2 * time.Second
	r := start(t, o)
	waitReady(t, r.c)

	req, res := fixturePair(t, "rpc-send.json")
	_, err := r.c.Request(context.Background(), "send", req.Params)
	var re *protocol.RequestError
	if !errors.As(err, &re) || re.Method != "send" || re.Code != res.Error.Code || err.Error() != "unsupported channel: imessage" {
		t.Fatalf("send error = %#v, want the captured Gateway error", err)
	}

	_, err = r.c.Request(context.Background(), "hang", nil)
	if !errors.Is(err, gwclient.ErrRequestTimeout) || !strings.Contains(err.Error(), "gateway request timeout for hang") {
		t.Fatalf("hang = %v, want a request timeout naming the method", err)
	}
	// The late answer is dropped; the connection keeps serving.
	h := <-late
	h.fc.reply(h.id, json.RawMessage(`{"late":true}`))
	if _, err := r.c.Request(context.Background(), "sessions.list", nil); err != nil {
		t.Fatalf("Request after a timeout: %v", err)
	}
}

// With nothing arriving for more than 2 × tickIntervalMs and no request
// pending, the client closes with 4000 "tick timeout" and reconnects.
func TestTickTimeout(t *testing.T) {
	t.Parallel()
	g := newFakeGateway(t, false, func(int) behavior { return behavior{tickMs: 40} })
	r := start(t, baseOptions(t, g.URL))
	waitReady(t, r.c)
	g.waitFor("a close and a reconnect", func() bool { return len(g.closes) >= 1 && g.conns >= 2 })
	c := g.closesSnapshot()[0]
	if c.Conn != 1 || c.Code != protocol.CloseTickTimeout || c.Reason != "tick timeout" {
		t.Errorf("close = %+v, want conn 1 closed with 4000 tick timeout", c)
	}
}

// A pending request suspends the tick watchdog: a slow answer still arrives
// on the same connection.
func TestTickTimeoutWaitsForPending(t *testing.T) {
	t.Parallel()
	g := newFakeGateway(t, false, func(int) behavior { return behavior{tickMs: 30} })
	g.handle = func(fc *fakeConn, f *protocol.Frame) bool {
		if f.Method != "slow" {
			return false
		}
		id := f.ID
		g.handlers.Add(1)
		go func() {
			defer g.handlers.Done()
			select {
			case <-time.After(300 * time.Millisecond): // > 2 × 30 ms of silence
				fc.reply(id, json.RawMessage(`{"ok":true}`))
			case <-g.ctx.Done():
			}
		}()
		return true
	}
	r := start(t, baseOptions(t, g.URL))
	waitReady(t, r.c)
	// The watchdog may close an idle connection before the call is sent;
	// then the call goes out on the next one. What matters: once sent, the
	// silence while it is pending does not kill its connection.
	payload, err := r.c.Request(context.Background(), "slow", nil)
	if err != nil {
		t.Fatalf("slow request: %v", err)
	}
	if string(payload) != `{"ok":true}` {
		t.Errorf("payload %s", payload)
	}
}

// wss:// with a pinned self-signed certificate; wrong pins and unpinned
// self-signed certificates are refused.
func TestTLSPinning(t *testing.T) {
	t.Parallel()
	g := newFakeGateway(t, true, nil)
	sum := sha256.Sum256(g.srv.Certificate().Raw)
	plain := hex.EncodeToString(sum[:])
	var colon []string
	for i := 0; i < len(plain); i += 2 {
		colon = append(colon, strings.ToUpper(plain[i:i+2]))
	}
	wrong := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, url, pin string
		wantErr        string // "" = connects
		wantIs         error
	}{
		{name: "colon upper", pin: strings.Join(colon, ":")},
		{name: "plain lower", pin: plain},
		{name: "sha256 prefix", pin: "sha256:" + strings.ToUpper(plain)},
		{name: "wrong pin", pin: wrong, wantErr: "gateway tls fingerprint mismatch", wantIs: gwclient.ErrFingerprintMismatch},
		{name: "no pin, self-signed", wantErr: "certificate"},
		{name: "pin on ws://", url: "ws://" + strings.TrimPrefix(g.URL, "wss://"), pin: plain, wantErr: "requires wss://"},
		{name: "malformed pin", pin: "abc", wantErr: "not a SHA-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := baseOptions(t, g.URL)
			if tc.url != "" {
				o.URL = tc.url
			}
			o.TLSFingerprint = tc.pin
			r := start(t, o)
			if tc.wantErr == "" {
				waitReady(t, r.c)
				return
			}
			err := r.runErr(t)
			t.Logf("user sees: MCP server failed to start: %v", err)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Run = %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantIs)
			}
		})
	}
}

func TestRunTwiceAndAfterClose(t *testing.T) {
	t.Parallel()
	c := gwclient.New(&gwclient.Options{URL: "ws://127.0.0.1:1"})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := c.Run(context.Background()); !errors.Is(err, gwclient.ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Request(context.Background(), "x", nil); !errors.Is(err, gwclient.ErrClosed) {
		t.Errorf("Request after Close = %v, want ErrClosed", err)
	}

	g := newFakeGateway(t, false, nil)
	r := start(t, baseOptions(t, g.URL))
	waitReady(t, r.c)
	if err := r.c.Run(context.Background()); !errors.Is(err, gwclient.ErrAlreadyRunning) {
		t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

// Cancelling Run's ctx ends it with nil and a normal closure.
func TestRunContextCancel(t *testing.T) {
	t.Parallel()
	g := newFakeGateway(t, false, nil)
	c := gwclient.New(baseOptions(t, g.URL))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	waitReady(t, c)
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	g.waitFor("the close", func() bool { return len(g.closes) == 1 })
	if cl := g.closesSnapshot()[0]; cl.Code != websocket.StatusNormalClosure {
		t.Errorf("close %+v, want 1000", cl)
	}
	c.Close()
}

// After the first successful connection nothing is fatal: a rejected
// reconnect is retried with a doubling, capped backoff, and a retryable
// error's retryAfterMs raises the delay.
func TestBackoffAfterFirstConnect(t *testing.T) {
	t.Parallel()
	yes := true
	after := int64(60)
	g := newFakeGateway(t, false, func(n int) behavior {
		switch {
		case n == 1:
			return behavior{afterReady: func(fc *fakeConn) { fc.ws.CloseNow() }}
		case n <= 6:
			return behavior{connectError: &protocol.ErrorShape{Code: protocol.CodeInvalidRequest, Message: "unauthorized: gateway token mismatch"}}
		case n == 7:
			return behavior{connectError: &protocol.ErrorShape{Code: protocol.CodeUnavailable, Message: "busy", Retryable: &yes, RetryAfterMs: &after}}
		}
		return behavior{}
	})
	o := baseOptions(t, g.URL) // backoff 5 ms doubling, capped at 40 ms
	var mu sync.Mutex
	var delays []time.Duration
	var errs []string
	connected := 0
	done := make(chan struct{})
	o.OnStateChange = func(sc gwclient.StateChange) {
		mu.Lock()
		defer mu.Unlock()
		switch sc.State {
		case gwclient.StateReconnecting:
			delays = append(delays, sc.Delay)
			if sc.Err != nil {
				errs = append(errs, sc.Err.Error())
			} else {
				errs = append(errs, "")
			}
		case gwclient.StateConnected:
			if connected++; connected == 2 {
				close(done)
			}
		}
	}
	r := start(t, o)
	<-done
	if _, err := r.c.Request(context.Background(), "sessions.list", nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	ms := time.Millisecond
	want := []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 40 * ms, 40 * ms, 60 * ms}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Errorf("reconnect delays %v, want %v", delays, want)
	}
	if len(errs) == 7 && (errs[0] != "" || errs[1] != "unauthorized: gateway token mismatch" || errs[6] != "busy") {
		t.Errorf("reconnect reasons %q", errs)
	}
}
