package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolvePrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokFile, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("openclaw.json", []byte(`{
		// JSON5: comments, unquoted keys, trailing commas
		gateway: {port: 19000, auth: {mode: "token", token: "cfg-token",}, remote: {url: "wss://gw.example:443", token: "remote-token"}},
		agents: {whatever: true},
	}`))
	if err != nil {
		t.Fatal(err)
	}
	remote := *cfg
	remote.Gateway.Mode = "remote"
	tests := []struct {
		name       string
		fl         Flags
		cfg        *File
		env        map[string]string
		url, token string
	}{
		{"defaults", Flags{}, nil, nil, "ws://127.0.0.1:18789", ""},
		{"config port and token", Flags{}, cfg, nil, "ws://127.0.0.1:19000", "cfg-token"},
		{"remote mode", Flags{}, &remote, nil, "wss://gw.example:443", "remote-token"},
		{"env beats config", Flags{}, cfg, map[string]string{EnvGatewayToken: "env-token"}, "ws://127.0.0.1:19000", "env-token"},
		{"env URL drops config secrets", Flags{}, cfg, map[string]string{EnvGatewayURL: "ws://10.0.0.1:1"}, "ws://10.0.0.1:1", ""},
		{"flags beat all", Flags{URL: "ws://x:1", Token: "flag"}, cfg, map[string]string{EnvGatewayToken: "e"}, "ws://x:1", "flag"},
		{"token file trimmed", Flags{TokenFile: tokFile}, cfg, nil, "ws://127.0.0.1:19000", "from-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tt.fl, tt.cfg, env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tt.url || got.Token != tt.token {
				t.Fatalf("got url %q token %q, want %q %q", got.URL, got.Token, tt.url, tt.token)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	t.Parallel()
	if _, err := Resolve(Flags{Token: "a", TokenFile: "b"}, nil, env(nil)); err == nil {
		t.Fatal("token and token file together accepted")
	}
	_, err := Resolve(Flags{TokenFile: "/nonexistent/tok"}, nil, env(nil))
	if err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Fatalf("missing token file: %v", err)
	}
	if _, err := Parse("bad.json", []byte(`{gateway: `)); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("bad config: %v", err)
	}
	f, err := Load(filepath.Join(t.TempDir(), "missing.json"))
	if err != nil || f == nil {
		t.Fatalf("missing config must be empty: %v", err)
	}
}
