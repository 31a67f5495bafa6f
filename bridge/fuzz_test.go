package bridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// foldedKeys reports whether data has a key, at the top level or in
// "message", that matches a wanted key only case-insensitively.
func foldedKeys(data []byte) bool {
	wanted := []string{"sessionKey", "messageId", "messageSeq", "lastChannel", "lastTo", "lastAccountId",
		"lastThreadId", "senderIsOwner", "message", "role", "content", "text"}
	var check func(raw []byte, depth int) bool
	check = func(raw []byte, depth int) bool {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return false
		}
		for k, v := range m {
			for _, w := range wanted {
				if k != w && strings.EqualFold(k, w) {
					return true
				}
			}
			if depth < 2 && check(v, depth+1) {
				return true
			}
			if kindOf(v) == kindArray && depth < 2 {
				if first := jsonw.FirstElement(v); first != nil && check(first, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return check(data, 0)
}

// FuzzDecodeSessionMessage checks the skipping scanner against
// encoding/json on arbitrary input: it never panics, and on valid JSON
// objects it finds the same members.
func FuzzDecodeSessionMessage(f *testing.F) {
	f.Add([]byte(sessionMessagePayload(f, "seed", nil)))
	f.Add([]byte(`{"sessionKey":"a","message":{"role":"user","content":[{"text":"x\"}"}]},"lastTo":"1"}`))
	f.Add([]byte(`{"sessionKey" : "a" , "message" : "oops", "lastThreadId": 4.5e3 }`))
	f.Add([]byte(`{"a":[1,{"b":"]"}],"sessionKey":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeSessionMessage(data)
		var std sessionMessage
		if json.Unmarshal(data, &std) != nil || kindOf(data) != kindObject {
			return // invalid JSON: only "no panic" is required
		}
		if foldedKeys(data) {
			return // encoding/json folds key case; JavaScript, and the scanner, do not
		}
		if err != nil {
			t.Fatalf("scanner rejected valid JSON %q: %v", data, err)
		}
		for _, p := range []struct {
			name     string
			got, std json.RawMessage
		}{
			{"sessionKey", m.SessionKey, std.SessionKey},
			{"lastTo", m.LastTo, std.LastTo},
			{"lastThreadId", m.LastThreadID, std.LastThreadID},
			{"message.role", m.Message.Role, std.Message.Role},
			{"message.content", m.Message.Content, std.Message.Content},
		} {
			if string(jsonw.Compact(p.got)) != string(jsonw.Compact(p.std)) {
				t.Fatalf("%s: scanner %q, encoding/json %q in %q", p.name, p.got, p.std, data)
			}
		}
		a, _ := messageText(m.Message.Content)
		b, _ := messageText(std.Message.Content)
		if a != b {
			t.Fatalf("text %q vs %q", a, b)
		}
	})
}
