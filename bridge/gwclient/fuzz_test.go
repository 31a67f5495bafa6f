package gwclient

import (
	"encoding/json"
	"testing"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

// FuzzHandle feeds arbitrary Gateway messages to a connection's frame
// handler: it must never panic, whatever the bytes.
func FuzzHandle(f *testing.F) {
	for _, seed := range []string{
		`{"type":"event","event":"connect.challenge","payload":{"nonce":"n","ts":1}}`,
		`{"type":"event","event":"connect.challenge","payload":"x"}`,
		`{"type":"event","event":"tick","payload":{"ts":1},"seq":3}`,
		`{"type":"res","id":"1:a","ok":true,"payload":{}}`,
		`{"type":"res","id":"1:a","ok":false}`,
		`{"type":"res","id":"1:a","ok":false,"error":{"code":"X","message":"m","retryable":true,"retryAfterMs":5}}`,
		`{"type":"req","id":"1","method":"m"}`,
		`not json`, `[]`, `null`, `{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := New(&Options{URL: "ws://127.0.0.1:1", OnEvent: func(string, json.RawMessage) {}})
		s := &session{c: c, challenge: make(chan protocol.Challenge, 1), pending: map[string]*pendingCall{"1:a": {method: "m", ch: make(chan result, 1)}}, lastSeq: -1}
		s.handle(data)
		s.handle(data) // a repeat hits the "already answered" and "repeated challenge" paths
	})
}

// FuzzParseHello checks the hello-ok reader on arbitrary payloads.
func FuzzParseHello(f *testing.F) {
	f.Add([]byte(`{"type":"hello-ok","protocol":4,"features":{"methods":["a"]},"policy":{"tickIntervalMs":30000},"auth":{"deviceToken":"t"}}`))
	f.Add([]byte(`{"policy":{"tickIntervalMs":-1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseHello(data)
		if err == nil && h.TickInterval <= 0 {
			t.Fatalf("tick interval %v from %s", h.TickInterval, data)
		}
	})
}
