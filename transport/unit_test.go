//go:build linux

package transport

import (
	"errors"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openclaw-go/openclaw/config"
)

// TestResolveStdioEnv resolves stdio entries: the child gets the filtered,
// converted env; values of other types are dropped with a warning; a
// blocked key refuses the server, naming every blocked key.
func TestResolveStdioEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     map[string]any
		kept    map[string]string
		bad     []string
		blocked []string
	}{
		{"nil", nil, nil, nil, nil},
		{"values converted", map[string]any{"A": "x", "N": 42.0, "F": 1.5, "B": false, " Spaced ": "v"},
			map[string]string{"A": "x", "N": "42", "F": "1.5", "B": "false", " Spaced ": "v"}, nil, nil},
		{"bad value types dropped", map[string]any{"A": "x", "O": map[string]any{}, "L": []any{"a"}, "Z": nil},
			map[string]string{"A": "x"}, []string{"L", "O", "Z"}, nil},
		{"credential allowlist kept", map[string]any{"AWS_SECRET_ACCESS_KEY": "s", "npm_token": "t"},
			map[string]string{"AWS_SECRET_ACCESS_KEY": "s", "npm_token": "t"}, nil, nil},
		{"blocked refuses", map[string]any{"HOME": "/h", "SHELL": "/bin/evil", "DYLD_X": "1", "BASH_FUNC_f%%": "() { :; }"},
			nil, nil, []string{"BASH_FUNC_f%%", "DYLD_X", "SHELL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Resolve("s", config.ServerEntry{Command: "x", Env: tc.env}, &Options{Logger: slog.New(slog.DiscardHandler), LookupEnv: func(string) (string, bool) { return "", false }})
			var be *BlockedEnvError
			if tc.blocked != nil {
				if !errors.As(err, &be) || !reflect.DeepEqual(be.Keys, tc.blocked) {
					t.Fatalf("err = %v, want blocked %v", err, tc.blocked)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kept map[string]string
			for _, kv := range r.Transport.(*StdioTransport).Env {
				if kept == nil {
					kept = map[string]string{}
				}
				k, v, _ := strings.Cut(kv, "=")
				kept[k] = v
			}
			var bad []string
			for _, w := range r.Warnings {
				_, rest, _ := strings.Cut(w, `env "`)
				k, _, _ := strings.Cut(rest, `"`)
				bad = append(bad, k)
			}
			if !reflect.DeepEqual(kept, tc.kept) || !reflect.DeepEqual(bad, tc.bad) {
				t.Errorf("kept %v bad %v; want %v %v", kept, bad, tc.kept, tc.bad)
			}
		})
	}
}

func TestChildEnvInheritsOnlyTheSafeSet(t *testing.T) {
	t.Parallel()
	ours := map[string]string{"HOME": "/h", "PATH": "/bin", "USER": "u", "AWS_SECRET_ACCESS_KEY": "leak", "TERM": "xterm"}
	lookup := func(k string) (string, bool) { v, ok := ours[k]; return v, ok }
	got := childEnv(lookup, map[string]string{"PATH": "/custom", "X": "1"})
	want := []string{"HOME=/h", "PATH=/custom", "TERM=xterm", "USER=u", "X=1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("childEnv = %v, want %v", got, want)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	f := false
	lookup := func(k string) (string, bool) {
		if k == "TOKEN" {
			return "tok-123456", true
		}
		return "", false
	}
	for _, tc := range []struct {
		name     string
		e        config.ServerEntry
		kind     Kind
		launch   string
		errWant  string
		unusable bool
	}{
		{"stdio wins over url", config.ServerEntry{Command: "node", Args: []string{"srv.js", "--api-key", "k1"}, URL: "https://x/mcp", Transport: "sse"},
			KindStdio, "node srv.js --api-key ***", "", false},
		{"stdio cwd", config.ServerEntry{Command: "node", WorkingDirectory: "/srv"}, KindStdio, "node (cwd=/srv)", "", false},
		{"url defaults to sse", config.ServerEntry{URL: "https://user:pw@h.example/sse?token=abc&x=1"},
			KindSSE, "https://***:***@h.example/sse?token=***&x=1", "", false},
		{"streamable-http", config.ServerEntry{URL: "http://127.0.0.1:1/mcp", Transport: "Streamable-HTTP"}, KindStreamableHTTP, "http://127.0.0.1:1/mcp", "", false},
		{"type http", config.ServerEntry{URL: "http://127.0.0.1:1/mcp", Type: "http"}, KindStreamableHTTP, "http://127.0.0.1:1/mcp", "", false},
		{"type sse", config.ServerEntry{URL: "http://127.0.0.1:1/sse", Type: "SSE"}, KindSSE, "http://127.0.0.1:1/sse", "", false},
		{"transport beats type", config.ServerEntry{URL: "http://127.0.0.1:1/sse", Transport: "sse", Type: "http"}, KindSSE, "http://127.0.0.1:1/sse", "", false},
		{"sslVerify false and header env", config.ServerEntry{URL: "https://h/mcp", Transport: "streamable-http", SSLVerify: &f,
			Headers: map[string]any{"Authorization": "Bearer ${TOKEN}", "X-N": 7.0}}, KindStreamableHTTP, "https://h/mcp", "", false},
		{"ws url", config.ServerEntry{URL: "ws://h/mcp"}, "", "", "is not an http: or https: URL", true},
		{"file url", config.ServerEntry{URL: "file:///etc/passwd"}, "", "", "is not an http: or https: URL", true},
		{"nothing", config.ServerEntry{}, "", "", "no non-empty command for stdio and no url", true},
		{"stdio without command", config.ServerEntry{Transport: "stdio", URL: "http://h/"}, "", "", `transport "stdio" is not supported`, true},
		{"unknown transport", config.ServerEntry{URL: "http://h/", Transport: "websocket"}, "", "", `transport "websocket" is not supported`, true},
		{"unknown type", config.ServerEntry{URL: "http://h/", Type: "grpc"}, "", "", `transport "grpc" is not supported`, true},
		{"unset header variable", config.ServerEntry{URL: "http://h/", Headers: map[string]any{"X-Key": "${NOPE}"}}, "", "", `header "X-Key": environment variable NOPE`, false},
		{"cert without key", config.ServerEntry{URL: "https://h/", ClientCert: "/c.pem"}, "", "", "clientCert and clientKey must be set together", false},
		{"missing cert file", config.ServerEntry{URL: "https://h/", ClientCert: "/no/c.pem", ClientKey: "/no/k.pem"}, "", "", "loading client certificate /no/c.pem", false},
		{"secret url in error", config.ServerEntry{URL: "ftp://u:secretpw@h/?token=zzz"}, "", "", "ftp://***:***@h/?token=***", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Resolve("srv", tc.e, &Options{LookupEnv: lookup})
			if tc.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errWant) || !strings.Contains(err.Error(), `"srv"`) {
					t.Fatalf("err = %v, want it to name the server and contain %q", err, tc.errWant)
				}
				if errors.Is(err, ErrUnusable) != tc.unusable {
					t.Errorf("errors.Is(err, ErrUnusable) = %t", !tc.unusable)
				}
				if strings.Contains(err.Error(), "secretpw") || strings.Contains(err.Error(), "zzz") {
					t.Errorf("error leaks a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != tc.kind || r.Launch != tc.launch {
				t.Errorf("kind %s launch %q; want %s %q", r.Kind, r.Launch, tc.kind, tc.launch)
			}
			if r.ConnectTimeout != DefaultConnectionTimeout || r.RequestTimeout != DefaultRequestTimeout {
				t.Errorf("timeouts %v %v", r.ConnectTimeout, r.RequestTimeout)
			}
			switch tr := r.Transport.(type) {
			case *StdioTransport:
				if tc.kind != KindStdio {
					t.Errorf("transport %T", tr)
				}
			case *SSETransport:
				if tc.kind != KindSSE || tr.Endpoint != tc.e.URL {
					t.Errorf("transport %T %s", tr, tr.Endpoint)
				}
			case *mcp.StreamableClientTransport:
				if tc.kind != KindStreamableHTTP || tr.Endpoint != tc.e.URL {
					t.Errorf("transport %T %s", tr, tr.Endpoint)
				}
				if tc.e.Headers != nil {
					rt := tr.HTTPClient.Transport.(listPageTripper).base.(*headerRoundTripper)
					if rt.headers["Authorization"] != "Bearer tok-123456" || rt.headers["X-N"] != "7" {
						t.Errorf("headers %v", rt.headers)
					}
					if got := r.Redactor.Redact("sent tok-123456"); got != "sent ***" {
						t.Errorf("Redactor did not learn the header secret: %q", got)
					}
				}
			}
		})
	}
}

func TestResolveTimeoutsAndOAuthHeader(t *testing.T) {
	t.Parallel()
	log, lb := newLogger()
	r := resolve(t, "o", config.ServerEntry{URL: "https://h/mcp", Transport: "streamable-http", Auth: "oauth",
		ConnectionTimeoutMs: 1500, RequestTimeoutMs: 2500,
		Headers: map[string]any{"authorization": "Bearer x", "X-Obj": map[string]any{}, "X-Ok": true}}, &Options{Logger: log})
	if r.ConnectTimeout != 1500*time.Millisecond || r.RequestTimeout != 2500*time.Millisecond {
		t.Errorf("timeouts %v %v", r.ConnectTimeout, r.RequestTimeout)
	}
	rt := r.Transport.(*mcp.StreamableClientTransport).HTTPClient.Transport.(listPageTripper).base.(*headerRoundTripper)
	if !reflect.DeepEqual(rt.headers, map[string]string{"X-Ok": "true"}) {
		t.Errorf("headers %v", rt.headers)
	}
	if len(r.Warnings) != 2 || !strings.Contains(lb.String(), `header \"X-Obj\" dropped`) {
		t.Errorf("warnings %v; log %s", r.Warnings, lb.String())
	}
}

func TestExpandEnv(t *testing.T) {
	t.Parallel()
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"A": "1", "B_2": "two", "E": "", "W": " \t"}[k]
		return v, ok
	}
	for _, tc := range []struct{ in, out, err string }{
		{"plain", "plain", ""},
		{"Bearer ${A}", "Bearer 1", ""},
		{"${A}${B_2}", "1two", ""},
		{"${A}${B_2}-${E}", "", "E referenced as ${E} is empty"},
		{"Bearer ${W}", "", "W referenced as ${W} is empty"},
		{"$A and $${A}", "$A and ${A}", ""},
		{"${MISSING}", "", "MISSING referenced as ${MISSING} is not set"},
		{"${A", "", "unterminated"},
		{"${1X}", "", "invalid variable name"},
	} {
		got, err := ExpandEnv(tc.in, lookup)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ExpandEnv(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.out {
			t.Errorf("ExpandEnv(%q) = %q, %v; want %q", tc.in, got, err, tc.out)
		}
	}
}

// Env and header numbers reach the child and the server as JavaScript's
// String() prints them, as OpenClaw passes them.
func TestNumbersAsJavaScriptPrintsThem(t *testing.T) {
	t.Parallel()
	nums := map[string]any{"SMALL": 0.000001, "TINY": 1e-7, "NEG0": math.Copysign(0, -1), "BIG": 1e21, "INT": 42.0, "INF": math.Inf(1)}
	want := map[string]string{"SMALL": "0.000001", "TINY": "1e-7", "NEG0": "0", "BIG": "1e+21", "INT": "42", "INF": "Infinity"}
	r := resolve(t, "n", config.ServerEntry{Command: "x", Env: nums}, quiet())
	got := map[string]string{}
	for _, kv := range r.Transport.(*StdioTransport).Env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("env %s = %q, want %q", k, got[k], w)
		}
	}
}
