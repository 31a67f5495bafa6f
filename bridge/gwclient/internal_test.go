package gwclient

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/openclaw-go/openclaw/gateway/protocol"
)

func TestChallengeTimeoutFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want time.Duration
	}{
		{"unset", nil, DefaultChallengeTimeout},
		{"challenge", map[string]string{EnvConnectChallengeTimeoutMs: "2500"}, 2500 * time.Millisecond},
		{"handshake", map[string]string{EnvHandshakeTimeoutMs: "700"}, 700 * time.Millisecond},
		{"challenge wins", map[string]string{EnvConnectChallengeTimeoutMs: "100", EnvHandshakeTimeoutMs: "700"}, 100 * time.Millisecond},
		{"invalid falls through", map[string]string{EnvConnectChallengeTimeoutMs: "soon", EnvHandshakeTimeoutMs: " 900 "}, 900 * time.Millisecond},
		{"zero ignored", map[string]string{EnvConnectChallengeTimeoutMs: "0"}, DefaultChallengeTimeout},
		{"negative ignored", map[string]string{EnvHandshakeTimeoutMs: "-5"}, DefaultChallengeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := challengeTimeoutFromEnv(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	o := (*Options)(nil).withDefaults(func(string) string { return "" })
	if o.RequestTimeout != 180*time.Second || o.ChallengeTimeout != 15*time.Second ||
		o.InitialBackoff != time.Second || o.MaxBackoff != 30*time.Second ||
		o.MaxMessageBytes != 25<<20 || o.ClientVersion != DefaultClientVersion || o.Logger == nil {
		t.Errorf("defaults: %+v", o)
	}
	in := &Options{ChallengeTimeout: time.Second, InitialBackoff: time.Minute}
	o = in.withDefaults(func(string) string { return "5" })
	if o.ChallengeTimeout != time.Second {
		t.Errorf("explicit ChallengeTimeout overridden by env: %v", o.ChallengeTimeout)
	}
	if o.MaxBackoff != time.Minute {
		t.Errorf("MaxBackoff %v below InitialBackoff", o.MaxBackoff)
	}
	if in.RequestTimeout != 0 {
		t.Error("withDefaults modified the caller's Options")
	}
}

func TestRetryableInitial(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&protocol.RequestError{ErrorShape: protocol.ErrorShape{Message: "busy", Retryable: &yes}}, true},
		{&protocol.RequestError{ErrorShape: protocol.ErrorShape{Message: "unauthorized: gateway token mismatch", Retryable: &no}}, false},
		{&protocol.RequestError{ErrorShape: protocol.ErrorShape{Message: "unauthorized: gateway token mismatch"}}, false},
		{fmt.Errorf("%w for connect (no response within 15s)", ErrRequestTimeout), true},
		{fmt.Errorf("%w for sessions.subscribe", ErrRequestTimeout), false},
		{errors.New("Gateway Connect Challenge Timeout"), true},
		{ErrChallengeTimeout, true},
		{&DialError{URL: "ws://127.0.0.1:1", Err: errors.New("refused")}, false},
	} {
		if got := retryableInitial(tc.err); got != tc.want {
			t.Errorf("retryableInitial(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	ms := int64(2500)
	if got := retryAfter(&protocol.RequestError{ErrorShape: protocol.ErrorShape{Retryable: &yes, RetryAfterMs: &ms}}); got != 2500*time.Millisecond {
		t.Errorf("retryAfter = %v", got)
	}
	if got := retryAfter(&protocol.RequestError{ErrorShape: protocol.ErrorShape{RetryAfterMs: &ms}}); got != 0 {
		t.Errorf("retryAfter of a non-retryable error = %v, want 0", got)
	}
}

func TestParseFingerprint(t *testing.T) {
	t.Parallel()
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	colon := "01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF"
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{hex, true}, {colon, true}, {"sha256:" + colon, true}, {"SHA-256:" + hex, true},
		{"  " + hex + "\n", true}, {hex[:62], false}, {hex + "00", false}, {"zz" + hex[2:], false}, {"", false},
	} {
		b, err := ParseFingerprint(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseFingerprint(%q) err = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && colonHex(b) != colon {
			t.Errorf("ParseFingerprint(%q) = %s", tc.in, colonHex(b))
		}
	}
}

func TestNodePlatform(t *testing.T) {
	t.Parallel()
	for goos, want := range map[string][2]string{
		"linux": {"linux", "Linux"}, "darwin": {"darwin", "Darwin"}, "windows": {"win32", "Windows_NT"},
		"freebsd": {"freebsd", "FreeBSD"}, "plan9": {"plan9", "Plan9"},
	} {
		if p, f := nodePlatform(goos), nodeOSType(goos); p != want[0] || f != want[1] {
			t.Errorf("%s → %s/%s, want %s/%s", goos, p, f, want[0], want[1])
		}
	}
}
