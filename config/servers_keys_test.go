package config

import (
	"slices"
	"testing"
)

// Likely misspelled keys are found, with the key meant; other unknown
// keys, known keys and far-off names are left alone.
func TestKeyTypos(t *testing.T) {
	t.Parallel()
	root := mustObject(t, `{"mcp": {"servres": {}, "servers": {
		"a": {"command": "x", "evn": {"A": "1"}, "requestTimeoutMS": 5, "myOwnNote": "kept", "args": []},
		"b": {"comand": "y", "URL": "https://h", "tranport": "sse", "headrs": {}},
		"c": {"command": "z", "timeout": 3, "enabled": true}}}, "other": {"evn": 1}}`)
	var got []string
	for _, k := range KeyTypos(root) {
		got = append(got, k.Path+"->"+k.Want)
	}
	want := []string{
		"mcp.servres->servers",
		"mcp.servers.a.evn->env", "mcp.servers.a.requestTimeoutMS->requestTimeoutMs",
		"mcp.servers.b.comand->command", "mcp.servers.b.URL->url", "mcp.servers.b.tranport->transport", "mcp.servers.b.headrs->headers",
	}
	if !slices.Equal(got, want) {
		t.Errorf("KeyTypos = %q\nwant %q", got, want)
	}
	if m := (KeyTypo{Path: "mcp.servers.a.evn", Key: "evn", Want: "env"}).Message(); m != `mcp.servers.a.evn: unknown key "evn", did you mean "env"? (OpenClaw keeps it but ignores it)` {
		t.Errorf("Message = %q", m)
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"env", "evn", 1}, {"comand", "command", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}, {"ab", "ba", 1}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
