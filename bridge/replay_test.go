package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/internal/jsonw"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/gateway/protocol"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/transport"
)

// The golden data in the repository's testdata/openclaw/ is real traffic of
// OpenClaw 2026.9.6 (`openclaw mcp serve` against a real Gateway).
// transcript.jsonl is the stdio side, ws-frames.jsonl the Gateway side of the
// same run.

const fixtures = "../testdata/openclaw"

func readJSONL(t testing.TB, path string) []json.RawMessage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			out = append(out, append(json.RawMessage(nil), line...))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// wsFrame is one line of ws-frames.jsonl.
type wsFrame struct {
	Conn  int            `json:"conn"`
	Dir   string         `json:"dir"`
	Frame protocol.Frame `json:"frame"`
}

// gatewayCall is one Gateway request the bridge made.
type gatewayCall struct {
	Method string
	Params json.RawMessage
}

// replayGateway is a GatewayConn that answers with a recorded real Gateway
// conversation (connection 1 of ws-frames.jsonl). Each request must match
// the next unanswered recorded request with the same method and params
// (send's idempotencyKey aside, checked to be a fresh uuid v4); before
// answering, it delivers to the bridge every event the real Gateway sent
// ahead of that response. Events after the last response are delivered by
// the test with deliverUntil.
type replayGateway struct {
	t       testing.TB
	methods map[string]bool

	mu        sync.Mutex
	b         *Bridge
	frames    []wsFrame
	used      []bool
	pos       int // next frame not yet delivered as an event
	delivered int // bridge-relevant events delivered so far
	calls     []gatewayCall
	idemKeys  map[string]bool
}

func newReplayGateway(t testing.TB, dir string) *replayGateway {
	t.Helper()
	g := &replayGateway{t: t, methods: map[string]bool{}, idemKeys: map[string]bool{}}
	helloDone := false
	for _, line := range readJSONL(t, filepath.Join(dir, "ws-frames.jsonl")) {
		var f wsFrame
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatal(err)
		}
		if f.Conn != 1 || (f.Dir != "client->gw" && f.Dir != "gw->client") {
			continue
		}
		if !helloDone {
			var hello struct {
				Type     string `json:"type"`
				Features struct {
					Methods []string `json:"methods"`
				} `json:"features"`
			}
			if f.Frame.Type == protocol.TypeResponse && json.Unmarshal(f.Frame.Payload, &hello) == nil && hello.Type == "hello-ok" {
				for _, m := range hello.Features.Methods {
					g.methods[m] = true
				}
				helloDone = true
			}
			continue
		}
		g.frames = append(g.frames, f)
	}
	if !helloDone {
		t.Fatalf("%s: no hello-ok on connection 1", dir)
	}
	g.used = make([]bool, len(g.frames))
	return g
}

func (g *replayGateway) HasMethod(m string) bool { return g.methods[m] }

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func (g *replayGateway) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	sent, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, gatewayCall{method, sent})
	got := canonical(g.t, sent)
	if method == "send" {
		m := got.(map[string]any)
		key, _ := m["idempotencyKey"].(string)
		if !uuidV4.MatchString(key) || g.idemKeys[key] {
			g.t.Errorf("send idempotencyKey %q is not a fresh uuid v4", key)
		}
		g.idemKeys[key] = true
		delete(m, "idempotencyKey")
	}
	for i, f := range g.frames {
		if g.used[i] || f.Dir != "client->gw" || f.Frame.Type != protocol.TypeRequest || f.Frame.Method != method {
			continue
		}
		want := canonical(g.t, f.Frame.Params)
		if method == "send" {
			delete(want.(map[string]any), "idempotencyKey")
		}
		if !reflect.DeepEqual(got, want) {
			continue
		}
		// The recorded request must also have been sent with the same key
		// order: compare the bytes, idempotency key aside.
		if method != "send" && !bytes.Equal(sent, jsonw.Compact(f.Frame.Params)) {
			g.t.Errorf("%s params key order: got %s, OpenClaw sent %s", method, sent, f.Frame.Params)
		}
		g.used[i] = true
		for j := i + 1; j < len(g.frames); j++ {
			r := g.frames[j]
			if r.Dir != "gw->client" || r.Frame.Type != protocol.TypeResponse || r.Frame.ID != f.Frame.ID {
				continue
			}
			g.deliverLocked(func() bool { return g.pos >= j })
			if r.Frame.OK != nil && *r.Frame.OK {
				return r.Frame.Payload, nil
			}
			return nil, &protocol.RequestError{Method: method, ErrorShape: *r.Frame.Error}
		}
		g.t.Errorf("recorded %s request %s has no response", method, f.Frame.ID)
		return nil, fmt.Errorf("no recorded response")
	}
	g.t.Errorf("unexpected Gateway call %s %s", method, sent)
	return nil, fmt.Errorf("replay: unexpected call %s", method)
}

func isBridgeEvent(name string) bool {
	switch name {
	case protocol.EventSessionMessage, protocol.EventExecApprovalRequested, protocol.EventExecApprovalResolved,
		protocol.EventPluginApprovalRequested, protocol.EventPluginApprovalResolved:
		return true
	}
	return false
}

// deliverLocked hands recorded events to the bridge, in order, until stop.
func (g *replayGateway) deliverLocked(stop func() bool) {
	for ; g.pos < len(g.frames) && !stop(); g.pos++ {
		f := g.frames[g.pos]
		if f.Dir == "gw->client" && f.Frame.Type == protocol.TypeEvent {
			g.b.HandleGatewayEvent(f.Frame.Event, f.Frame.Payload)
			if isBridgeEvent(f.Frame.Event) {
				g.delivered++
			}
		}
	}
}

// deliverUntil delivers recorded events until n bridge-relevant events
// (session.message and the approval events) have been delivered in total.
func (g *replayGateway) deliverUntil(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deliverLocked(func() bool { return g.delivered >= n })
	if g.delivered < n {
		g.t.Errorf("recording has only %d bridge events, want %d", g.delivered, n)
	}
}

func canonical(t testing.TB, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", raw, err)
	}
	return v
}

// rawClient is an MCP client that speaks JSON-RPC messages directly, so a
// test sees exactly what the bridge writes, custom notifications included.
type rawClient struct {
	t    testing.TB
	conn mcp.Connection
	in   chan jsonrpc.Message

	responses     map[string]*jsonrpc.Response
	notifications []*jsonrpc.Request
}

// startBridge serves b on an in-memory transport (go-sdk answers every
// request) and returns a raw client connected to it. The bridge and the
// client stop at the end of the test.
func startBridge(t testing.TB, b *Bridge) *rawClient { return startBridgeOn(t, b, false) }

// startBridgeOn is startBridge, over the stdio transport `mcp serve` uses
// (the local path answers what it takes) when stdio is true.
func startBridgeOn(t testing.TB, b *Bridge, stdio bool) *rawClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var st, ct mcp.Transport
	if stdio {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		st = transport.NewServeStdioTransport(inR, outW, nil)
		ct = &mcp.IOTransport{Reader: outR, Writer: inW}
	} else {
		st, ct = mcp.NewInMemoryTransports()
	}
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, st) }()
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, conn: conn, in: make(chan jsonrpc.Message, 64), responses: map[string]*jsonrpc.Response{}}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			m, err := conn.Read(ctx)
			if err != nil {
				close(c.in)
				return
			}
			c.in <- m
		}
	}()
	t.Cleanup(func() {
		// The client goes away (stdin EOF for stdio): Serve must return nil
		// on its own, before ctx ends.
		conn.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve after disconnect: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return after the client disconnected")
		}
		b.Close()
		cancel()
		for range c.in { // drain so the reader ends
		}
		<-readDone
	})
	return c
}

func (c *rawClient) send(raw []byte) {
	c.t.Helper()
	m, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		c.t.Fatalf("decoding %s: %v", raw, err)
	}
	if err := c.conn.Write(context.Background(), m); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func idKey(id jsonrpc.ID) string { return fmt.Sprint(id.Raw()) }

// pump receives one message, or fails the test after a generous deadline
// (a hang, not a timing assertion).
func (c *rawClient) pump() {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatal("connection closed")
		}
		switch m := m.(type) {
		case *jsonrpc.Response:
			c.responses[idKey(m.ID)] = m
		case *jsonrpc.Request:
			c.notifications = append(c.notifications, m)
		}
	case <-time.After(20 * time.Second):
		c.t.Fatal("no message from the bridge within 20s")
	}
}

func (c *rawClient) response(id any) json.RawMessage {
	c.t.Helper()
	key := fmt.Sprint(id)
	for c.responses[key] == nil {
		c.pump()
	}
	data, err := jsonrpc.EncodeMessage(c.responses[key])
	if err != nil {
		c.t.Fatal(err)
	}
	delete(c.responses, key)
	return data
}

func (c *rawClient) notification(i int) json.RawMessage {
	c.t.Helper()
	for len(c.notifications) <= i {
		c.pump()
	}
	data, err := jsonrpc.EncodeMessage(c.notifications[i])
	if err != nil {
		c.t.Fatal(err)
	}
	return data
}

// call sends a request and returns the decoded result of its response.
func (c *rawClient) call(id int, method string, params any) map[string]any {
	c.t.Helper()
	p, _ := json.Marshal(params)
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": json.RawMessage(p)})
	c.send(msg)
	res := canonical(c.t, c.response(float64(id))).(map[string]any)
	r, _ := res["result"].(map[string]any)
	if r == nil {
		c.t.Fatalf("%s: no result in %v", method, res)
	}
	return r
}

func (c *rawClient) initialize(mode string) {
	c.t.Helper()
	c.call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test-client", "version": "1.2.3"}})
	c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// normalize removes what must differ from OpenClaw: tool descriptions (ours
// are our own words) and serverInfo.version.
func normalize(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if r, ok := m["result"].(map[string]any); ok {
		if si, ok := r["serverInfo"].(map[string]any); ok {
			si["version"] = "<version>"
		}
		if tools, ok := r["tools"].([]any); ok {
			for _, t := range tools {
				if tm, ok := t.(map[string]any); ok {
					tm["description"] = ""
				}
			}
		}
	}
	return m
}

type transcriptEntry struct {
	Dir string          `json:"dir"`
	Msg json.RawMessage `json:"msg"`
}

type transcriptMsg struct {
	ID     any             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// shortenTimeouts lowers timeout_ms of an events_wait call whose recorded
// answer is a timeout, so the replay does not sleep for seconds; the input
// is otherwise unchanged.
func shortenTimeouts(raw json.RawMessage) json.RawMessage {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	p, _ := m["params"].(map[string]any)
	args, _ := p["arguments"].(map[string]any)
	if to, ok := args["timeout_ms"].(float64); ok && to > 100 {
		args["timeout_ms"] = 100
	}
	out, _ := json.Marshal(m)
	return out
}

// replayTranscript sends every client message of a recorded session to the
// bridge, in order, and checks every recorded answer and notification
// against the bridge's. hooks[n] runs before line n (1-based) is handled.
func replayTranscript(t *testing.T, dir string, c *rawClient, hooks map[int]func()) {
	entries := readJSONL(t, filepath.Join(dir, "transcript.jsonl"))
	timeouts := map[string]bool{}
	for _, line := range entries {
		var e transcriptEntry
		var m transcriptMsg
		_ = json.Unmarshal(line, &e)
		_ = json.Unmarshal(e.Msg, &m)
		if e.Dir == "in" && m.ID != nil && bytes.Contains(m.Result, []byte(`"text":"timeout"`)) {
			timeouts[fmt.Sprint(m.ID)] = true
		}
	}
	notes := 0
	for i, line := range entries {
		var e transcriptEntry
		var m transcriptMsg
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(e.Msg, &m); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprint(m.ID)
		if testing.Verbose() {
			t.Logf("line %d %s id=%s %s", i+1, e.Dir, id, m.Method)
		}
		if h := hooks[i+1]; h != nil {
			h()
		}
		switch {
		case e.Dir == "out":
			msg := e.Msg
			if m.ID != nil && timeouts[id] {
				msg = shortenTimeouts(msg)
			}
			c.send(msg)
		case m.ID != nil:
			got := normalize(canonical(t, c.response(m.ID)))
			want := normalize(canonical(t, e.Msg))
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("transcript line %d, response %s:\n got: %.1500s\nwant: %.1500s", i+1, id, gj, wj)
			}
		default:
			got := canonical(t, c.notification(notes))
			notes++
			if want := canonical(t, e.Msg); !reflect.DeepEqual(got, want) {
				t.Errorf("transcript line %d, notification:\n got: %v\nwant: %v", i+1, got, want)
			}
		}
	}
	// No notification beyond the recorded ones may be pending.
	for {
		select {
		case m, ok := <-c.in:
			if ok {
				if r, isReq := m.(*jsonrpc.Request); isReq {
					t.Errorf("unexpected notification %s %s", r.Method, r.Params)
				}
				continue
			}
		default:
		}
		return
	}
}

// waitQueued waits until the bridge has queued n events in total. The
// deadline only turns a hang into a failure.
func waitQueued(t testing.TB, b *Bridge, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b.queue.mu.Lock()
		got := b.queue.newest
		b.queue.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge queued %d events, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// allowAll is the real policy chain with no modules, which allows.
func allowAll() policies.Enforcer { return policies.NewChain(nil, nil) }

func TestGoldenTranscripts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		now   time.Time
		hooks func(g *replayGateway, b *Bridge) map[int]func()
	}{
		{name: "empty-gateway"},
		{
			name: "seeded",
			hooks: func(g *replayGateway, b *Bridge) map[int]func() {
				return map[int]func(){
					22: func() { g.deliverUntil(2) }, // chat.inject and chat.send messages
					26: func() { // "yes abcde" without senderIsOwner, after the permission request
						waitQueued(t, b, 3)
						g.deliverUntil(3)
					},
					43: func() { g.deliverUntil(4) }, // the live event that releases wait 20
				}
			},
		},
		{
			name: "approvals",
			// The clock of the capture, so the recorded approvals are open.
			now: time.UnixMilli(1795978840257),
			hooks: func(g *replayGateway, b *Bridge) map[int]func() {
				return map[int]func(){6: func() { g.deliverUntil(2) }} // the two requested approvals
			},
		},
	}
	for _, tt := range tests {
		// In memory go-sdk answers every request; over stdio, as `mcp
		// serve` runs, the local path answers the tools.
		for _, stdio := range []bool{false, true} {
			name := tt.name
			if stdio {
				name += "/stdio"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				goldenTranscript(t, tt.name, tt.now, tt.hooks, stdio)
			})
		}
	}
}

// goldenTranscript replays the captured session of fixture directory name
// against a bridge served in memory or over stdio.
func goldenTranscript(t *testing.T, name string, now time.Time, hooksOf func(g *replayGateway, b *Bridge) map[int]func(), stdio bool) {
	dir := filepath.Join(fixtures, name)
	g := newReplayGateway(t, dir)
	opts := &Options{Enforcer: allowAll()}
	if !now.IsZero() {
		opts.Now = func() time.Time { return now }
	}
	b := New(g, opts)
	g.b = b
	c := startBridgeOn(t, b, stdio)
	var hooks map[int]func()
	if hooksOf != nil {
		hooks = hooksOf(g, b)
	}
	replayTranscript(t, dir, c, hooks)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, used := range g.used {
		f := g.frames[i]
		// sessions.subscribe belongs to the Gateway client, not the bridge.
		if !used && f.Dir == "client->gw" && f.Frame.Type == protocol.TypeRequest && f.Frame.Method != "sessions.subscribe" {
			t.Errorf("the bridge never made the recorded call %s %s", f.Frame.Method, f.Frame.Params)
		}
	}
}
