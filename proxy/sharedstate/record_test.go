package sharedstate

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/internal/oauthcred"
)

func TestDecodeRecord(t *testing.T) {
	t.Parallel()
	ev, err := DecodeEvent([]byte(`{"v":1,"kind":"reload","replica":"ab12","added_later":true}`))
	if err != nil || ev.Kind != EventReload || ev.Replica != "ab12" {
		t.Fatalf("a v1 event with a member this release does not know: %+v, %v", ev, err)
	}
	_, err = DecodeEvent([]byte(`{"v":2,"kind":"reload","replica":"ab12"}`))
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Version != 2 || !strings.Contains(err.Error(), "newer openclaw release") {
		t.Fatalf("a v2 event: %v, want a VersionError", err)
	}
	for raw, want := range map[string]string{
		``:                                      "not a JSON object",
		`[1]`:                                   "not a JSON object",
		`{"kind":"reload","replica":"x"}`:       "no version",
		`{"v":0,"kind":"reload","replica":"x"}`: "version 0",
		`{"v":"1","kind":"reload"}`:             "not a number",
		`{"v":1,"v":2,"kind":"reload","replica":"x"}`: "appears twice",
		`{"v":1,"kind":7,"replica":"x"}`:              "kind is a number, not a string",
		`{"v":1,"kind":"reload"}`:                     "no kind or replica",
		`{"v":1,"kind":"reload","replica":"x"} {}`:    "not a JSON object",
	} {
		if _, err := DecodeEvent([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeEvent(%s) = %v, want %q", raw, err, want)
		}
	}
	if _, err := DecodeEvent([]byte(`{"v":1,"kind":"` + strings.Repeat("x", MaxRecordBytes) + `","replica":"x"}`)); err == nil {
		t.Error("a record above MaxRecordBytes was read")
	}
}

// FuzzDecodeRecord: any bytes decode to a record or an error, never a
// panic; a record read has a known version, and encodes back to one that
// reads the same.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{`{"v":1,"kind":"reload","replica":"ab"}`, `{"v":2}`, `{"v":1,"v":1}`, `{"v":-1}`, `{}`, `{"v":1e400}`,
		`{"v":1,"id":"s1","owner":"https://idp|alice","expires":1,"protocol":"2025-11-25"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := DecodeEvent(raw)
		if err != nil {
			return
		}
		if ev.V < 1 || ev.V > RecordVersion {
			t.Fatalf("read a record of version %d", ev.V)
		}
		back, err := DecodeEvent(encodeRecord(ev))
		if err != nil || back != ev {
			t.Fatalf("%+v encodes to a record that reads %+v, %v", ev, back, err)
		}
	})
}

// FuzzDecodeSession: any bytes decode to a session record or an error,
// never a panic; a record read has a known version and initialize params
// that are a JSON object, and reads the same once encoded again.
func FuzzDecodeSession(f *testing.F) {
	for _, s := range []string{`{"v":1,"owner":"https://idp\u0000alice","protocol":"2025-11-25","initialize":{"protocolVersion":"2025-11-25"},"log_level":"debug","subscriptions":["file:///a"]}`,
		`{"v":2,"protocol":"x","initialize":{}}`, `{"v":1,"protocol":"x","initialize":[]}`, `{"v":1,"protocol":"x","initialize":{"a":1,"a":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rec, err := DecodeSession(raw)
		if err != nil {
			return
		}
		if rec.V < 1 || rec.V > RecordVersion || rec.Protocol == "" || !json.Valid(rec.Initialize) || rec.Initialize[0] != '{' {
			t.Fatalf("read %+v", rec)
		}
		back, err := DecodeSession(encodeRecord(rec))
		if err != nil || back.Owner != rec.Owner || back.Protocol != rec.Protocol || back.LogLevel != rec.LogLevel || !slices.Equal(back.Subscriptions, rec.Subscriptions) {
			t.Fatalf("%+v encodes to a record that reads %+v, %v", rec, back, err)
		}
	})
}

// FuzzOAuthRecord: any bytes stored at a token record's key open to the
// credentials of that server and principal or to an error, never a
// panic; only what seal wrote for that key opens.
func FuzzOAuthRecord(f *testing.F) {
	o, err := (&State{}).OAuthTokens([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	key := oauthKey(oauthPrefix, "team", "https://mcp.example.com/mcp", "alice")
	c := &oauthcred.Credentials{Server: "team", ServerURL: "https://mcp.example.com/mcp", Principal: "alice", AccessToken: "a", RefreshToken: "r"}
	valid := o.seal(c, key)
	for _, s := range [][]byte{valid, o.seal(c, key+"x"), []byte(`{"v":1,"kid":"","nonce":"","sealed":""}`), []byte(`{"v":2,"kid":"x"}`),
		[]byte(`{"v":1,"kid":"` + o.keyID + `","nonce":"AAAAAAAAAAAAAAAA","sealed":"AAAA"}`), []byte(`{"v":1,"nonce":1}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := o.open(raw, key, "team", "alice")
		if err != nil {
			if got != nil {
				t.Fatalf("an error and credentials: %v", err)
			}
			return
		}
		if got.Server != "team" || got.Principal != "alice" {
			t.Fatalf("opened the credentials of %q/%q at alice's key", got.Server, got.Principal)
		}
		if got.AccessToken != "a" || got.RefreshToken != "r" {
			t.Fatalf("opened credentials seal did not write: %v", got)
		}
	})
}
