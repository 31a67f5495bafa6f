package wasmpolicy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openclaw-go/openclaw/policies"
)

// reference is the encoding/json rendering of call's input.
func reference(t testing.TB, call *policies.ToolCall) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		ABI int `json:"abi"`
		*policies.ToolCall
	}{1, call}); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// checkInput fails unless got is the input encoding/json writes for call,
// byte for byte where its strings are valid UTF-8 without U+2028 or
// U+2029 (which encoding/json escapes and JSON.stringify does not), and
// otherwise the same value once decoded.
func checkInput(t testing.TB, call *policies.ToolCall, got []byte) {
	t.Helper()
	want := reference(t, call)
	if bytes.Equal(got, want) {
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("appendCallInput(%+v) = %s: %v", call, got, err)
	}
	_ = json.Unmarshal(want, &w)
	plain := true
	for _, s := range []string{string(call.Surface), call.SessionKey, call.Caller.Name, call.Caller.Version, call.Tool.Name, call.Tool.Server, call.Tool.RawName} {
		plain = plain && utf8.ValidString(s) && !strings.ContainsAny(s, "\u2028\u2029")
	}
	if plain || !reflect.DeepEqual(g, w) {
		t.Fatalf("appendCallInput(%+v)\n got %s\nwant %s", call, got, want)
	}
}

func TestAppendCallInput(t *testing.T) {
	t.Parallel()
	tests := []*policies.ToolCall{
		{},
		{Surface: policies.SurfaceServe, Tool: policies.ToolRef{Name: "t"}},
		{Surface: policies.SurfaceProxy, SessionKey: "agent:main:main", Caller: policies.Caller{Name: "claude", Version: "1"},
			Tool: policies.ToolRef{Name: "fs_read", Server: "files", RawName: "read"}, Arguments: json.RawMessage(` { "path" : "/etc/x" , "n":[1, 2] } `)},
		{Caller: policies.Caller{Version: "only"}, Tool: policies.ToolRef{Name: "quote\" back\\ nl\n tab\t nul\x00 <&> é \xff end"}},
		{Tool: policies.ToolRef{Name: "u2028\u2028"}, Arguments: json.RawMessage(`null`)},
		{Surface: policies.SurfaceProxy, Tool: policies.ToolRef{Name: "docs__search", Server: "docs", RawName: "search"},
			Pin: &policies.ToolPin{State: policies.PinChanged, Digest: "sha256:" + strings.Repeat("a", 64), Pinned: "sha256:" + strings.Repeat("b", 64)}, Arguments: json.RawMessage(`{}`)},
		{Tool: policies.ToolRef{Name: "docs__new"}, Pin: &policies.ToolPin{State: policies.PinNew, Digest: "sha256:" + strings.Repeat("c", 64)}},
		{Surface: policies.SurfaceProxy, Caller: policies.Caller{Name: "inspector"}, Tool: policies.ToolRef{Name: "prod__deploy"},
			Identity: &policies.Identity{Issuer: "https://idp.example", Subject: "alice", ClientID: "cli", Scopes: []string{"mcp"},
				Claims: map[string]json.RawMessage{"groups": json.RawMessage(`["oncall"]`)}}},
		{Tool: policies.ToolRef{Name: "t"}, Identity: &policies.Identity{Subject: "ci-deploy", Issuer: "tokens-file"}},
	}
	for _, call := range tests {
		got, err := appendCallInput(nil, call)
		if err != nil {
			t.Fatalf("appendCallInput(%+v): %v", call, err)
		}
		checkInput(t, call, got)
	}
	if _, err := appendCallInput(nil, &policies.ToolCall{Arguments: json.RawMessage(`{"a":`)}); err == nil {
		t.Error("invalid arguments accepted")
	}
}

func FuzzAppendCallInput(f *testing.F) {
	f.Add("serve", "k", "claude", "1", "fs_read", "files", "read", `{"a":"b"}`)
	f.Add("", "", "", "", "\xff\x00\"", "", "", ``)
	f.Fuzz(func(t *testing.T, surface, key, name, version, tool, server, original, args string) {
		call := &policies.ToolCall{Surface: policies.Surface(surface), SessionKey: key, Caller: policies.Caller{Name: name, Version: version},
			Tool: policies.ToolRef{Name: tool, Server: server, RawName: original}, Arguments: json.RawMessage(args)}
		got, err := appendCallInput(nil, call)
		if args != "" && !json.Valid([]byte(args)) {
			if err == nil {
				t.Fatalf("invalid arguments %q accepted", args)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		checkInput(t, call, got)
	})
}
