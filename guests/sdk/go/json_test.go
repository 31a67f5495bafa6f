package policy

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestDecodeToolCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     ToolCall
		wantErr  string
	}{
		{"full", `{"abi":1,"surface":"serve","session_key":"agent:main:main","caller":{"name":"claude-code","version":"2.1"},"tool":{"name":"fs_write_file","server":"files","original":"write_file"},"arguments":{"path":"/srv/a.txt"}}`,
			ToolCall{Surface: SurfaceServe, SessionKey: "agent:main:main", Caller: Caller{"claude-code", "2.1"},
				Tool: ToolRef{"fs_write_file", "files", "write_file"}, Arguments: Raw(`{"path":"/srv/a.txt"}`)}, ""},
		{"pin", `{"abi":1,"surface":"proxy","caller":{},"tool":{"name":"docs__search","server":"docs","original":"search"},"pin":{"state":"changed","digest":"sha256:aa","pinned":"sha256:bb","future":1},"arguments":{}}`,
			ToolCall{Surface: SurfaceProxy, Tool: ToolRef{"docs__search", "docs", "search"}, Pin: Pin{PinChanged, "sha256:aa", "sha256:bb"}, Arguments: Raw(`{}`)}, ""},
		{"unknown members and spaces", " {\"future\": [1, {\"x\": null}], \"tool\" : {\"name\":\"a\\u00e9\\/\",\"new\":true}} ",
			ToolCall{Tool: ToolRef{Name: "aé/"}}, ""},
		{"surrogate pair and lone surrogate", `{"tool":{"name":"\ud83d\ude80\ud800x"}}`, ToolCall{Tool: ToolRef{Name: "🚀\ufffdx"}}, ""},
		{"wrong type", `{"tool":{"name":1}}`, ToolCall{}, "invalid JSON at byte 16: want a string"},
		{"not an object", `[]`, ToolCall{}, "want an object"},
		{"trailing data", `{} {}`, ToolCall{}, "data after the JSON value"},
		{"unterminated", `{"tool":{"name":"x`, ToolCall{}, "unterminated string"},
		{"control character", "{\"tool\":{\"name\":\"a\nb\"}}", ToolCall{}, "control character"},
		{"bad number", `{"abi":-}`, ToolCall{}, "bad number"},
		{"leading zero", `{"abi":01}`, ToolCall{}, "want ',' or '}'"},
		{"bare dot", `{"abi":1.}`, ToolCall{}, "bad number"},
		{"identity", `{"surface":"proxy","caller":{"name":"oncall"},"identity":{"issuer":"https://idp","subject":"alice","client_id":"cli","scopes":["mcp","x"],"claims":{"groups":["oncall"],"n":1},"future":0},"tool":{"name":"t"}}`,
			ToolCall{Surface: SurfaceProxy, Caller: Caller{Name: "oncall"}, Identity: &Identity{Issuer: "https://idp", Subject: "alice", ClientID: "cli",
				Scopes: []string{"mcp", "x"}, Claims: map[string]Raw{"groups": Raw(`["oncall"]`), "n": Raw(`1`)}}, Tool: ToolRef{Name: "t"}}, ""},
		{"identity scope of the wrong type", `{"identity":{"subject":"a","scopes":[1]},"tool":{"name":"t"}}`, ToolCall{}, "want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got ToolCall
			err := DecodeToolCall([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestIdentityClaimStrings(t *testing.T) {
	t.Parallel()
	id := &Identity{Claims: map[string]Raw{"groups": Raw(`["oncall", 7, "dev"]`), "team": Raw(`"sre"`), "n": Raw(`1`)}}
	for name, want := range map[string][]string{"groups": {"oncall", "dev"}, "team": {"sre"}, "n": nil, "none": nil} {
		if got := id.ClaimStrings(name); !reflect.DeepEqual(got, want) {
			t.Errorf("ClaimStrings(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestRaw(t *testing.T) {
	t.Parallel()
	args := Raw(`{"path":"\/etc\/x","n":42,"ok":true,"list":["a","b\n"],"nested":{"path":"no"}}`)
	if s, ok := args.Get("path").String(); !ok || s != "/etc/x" {
		t.Errorf(`Get("path") = %q, %v`, s, ok)
	}
	if n, ok := args.Get("n").Int(); !ok || n != 42 {
		t.Errorf(`Get("n") = %d, %v`, n, ok)
	}
	if b, ok := args.Get("ok").Bool(); !ok || !b {
		t.Errorf(`Get("ok") = %v, %v`, b, ok)
	}
	if l, ok := args.Get("list").Strings(); !ok || !reflect.DeepEqual(l, []string{"a", "b\n"}) {
		t.Errorf(`Get("list") = %q, %v`, l, ok)
	}
	if v := args.Get("missing"); v != nil {
		t.Errorf(`Get("missing") = %s, want nil`, v)
	}
	if v := Raw(`[1]`).Get("path"); v != nil {
		t.Errorf(`Get on an array = %s, want nil`, v)
	}
	if _, ok := args.Get("n").String(); ok {
		t.Error("a number read as a string")
	}
}

func TestAppendVerdict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v       Verdict
		want    string
		wantErr string
	}{
		{Verdict{Decision: Allow}, `{"decision":"allow"}`, ""},
		{Verdict{Decision: RequireApproval, Reason: "a \"quoted\"\n\x01 é \xff", Title: "T", Description: "D", TimeoutMs: 5},
			`{"decision":"require_approval","reason":"a \"quoted\"\n\u0001 é ` + "\ufffd" + `","title":"T","description":"D","timeout_ms":5}`, ""},
		{Verdict{Decision: Allow, Arguments: Raw(`{"a":1}`)}, `{"decision":"allow","arguments":{"a":1}}`, ""},
		{Verdict{Decision: "maybe"}, "", `unknown decision "maybe"`},
		{Verdict{Decision: Allow, Arguments: Raw(`[1]`)}, "", "must be one JSON object"},
		{Verdict{Decision: Allow, TimeoutMs: -1}, "", "negative"},
	}
	for _, tt := range tests {
		got, err := AppendVerdict(nil, &tt.v)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: err = %v, want %q", tt.v, err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%+v: got %s, %v; want %s", tt.v, got, err, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s is not valid JSON", got)
		}
	}
}

// foldedKey matches a key that equals one of ToolCall's only ignoring case
// (or spelt with escapes), which encoding/json would match and the ABI
// does not.
var foldedKey = regexp.MustCompile(`(?i)"(surface|session_key|caller|tool|pin|arguments|name|version|server|original|state|digest|pinned)"|\\u`)

// FuzzDecodeToolCall checks the hand-written reader against encoding/json:
// whatever encoding/json accepts as a ToolCall (strings where strings are
// expected), the reader accepts with the same values; and the reader never
// accepts what is not JSON.
func FuzzDecodeToolCall(f *testing.F) {
	f.Add(`{"abi":1,"surface":"serve","caller":{"name":"c"},"tool":{"name":"t","server":"s"},"arguments":{"path":"\/etc"}}`)
	f.Add(`{"tool":{"name":"\ud83d\ude80 \u00e9"},"arguments":[1,2.5e3,null,true]}`)
	f.Add(`{"session_key":"a\\b\"c","tool":{}}`)
	f.Fuzz(func(t *testing.T, in string) {
		var got ToolCall
		err := DecodeToolCall([]byte(in), &got)
		var std struct {
			Surface    *string `json:"surface"`
			SessionKey *string `json:"session_key"`
			Caller     *struct{ Name, Version *string }
			Tool       *struct{ Name, Server, Original *string }
			Pin        *struct{ State, Digest, Pinned *string }
			Arguments  json.RawMessage `json:"arguments"`
		}
		dec := json.NewDecoder(strings.NewReader(in))
		stdErr := dec.Decode(&std)
		if stdErr == nil && dec.More() {
			stdErr = json.Unmarshal([]byte(in), &std) // trailing data
		}
		if err == nil && !json.Valid([]byte(in)) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		if stdErr != nil || err != nil {
			return // differing strictness on types (null for a string) is fine
		}
		if foldedKey.MatchString(in) {
			return // encoding/json matches keys ignoring case; the ABI's are exact
		}
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		if str(std.Surface) != string(got.Surface) || str(std.SessionKey) != got.SessionKey {
			t.Fatalf("%q: surface/session %q %q, encoding/json %q %q", in, got.Surface, got.SessionKey, str(std.Surface), str(std.SessionKey))
		}
		if std.Tool != nil && (str(std.Tool.Name) != got.Tool.Name || str(std.Tool.Server) != got.Tool.Server) {
			t.Fatalf("%q: tool %+v, encoding/json %q", in, got.Tool, str(std.Tool.Name))
		}
		if std.Pin != nil && (str(std.Pin.State) != got.Pin.State || str(std.Pin.Digest) != got.Pin.Digest || str(std.Pin.Pinned) != got.Pin.Pinned) {
			t.Fatalf("%q: pin %+v, encoding/json %q %q %q", in, got.Pin, str(std.Pin.State), str(std.Pin.Digest), str(std.Pin.Pinned))
		}
	})
}
