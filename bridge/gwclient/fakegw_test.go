package gwclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// The fake Gateway below speaks the protocol with frames taken from the real
// OpenClaw 2026.9.6 captures and checks our connect with
// protocol.VerifyConnect, so it stays pinned to real traffic.

const fixtureDir = "../../testdata/openclaw/"

func readFixture(t testing.TB, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, rel))
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	return data
}

// fixtureFrame decodes a single-frame fixture file.
func fixtureFrame(t testing.TB, name string) *protocol.Frame {
	t.Helper()
	f, err := protocol.Decode(readFixture(t, "gateway-frames/"+name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// fixturePair decodes a {req, res} fixture file.
func fixturePair(t testing.TB, name string) (req, res *protocol.Frame) {
	t.Helper()
	var pair struct{ Req, Res json.RawMessage }
	if err := json.Unmarshal(readFixture(t, "gateway-frames/"+name), &pair); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	req, err := protocol.Decode(pair.Req)
	if err != nil {
		t.Fatalf("%s req: %v", name, err)
	}
	res, err = protocol.Decode(pair.Res)
	if err != nil {
		t.Fatalf("%s res: %v", name, err)
	}
	return req, res
}

// helloPayload is the captured hello-ok payload, optionally with
// policy.tickIntervalMs replaced (0 keeps the captured 30000).
func helloPayload(t testing.TB, tickMs int) json.RawMessage {
	t.Helper()
	f := fixtureFrame(t, "03-connect.res.hello-ok.json")
	if tickMs == 0 {
		return f.Payload
	}
	var m map[string]any
	if err := json.Unmarshal(f.Payload, &m); err != nil {
		t.Fatal(err)
	}
	m["policy"].(map[string]any)["tickIntervalMs"] = tickMs
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// connectRecord is one connect request the fake received.
type connectRecord struct {
	Conn      int
	Raw       []byte // the frame as sent
	Frame     *protocol.Frame
	Params    protocol.ConnectParams
	Challenge protocol.Challenge
	Verify    string // protocol.VerifyConnect result; "" = valid or no device
}

// frameRecord is one non-connect request the fake received, with whether
// the subscribe response had already been written on that connection.
type frameRecord struct {
	Conn          int
	Raw           []byte
	Frame         *protocol.Frame
	AfterSubReply bool
}

type closeRecord struct {
	Conn   int
	Code   websocket.StatusCode
	Reason string
}

// behavior tunes one connection of the fake (by 1-based connection number).
type behavior struct {
	skipChallenge bool                 // never send connect.challenge
	connectError  *protocol.ErrorShape // reject connect with this error and close 1008
	holdSubscribe <-chan struct{}      // answer sessions.subscribe only after this closes
	tickMs        int                  // hello-ok policy.tickIntervalMs (0 = captured)
	afterReady    func(fc *fakeConn)   // run after the subscribe reply was written
}

type fakeGateway struct {
	t        testing.TB
	srv      *httptest.Server
	URL      string
	token    string // expected auth.token ("" = accept any)
	behave   func(n int) behavior
	handle   func(fc *fakeConn, f *protocol.Frame) bool // extra RPCs; true = handled
	subRes   *protocol.Frame
	listRes  *protocol.Frame
	sendRes  *protocol.Frame
	ctx      context.Context
	cancel   context.CancelFunc
	handlers sync.WaitGroup
	once     sync.Once

	mu       sync.Mutex
	conns    int
	connects []connectRecord
	frames   []frameRecord
	closes   []closeRecord
	notify   chan struct{} // closed and replaced on every record
}

type fakeConn struct {
	g          *fakeGateway
	n          int
	ws         *websocket.Conn
	mu         sync.Mutex
	subReplied bool
}

func newFakeGateway(t testing.TB, tls bool, behave func(n int) behavior) *fakeGateway {
	t.Helper()
	g := &fakeGateway{t: t, token: "octest-token-123", behave: behave, notify: make(chan struct{})}
	if g.behave == nil {
		g.behave = func(int) behavior { return behavior{} }
	}
	_, g.subRes = fixturePair(t, "rpc-sessions.subscribe.json")
	_, g.listRes = fixturePair(t, "rpc-sessions.list.json")
	_, g.sendRes = fixturePair(t, "rpc-send.json")
	g.ctx, g.cancel = context.WithCancel(context.Background())
	h := http.HandlerFunc(g.serve)
	g.srv = httptest.NewUnstartedServer(h)
	// Refused TLS handshakes are expected in the pinning tests.
	g.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tls {
		g.srv.StartTLS()
		g.URL = "wss" + strings.TrimPrefix(g.srv.URL, "https")
	} else {
		g.srv.Start()
		g.URL = "ws" + strings.TrimPrefix(g.srv.URL, "http")
	}
	t.Cleanup(g.close)
	return g
}

// close stops the fake and waits for its handlers; idempotent.
func (g *fakeGateway) close() {
	g.once.Do(func() {
		g.cancel()
		g.srv.Close()
		g.handlers.Wait()
	})
}

func (g *fakeGateway) record(f func()) {
	g.mu.Lock()
	f()
	close(g.notify)
	g.notify = make(chan struct{})
	g.mu.Unlock()
}

// waitFor blocks until cond (called under the lock) holds; it fails the
// test when the fake is torn down first or after a generous limit that only
// a hung test reaches.
func (g *fakeGateway) waitFor(what string, cond func() bool) {
	g.t.Helper()
	limit := time.After(30 * time.Second)
	for {
		g.mu.Lock()
		ok, ch := cond(), g.notify
		g.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-limit:
			g.t.Fatalf("fake gateway: gave up waiting for %s", what)
		}
	}
}

func (g *fakeGateway) connectsSnapshot() []connectRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]connectRecord(nil), g.connects...)
}

func (g *fakeGateway) framesSnapshot() []frameRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]frameRecord(nil), g.frames...)
}

func (g *fakeGateway) closesSnapshot() []closeRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]closeRecord(nil), g.closes...)
}

func (g *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	g.handlers.Add(1)
	defer g.handlers.Done()
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(protocol.MaxPreConnectFrame)
	var n int
	g.record(func() { g.conns++; n = g.conns })
	b := g.behave(n)
	fc := &fakeConn{g: g, n: n, ws: ws}
	ctx := g.ctx

	// Replay the captured challenge with a fresh nonce and a ts a few
	// seconds in the past, to prove the client signs the challenge ts and
	// not its own clock.
	var ch protocol.Challenge
	if err := json.Unmarshal(fixtureFrame(g.t, "01-connect.challenge.event.json").Payload, &ch); err != nil {
		g.t.Error(err)
		return
	}
	ch.Nonce = "nonce-" + strings.Repeat("x", n) // distinct per connection
	ch.TS = time.Now().UnixMilli() - 3000
	if !b.skipChallenge {
		ev, _ := protocol.Event(protocol.EventConnectChallenge, ch, -1)
		fc.send(ev)
	}

	// connect
	f, raw, err := fc.read(ctx)
	if err != nil {
		g.recordClose(n, err)
		return
	}
	rec := connectRecord{Conn: n, Raw: raw, Frame: f, Challenge: ch}
	if f.Method != "connect" {
		g.t.Errorf("conn %d: first request is %q, want connect", n, f.Method)
		return
	}
	if err := json.Unmarshal(f.Params, &rec.Params); err != nil {
		g.t.Errorf("conn %d: connect params: %v", n, err)
		return
	}
	if rec.Params.Device != nil {
		rec.Verify = protocol.VerifyConnect(&rec.Params, ch.Nonce, time.Now().UnixMilli())
	}
	g.record(func() { g.connects = append(g.connects, rec) })
	reject := b.connectError
	switch {
	case reject != nil:
	case rec.Verify != "":
		details, _ := json.Marshal(map[string]string{"code": "DEVICE_AUTH_INVALID", "reason": rec.Verify})
		reject = &protocol.ErrorShape{Code: protocol.CodeInvalidRequest, Message: "device signature invalid", Details: details}
	case g.token != "" && (rec.Params.Auth == nil || rec.Params.Auth.Token != g.token) &&
		(rec.Params.Auth == nil || rec.Params.Auth.Password != g.token):
		reject = &protocol.ErrorShape{Code: protocol.CodeInvalidRequest,
			Message: "unauthorized: gateway token mismatch (set gateway.remote.token to match gateway.auth.token)"}
	}
	if reject != nil {
		fc.send(protocol.ErrorResponse(f.ID, *reject))
		ws.Close(protocol.ClosePolicyViolation, "connect failed")
		return
	}
	res, _ := protocol.Response(f.ID, helloPayload(g.t, b.tickMs))
	fc.send(res)
	ws.SetReadLimit(64 << 20)

	for {
		f, raw, err := fc.read(ctx)
		if err != nil {
			g.recordClose(n, err)
			return
		}
		fc.mu.Lock()
		after := fc.subReplied
		fc.mu.Unlock()
		g.record(func() { g.frames = append(g.frames, frameRecord{Conn: n, Raw: raw, Frame: f, AfterSubReply: after}) })
		if f.Method == "sessions.subscribe" {
			id := f.ID
			g.handlers.Add(1)
			go func() {
				defer g.handlers.Done()
				if b.holdSubscribe != nil {
					select {
					case <-b.holdSubscribe:
					case <-ctx.Done():
						return
					}
				}
				fc.mu.Lock()
				fc.subReplied = true
				fc.mu.Unlock()
				fc.reply(id, g.subRes.Payload)
				if b.afterReady != nil {
					b.afterReady(fc)
				}
			}()
			continue
		}
		if g.handle != nil && g.handle(fc, f) {
			continue
		}
		switch f.Method {
		case "sessions.list":
			fc.reply(f.ID, g.listRes.Payload)
		case "send":
			fc.send(protocol.ErrorResponse(f.ID, *g.sendRes.Error))
		default:
			fc.send(protocol.ErrorResponse(f.ID, protocol.ErrorShape{Code: protocol.CodeInvalidRequest, Message: "unknown method: " + f.Method}))
		}
	}
}

// recordClose notes how the client ended connection n.
func (g *fakeGateway) recordClose(n int, err error) {
	rec := closeRecord{Conn: n, Code: -1, Reason: err.Error()}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		rec.Code, rec.Reason = ce.Code, ce.Reason
	}
	g.record(func() { g.closes = append(g.closes, rec) })
}

func (fc *fakeConn) read(ctx context.Context) (*protocol.Frame, []byte, error) {
	typ, data, err := fc.ws.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	if typ != websocket.MessageText {
		fc.g.t.Errorf("conn %d: client sent a binary message", fc.n)
	}
	f, err := protocol.Decode(data)
	if err != nil {
		fc.g.t.Errorf("conn %d: client sent a malformed frame: %v: %s", fc.n, err, data)
		return nil, nil, err
	}
	if f.Type != protocol.TypeRequest {
		fc.g.t.Errorf("conn %d: client sent a %q frame, want req", fc.n, f.Type)
	}
	return f, data, nil
}

func (fc *fakeConn) send(f *protocol.Frame) {
	data, err := json.Marshal(f)
	if err != nil {
		fc.g.t.Error(err)
		return
	}
	fc.sendRaw(websocket.MessageText, data)
}

func (fc *fakeConn) sendRaw(typ websocket.MessageType, data []byte) {
	_ = fc.ws.Write(fc.g.ctx, typ, data) // the client may be gone; tests check what it saw
}

func (fc *fakeConn) reply(id string, payload json.RawMessage) {
	res, err := protocol.Response(id, payload)
	if err != nil {
		fc.g.t.Error(err)
		return
	}
	fc.send(res)
}

// jsonEqual reports whether a and b encode the same JSON value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("jsonEqual: %v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("jsonEqual: %v: %s", err, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
