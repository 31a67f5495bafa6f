package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openclaw-go/openclaw/gateway"
	"github.com/openclaw-go/openclaw/gateway/gatewaytest"
	"github.com/openclaw-go/openclaw/gateway/protocol"
)

func openState(t *testing.T, dir string) *gateway.Server {
	t.Helper()
	srv, err := gateway.New(&gateway.Options{Token: "tok", StateDir: dir})
	if err != nil {
		t.Fatalf("opening state %s: %v", dir, err)
	}
	return srv
}

func transcriptIDs(t *testing.T, gw *gatewaytest.Gateway, key string) []string {
	t.Helper()
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
	var ids []string
	for _, m := range request(t, c, "sessions.get", map[string]any{"key": key})["messages"].([]any) {
		ids = append(ids, obj(t, obj(t, m, "m")["__openclaw"], "oc")["id"].(string))
	}
	return ids
}

// A restart loses nothing: sessions, routes, transcripts and updatedAt come
// back from the state dir.
func TestRestartKeepsSessions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testCtx(t)
	srv := openState(t, dir)
	if _, err := srv.ApplySeed(ctx, gateway.DemoSeed()); err != nil {
		t.Fatal(err)
	}
	res, err := srv.Inject(ctx, gateway.InjectRequest{SessionKey: "agent:main:new", Text: "hello", DisplayName: "New chat",
		Route: &gateway.Route{Channel: "telegram", To: "777"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close(ctx)

	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok", StateDir: dir})
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok"})
	list := request(t, c, "sessions.list", map[string]any{"includeDerivedTitles": true, "includeLastMessage": true})
	rows := rowsByKey(t, list)
	if len(rows) != 4 {
		t.Fatalf("after restart: %d sessions, want 4", len(rows))
	}
	nw := rows["agent:main:new"]
	if nw["lastTo"] != "777" || nw["displayName"] != "New chat" || nw["lastMessagePreview"] != "hello" ||
		list["sessions"].([]any)[0].(map[string]any)["key"] != "agent:main:new" {
		t.Errorf("new session after restart = %v", nw)
	}
	if got := transcriptIDs(t, gw, "agent:main:new"); len(got) != 1 || got[0] != res.MessageID {
		t.Errorf("new transcript = %v", got)
	}
	if got := transcriptIDs(t, gw, "agent:main:main"); fmt.Sprint(got) != "[msg-1 msg-attachment msg-inline-img]" {
		t.Errorf("seeded transcript = %v", got)
	}
	// Seeding again is idempotent.
	sr, err := gw.ApplySeed(ctx, gateway.DemoSeed())
	if err != nil || sr.Messages != 0 || sr.Skipped != 5 {
		t.Errorf("re-seed = %+v, %v", sr, err)
	}
}

// A crash mid-append leaves a torn last line; loading cuts it and later
// appends land on a clean line.
func TestTornTranscriptTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testCtx(t)
	srv := openState(t, dir)
	if _, err := srv.ApplySeed(ctx, gateway.DemoSeed()); err != nil {
		t.Fatal(err)
	}
	srv.Close(ctx)
	path := filepath.Join(dir, "transcripts", "agent%3Amain%3Atg-dm.jsonl")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"role":"user","content":"half a mess`)
	f.Close()

	srv = openState(t, dir)
	if _, err := srv.Inject(ctx, gateway.InjectRequest{SessionKey: "agent:main:tg-dm", Text: "after the crash"}); err != nil {
		t.Fatal(err)
	}
	srv.Close(ctx)
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok", StateDir: dir})
	if got := transcriptIDs(t, gw, "agent:main:tg-dm"); len(got) != 2 || got[0] != "tg-1" {
		t.Errorf("transcript after torn tail = %v", got)
	}

	// Corruption in the middle is an error naming the file, not a silent loss.
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append([]byte("garbage\n"), data...), 0o600)
	if _, err := gateway.New(&gateway.Options{StateDir: dir}); err == nil {
		t.Errorf("a corrupt transcript line was accepted")
	}
}

// Many connections and concurrent injectors: every subscriber sees every
// message, with seq counting up without gaps, in one global order.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.StartSeeded(t)
	const clients, writers, perWriter = 6, 4, 25
	var subs []*gatewaytest.Client
	for range clients {
		c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
		request(t, c, "sessions.subscribe", nil)
		subs = append(subs, c)
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := gatewaytest.Dial(ctx, gw.URL, &gatewaytest.DialOptions{Token: gw.Token})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for i := range perWriter {
				if w%2 == 0 {
					_, err = c.Request(ctx, "chat.inject", map[string]any{"sessionKey": "agent:main:main", "message": fmt.Sprintf("w%d-%d", w, i)})
				} else {
					_, err = gw.Inject(ctx, gateway.InjectRequest{SessionKey: "agent:main:tg-dm", Text: fmt.Sprintf("w%d-%d", w, i)})
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var first []string
	for i, c := range subs {
		var order []string
		for n := int64(1); n <= writers*perWriter; n++ {
			f, p := nextEvent(t, c, protocol.EventSessionMessage)
			if *f.Seq != n {
				t.Fatalf("client %d: seq %d, want %d", i, *f.Seq, n)
			}
			order = append(order, p["messageId"].(string))
		}
		if i == 0 {
			first = order
		} else if fmt.Sprint(order) != fmt.Sprint(first) {
			t.Fatalf("client %d saw another order than client 0", i)
		}
	}
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	gw := gatewaytest.Start(t, &gateway.Options{Token: "tok", StateDir: t.TempDir()})
	ctx := testCtx(t)
	bad, _ := gateway.NewAdminClient(gw.URL, "wrong", nil)
	_, err := bad.Inject(ctx, gateway.InjectRequest{SessionKey: "k", Text: "x"})
	var ae *gateway.AdminError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("wrong bearer: %v", err)
	}
	ac, err := gateway.NewAdminClient(gw.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := ac.Seed(ctx, nil)
	if err != nil || sr.Sessions != 3 || sr.Messages != 5 {
		t.Fatalf("seed demo = %+v, %v", sr, err)
	}
	c := dial(t, gw.URL, &gatewaytest.DialOptions{Token: "tok", Device: newDevice(t)})
	request(t, c, "sessions.subscribe", nil)
	res, err := ac.Inject(ctx, gateway.InjectRequest{SessionKey: "agent:main:main", Text: "yes abcde", SenderIsOwner: true})
	if err != nil || res.MessageSeq != 4 {
		t.Fatalf("inject = %+v, %v", res, err)
	}
	if _, p := nextEvent(t, c, protocol.EventSessionMessage); p["senderIsOwner"] != true || p["messageId"] != res.MessageID {
		t.Errorf("injected event = %v", p)
	}
	if _, err := ac.Inject(ctx, gateway.InjectRequest{SessionKey: "agent:main:main", Text: "x", Role: "system"}); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("bad role: %v", err)
	}

	// An approval via the API, resolved by the connected client, with wait.
	done := make(chan string, 1)
	go func() {
		raw, err := ac.RequestApproval(context.Background(), gateway.ApprovalRequest{Kind: "exec", ID: "via-api", Command: "make demo", Wait: true})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(raw)
	}()
	nextEvent(t, c, protocol.EventExecApprovalRequested)
	request(t, c, "exec.approval.resolve", map[string]any{"id": "via-api", "decision": "allow-always"})
	if got := <-done; !strings.Contains(got, `"decision":"allow-always"`) {
		t.Errorf("approval via API = %s", got)
	}
	if _, err := ac.Seed(ctx, &gateway.Seed{Sessions: []gateway.SeedSession{{Key: ""}}}); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("invalid seed: %v", err)
	}
}

func TestParseSeed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"minimal", `{"sessions":[{"key":"agent:main:x","messages":[{"id":"m1","message":{"role":"user","content":"hi"}}]}]}`, true},
		{"blocks", `{"sessions":[{"key":"k","route":{"channel":"c","to":"t"},"messages":[{"id":"m","message":{"role":"assistant","content":[{"type":"text","text":"x"}],"timestamp":5}}]}]}`, true},
		{"unknown field", `{"sessions":[{"key":"k","colour":"red"}]}`, false},
		{"no key", `{"sessions":[{"messages":[]}]}`, false},
		{"half a route", `{"sessions":[{"key":"k","route":{"channel":"c"}}]}`, false},
		{"bad role", `{"sessions":[{"key":"k","messages":[{"id":"m","message":{"role":"bot","content":"x"}}]}]}`, false},
		{"no id", `{"sessions":[{"key":"k","messages":[{"message":{"role":"user","content":"x"}}]}]}`, false},
		{"content object", `{"sessions":[{"key":"k","messages":[{"id":"m","message":{"role":"user","content":{}}}]}]}`, false},
		{"not json", `{`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := gateway.ParseSeed([]byte(tt.doc)); (err == nil) != tt.ok {
				t.Errorf("ParseSeed = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
