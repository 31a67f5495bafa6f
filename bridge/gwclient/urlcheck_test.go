package gwclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/bridge/gwclient"
)

// CheckSecureURL follows OpenClaw's isSecureWebSocketUrl: TLS always,
// plaintext only to loopback, private and link-local addresses and .local
// and .ts.net names; the break-glass adds other host names, never public
// IP literals.
func TestCheckSecureURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url                string
		ok, okAllowPrivate bool
	}{
		{"wss://gateway.example.com", true, true},
		{"wss://203.0.113.7:443", true, true},
		{"https://gateway.example.com", true, true},
		{"ws://127.0.0.1:18789", true, true},
		{"ws://127.8.9.10:1", true, true},
		{"ws://localhost:18789", true, true},
		{"ws://LOCALHOST.:18789", true, true},
		{"ws://[::1]:18789", true, true},
		{"ws://[::ffff:127.0.0.1]:18789", true, true},
		{"ws://10.1.2.3:18789", true, true},
		{"ws://172.16.0.1:18789", true, true},
		{"ws://172.31.255.255:18789", true, true},
		{"ws://192.168.1.20:18789", true, true},
		{"ws://169.254.10.1:18789", true, true},
		{"ws://100.101.102.103:18789", true, true}, // Tailscale (CGNAT)
		{"ws://[fd7a:115c:a1e0::1]:18789", true, true},
		{"ws://[fe80::1]:18789", true, true},
		{"ws://[fec0::1]:18789", true, true},
		{"ws://mybox.local:18789", true, true},
		{"ws://mybox.tail1234.ts.net:18789", true, true},
		{"ws://mybox.tail1234.ts.net.:18789", true, true},
		{"http://192.168.1.20:18789", true, true},
		{"ws://203.0.113.7:18789", false, false},
		{"ws://8.8.8.8:18789", false, false},
		{"ws://172.32.0.1:18789", false, false},
		{"ws://100.128.0.1:18789", false, false},
		{"ws://[2001:db8::1]:18789", false, false},
		{"ws://[::ffff:8.8.8.8]:18789", false, false},
		{"ws://0.0.0.0:18789", false, false},
		{"ws://gateway.example.com:18789", false, true},
		{"ws://local:18789", false, true},
		{"http://gateway.example.com:18789", false, true},
		{"ws://user:hunter2@gateway.example.com:18789/?token=s3cret", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			for _, allow := range []bool{false, true} {
				want := tc.ok
				if allow {
					want = tc.okAllowPrivate
				}
				err := gwclient.CheckSecureURL(tc.url, allow)
				if want {
					if err != nil {
						t.Errorf("allowPrivate=%v: refused: %v", allow, err)
					}
					continue
				}
				var pe *gwclient.PlaintextRemoteError
				if !errors.As(err, &pe) || !errors.Is(err, gwclient.ErrPlaintextRemote) {
					t.Fatalf("allowPrivate=%v: %v, want a PlaintextRemoteError", allow, err)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "SECURITY ERROR: Gateway URL \"") || !strings.Contains(msg, "uses plaintext ws:// to a non-loopback address.") {
					t.Errorf("message does not start like OpenClaw's:\n%s", msg)
				}
				if strings.Contains(msg, "hunter2") || strings.Contains(msg, "s3cret") {
					t.Errorf("message leaks a secret of the URL:\n%s", msg)
				}
				if hint := strings.Contains(msg, gwclient.EnvAllowInsecurePrivateWS+"=1"); hint == allow {
					t.Errorf("allowPrivate=%v: break-glass hint shown=%v:\n%s", allow, hint, msg)
				}
			}
		})
	}
}

// Run refuses a plaintext URL to a public address before dialling, with
// the environment's break-glass or without it; a host name passes the
// check only with the break-glass and then fails at the dial.
func TestRunRefusesPlaintextRemote(t *testing.T) {
	tests := []struct {
		url, env  string
		wantCheck bool // refused by the plaintext check
	}{
		{"ws://203.0.113.7:18789", "", true},
		{"ws://203.0.113.7:18789", "1", true},
		{"ws://gateway.invalid:18789", "", true},
		{"ws://gateway.invalid:18789", "1", false},
	}
	for _, tc := range tests {
		t.Run(tc.url+"/"+tc.env, func(t *testing.T) {
			t.Setenv(gwclient.EnvAllowInsecurePrivateWS, tc.env)
			c := gwclient.New(&gwclient.Options{URL: tc.url, Token: "t"})
			err := c.Run(context.Background())
			if got := errors.Is(err, gwclient.ErrPlaintextRemote); got != tc.wantCheck {
				t.Fatalf("Run: %v; refused by the plaintext check: %v, want %v", err, got, tc.wantCheck)
			}
			if !tc.wantCheck {
				var de *gwclient.DialError
				if !errors.As(err, &de) {
					t.Fatalf("Run: %v, want the dial to fail on the unresolvable name", err)
				}
			}
		})
	}
}
