package gwclient_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// wsEntry is one line of a captured ws-frames.jsonl.
type wsEntry struct {
	Conn  int             `json:"conn"`
	Dir   string          `json:"dir"`
	Frame json.RawMessage `json:"frame"`
}

func loadCapture(t *testing.T, dir string) []wsEntry {
	t.Helper()
	var out []wsEntry
	sc := bufio.NewScanner(bytes.NewReader(readFixture(t, dir+"/ws-frames.jsonl")))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e wsEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Conn == 1 && e.Frame != nil {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplayCapturedTraffic plays the Gateway side of the first connection
// of each real capture, frame for frame, against our client, which issues
// the same requests the real bridge did. The fake checks each request's
// method, params and id number against the capture, rewrites the captured
// response ids to ours, and the client must return the captured payloads
// and errors and deliver the captured events in order.
func TestReplayCapturedTraffic(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"empty-gateway", "seeded", "approvals"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			script := loadCapture(t, dir)
			frames := make([]*protocol.Frame, len(script))
			for i, e := range script {
				f, err := protocol.Decode(e.Frame)
				if err != nil {
					t.Fatalf("capture line %d: %v", i, err)
				}
				frames[i] = f
			}
			var challenge protocol.Challenge
			if err := json.Unmarshal(frames[0].Payload, &challenge); err != nil || frames[0].Event != protocol.EventConnectChallenge {
				t.Fatalf("capture does not start with connect.challenge: %s", script[0].Frame)
			}

			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				wg.Add(1)
				defer wg.Done()
				ws, err := websocket.Accept(w, r, nil)
				if err != nil {
					return
				}
				defer ws.CloseNow()
				ws.SetReadLimit(64 << 20)
				ids := map[string]string{} // captured id → our id
				for i, e := range script {
					f := frames[i]
					if e.Dir == "gw->client" {
						out := []byte(e.Frame)
						if f.Type == protocol.TypeResponse {
							out = bytes.Replace(out, []byte(`"id":"`+f.ID+`"`), []byte(`"id":"`+ids[f.ID]+`"`), 1)
						}
						if err := ws.Write(ctx, websocket.MessageText, out); err != nil {
							return
						}
						continue
					}
					_, data, err := ws.Read(ctx)
					if err != nil {
						t.Errorf("line %d: client went away before sending %s: %v", i, f.Method, err)
						return
					}
					got, err := protocol.Decode(data)
					if err != nil {
						t.Errorf("line %d: %v", i, err)
						return
					}
					ids[f.ID] = got.ID
					if got.Method != f.Method || idNumber(t, got.ID) != idNumber(t, f.ID) {
						t.Errorf("line %d: client sent %s %s, capture has %s %s", i, got.Method, got.ID, f.Method, f.ID)
					}
					if f.Method == "connect" {
						var p protocol.ConnectParams
						if err := json.Unmarshal(got.Params, &p); err != nil {
							t.Error(err)
						} else if v := protocol.VerifyConnect(&p, challenge.Nonce, challenge.TS+1000); v != "" {
							t.Errorf("connect proof: %s", v)
						}
						continue
					}
					if !jsonEqual(t, got.Params, f.Params) {
						t.Errorf("line %d: %s params %s, capture has %s", i, f.Method, got.Params, f.Params)
					}
				}
				// Stay open until the client leaves.
				_, _, _ = ws.Read(ctx)
			}))
			t.Cleanup(func() { cancel(); srv.Close(); wg.Wait() })

			var mu sync.Mutex
			var events []protocol.Frame
			o := baseOptions(t, "ws"+strings.TrimPrefix(srv.URL, "http"))
			o.OnEvent = func(name string, payload json.RawMessage) {
				mu.Lock()
				events = append(events, protocol.Frame{Event: name, Payload: payload})
				mu.Unlock()
			}
			r := start(t, o)

			// Issue the bridge's requests (after connect and subscribe) in order.
			var wantEvents []*protocol.Frame
			for i, e := range script {
				f := frames[i]
				if e.Dir == "gw->client" && f.Type == protocol.TypeEvent && f.Event != protocol.EventConnectChallenge {
					wantEvents = append(wantEvents, f)
				}
				if e.Dir != "client->gw" || f.Method == "connect" || f.Method == "sessions.subscribe" {
					continue
				}
				var res *protocol.Frame
				for _, g := range frames[i+1:] {
					if g.Type == protocol.TypeResponse && g.ID == f.ID {
						res = g
						break
					}
				}
				payload, err := r.c.Request(context.Background(), f.Method, f.Params)
				switch {
				case res == nil:
					t.Fatalf("line %d: capture has no response", i)
				case *res.OK:
					if err != nil {
						t.Fatalf("line %d: %s: %v", i, f.Method, err)
					}
					if !jsonEqual(t, payload, res.Payload) {
						t.Errorf("line %d: %s payload differs from the capture", i, f.Method)
					}
				default:
					var re *protocol.RequestError
					if !errors.As(err, &re) || re.Message != res.Error.Message || re.Code != res.Error.Code {
						t.Errorf("line %d: %s error %v, capture has %+v", i, f.Method, err, res.Error)
					}
				}
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				mu.Lock()
				n := len(events)
				mu.Unlock()
				if n >= len(wantEvents) || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(events) != len(wantEvents) {
				t.Fatalf("got %d events, capture has %d", len(events), len(wantEvents))
			}
			for i, ev := range events {
				if ev.Event != wantEvents[i].Event || !jsonEqual(t, ev.Payload, wantEvents[i].Payload) {
					t.Errorf("event %d: got %s, capture has %s", i, ev.Event, wantEvents[i].Event)
				}
			}
			if !r.c.HasMethod("chat.message.get") {
				t.Error("HasMethod(chat.message.get) = false after the captured hello-ok")
			}
			r.c.Close()
			if _, err := r.c.Request(context.Background(), "sessions.list", nil); !errors.Is(err, gwclient.ErrClosed) {
				t.Errorf("Request after Close = %v, want ErrClosed", err)
			}
		})
	}
}
