//go:build linux

package transport

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openclaw-go/openclaw/config"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startPeer starts a server process in its own process group, killed at
// cleanup, and waits until addr accepts connections.
func startPeer(t *testing.T, addr string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out logBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, truncate(out.String(), 4000))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s: %v", name, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServerEverything(t *testing.T) {
	t.Parallel()
	dir := peers(t)
	script := peerScript(dir, "server-everything")
	for _, tc := range []struct {
		name    string
		mode    string // server-everything's transport argument
		entry   func(port int) config.ServerEntry
		version string
	}{
		{"stdio", "", func(int) config.ServerEntry {
			return config.ServerEntry{Command: "node", Args: []string{script, "stdio"}}
		}, ""},
		{"sse", "sse", func(p int) config.ServerEntry {
			return config.ServerEntry{URL: fmt.Sprintf("http://127.0.0.1:%d/sse", p)}
		}, ""},
		{"streamable-http", "streamableHttp", func(p int) config.ServerEntry {
			return config.ServerEntry{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", p), Type: "http"}
		}, ""},
		{"streamable-http 2025-11-25", "streamableHttp", func(p int) config.ServerEntry {
			return config.ServerEntry{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", p), Transport: "streamable-http"}
		}, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			port := 0
			if tc.mode != "" {
				port = freePort(t)
				startPeer(t, fmt.Sprintf("127.0.0.1:%d", port), []string{fmt.Sprintf("PORT=%d", port)}, "node", script, tc.mode)
			}
			log, lb := newLogger()
			r := resolve(t, "everything", tc.entry(port), &Options{Logger: log, LookupEnv: os.LookupEnv})
			cs := connect(t, r.Transport, tc.version)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tool := range res.Tools {
				names[tool.Name] = true
			}
			if !names["echo"] || !names["get-sum"] {
				t.Errorf("tools %v lack echo/get-sum", names)
			}
			if got := callText(t, cs, "echo", map[string]any{"message": "hi"}); got != "Echo: hi" {
				t.Errorf("echo = %q", got)
			}
			if got := callText(t, cs, "get-sum", map[string]any{"a": 2, "b": 3}); !strings.Contains(got, "5") {
				t.Errorf("get-sum = %q", got)
			}
			// The child's stderr is read and logged on the transport's own
			// goroutine: wait for the banner rather than assume it landed
			// before the calls were answered.
			if tc.mode == "" {
				deadline := time.Now().Add(30 * time.Second) // a hang guard, not a timing assertion
				for !strings.Contains(lb.String(), `"msg":"server stderr"`) {
					if time.Now().After(deadline) {
						t.Fatalf("server-everything's stderr banner was not logged: %s", lb.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

func TestServerFilesystemAndMemory(t *testing.T) {
	t.Parallel()
	dir := peers(t)
	t.Run("filesystem", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "note.txt"), []byte("hello from disk"), 0o644); err != nil {
			t.Fatal(err)
		}
		cs := connect(t, resolve(t, "fs", config.ServerEntry{Command: "node", Args: []string{peerScript(dir, "server-filesystem"), root}}, quiet()).Transport, "")
		if got := callText(t, cs, "read_text_file", map[string]any{"path": filepath.Join(root, "note.txt")}); got != "hello from disk" {
			t.Errorf("read_text_file = %q", got)
		}
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		store := filepath.Join(t.TempDir(), "memory.jsonl")
		cs := connect(t, resolve(t, "memory", config.ServerEntry{Command: "node", Args: []string{peerScript(dir, "server-memory")},
			Env: map[string]any{"MEMORY_FILE_PATH": store}}, quiet()).Transport, "")
		callText(t, cs, "create_entities", map[string]any{"entities": []any{
			map[string]any{"name": "gopher", "entityType": "animal", "observations": []any{"likes wasm"}}}})
		if got := callText(t, cs, "read_graph", nil); !strings.Contains(got, "likes wasm") {
			t.Errorf("read_graph = %q", got)
		}
		if b, err := os.ReadFile(store); err != nil || !strings.Contains(string(b), "gopher") {
			t.Errorf("MEMORY_FILE_PATH (from the entry's env) not used: %q, %v", b, err)
		}
	})
}

// startMisbehaveHTTP runs testdata/misbehave in HTTP mode and returns its URL.
func startMisbehaveHTTP(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(misbehaveBin, append([]string{"-http", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "listening "))
}

func TestStreamableStaleSessionIsRenewed(t *testing.T) {
	t.Parallel()
	url := startMisbehaveHTTP(t, "-expire-after", "2")
	log, lb := newLogger()
	cs := connect(t, resolve(t, "forgetful", config.ServerEntry{URL: url, Transport: "streamable-http"}, &Options{Logger: log}).Transport, "2025-11-25")
	for i, want := range []string{"echo:1", "echo:2", "echo:3 after the 404", "echo:4"} {
		if got := callText(t, cs, "echo", map[string]any{"text": strings.TrimPrefix(want, "echo:")}); got != want {
			t.Fatalf("call %d = %q, want %q", i+1, got, want)
		}
	}
	if n := strings.Count(lb.String(), "started a new session"); n != 1 {
		t.Errorf("%d renewals logged, want 1:\n%s", n, lb.String())
	}
	// The renewed session keeps working for lists too, and a second expiry is renewed again.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("ListTools after renewal: %v", err)
	}
	if got := callText(t, cs, "echo", map[string]any{"text": "5"}); got != "echo:5" {
		t.Fatalf("call 5 = %q", got)
	}
	if n := strings.Count(lb.String(), "started a new session"); n != 2 {
		t.Errorf("%d renewals logged, want 2", n)
	}
}

func TestStreamableWithoutRenewalLosesTheCall(t *testing.T) {
	// The baseline this package fixes: go-sdk's own client ends the session
	// on the 404, so the call fails.
	t.Parallel()
	url := startMisbehaveHTTP(t, "-expire-after", "1")
	cs := connect(t, &mcp.StreamableClientTransport{Endpoint: url}, "2025-11-25")
	callText(t, cs, "echo", map[string]any{"text": "1"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "2"}}); err == nil {
		t.Fatal("plain go-sdk client survived a 404; the renewal test proves nothing")
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files.
type testPKI struct {
	pool                  *x509.CertPool
	server                tls.Certificate
	clientCert, clientKey string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &testPKI{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	issue := func(serial int64, usage x509.ExtKeyUsage, ip net.IP) ([]byte, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		if ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	sDER, sKey := issue(2, x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	p.server = tls.Certificate{Certificate: [][]byte{sDER}, PrivateKey: sKey}
	cDER, cKey := issue(3, x509.ExtKeyUsageClientAuth, nil)
	keyDER, _ := x509.MarshalECPrivateKey(cKey)
	p.clientCert = filepath.Join(dir, "client.pem")
	p.clientKey = filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(p.clientCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.clientKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// headerLog records the headers of requests to a test server.
type headerLog struct {
	mu   sync.Mutex
	seen []http.Header
}

func (h *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Clone())
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (h *headerLog) all(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, hd := range h.seen {
		out = append(out, hd.Get(key))
	}
	return out
}

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tls-echo", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	return s
}

func TestHTTPHeadersTLSAndClientCertificates(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	f, tr := false, true
	lookup := func(k string) (string, bool) {
		if k == "MCP_TOKEN" {
			return "s3cr3t-token", true
		}
		return "", false
	}
	for _, tc := range []struct {
		name        string
		kind        Kind
		requireMTLS bool
		entry       func(url string) config.ServerEntry
		wantErr     string
	}{
		{"streamable verified by default fails on an unknown CA", KindStreamableHTTP, false,
			func(u string) config.ServerEntry { return config.ServerEntry{URL: u, Transport: "streamable-http"} }, "certificate"},
		{"streamable sslVerify true fails on an unknown CA", KindStreamableHTTP, false,
			func(u string) config.ServerEntry {
				return config.ServerEntry{URL: u, Transport: "streamable-http", SSLVerify: &tr}
			}, "certificate"},
		{"streamable sslVerify false with env header", KindStreamableHTTP, false,
			func(u string) config.ServerEntry {
				return config.ServerEntry{URL: u, Transport: "streamable-http", SSLVerify: &f,
					Headers: map[string]any{"Authorization": "Bearer ${MCP_TOKEN}", "X-Tenant": 42.0}}
			}, ""},
		{"sse sslVerify false with env header", KindSSE, false,
			func(u string) config.ServerEntry {
				return config.ServerEntry{URL: u, SSLVerify: &f, Headers: map[string]any{"Authorization": "Bearer ${MCP_TOKEN}", "X-Tenant": 42.0}}
			}, ""},
		{"mTLS without a client certificate fails", KindStreamableHTTP, true,
			func(u string) config.ServerEntry {
				return config.ServerEntry{URL: u, Transport: "streamable-http", SSLVerify: &f}
			}, "certificate"},
		{"mTLS with a client certificate", KindStreamableHTTP, true,
			func(u string) config.ServerEntry {
				return config.ServerEntry{URL: u, Transport: "streamable-http", SSLVerify: &f, ClientCert: pki.clientCert, ClientKey: pki.clientKey,
					Headers: map[string]any{"Authorization": "Bearer ${MCP_TOKEN}", "X-Tenant": 42.0}}
			}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h http.Handler
			if tc.kind == KindSSE {
				h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
			} else {
				h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
			}
			hl := &headerLog{}
			srv := httptest.NewUnstartedServer(hl.wrap(h))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}}
			if tc.requireMTLS {
				srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
				srv.TLS.ClientCAs = pki.pool
			}
			srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
			srv.StartTLS()
			t.Cleanup(srv.Close)
			path := "/mcp"
			if tc.kind == KindSSE {
				path = "/sse"
			}
			log, lb := newLogger()
			r := resolve(t, "tls", tc.entry(srv.URL+path), &Options{Logger: log, LookupEnv: lookup})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
			cs, err := c.Connect(ctx, r.Transport, nil)
			if tc.wantErr != "" {
				if err == nil {
					cs.Close()
					t.Fatal("Connect succeeded")
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Connect err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer cs.Close()
			if got := callText(t, cs, "echo", nil); got != "ok" {
				t.Errorf("echo = %q", got)
			}
			if tc.entry("").Headers != nil {
				for i, a := range hl.all("Authorization") {
					if a != "Bearer s3cr3t-token" {
						t.Errorf("request %d Authorization = %q", i, a)
					}
				}
				for i, a := range hl.all("X-Tenant") {
					if a != "42" {
						t.Errorf("request %d X-Tenant = %q", i, a)
					}
				}
			}
			if strings.Contains(lb.String(), "s3cr3t") {
				t.Errorf("token in log: %s", lb.String())
			}
		})
	}
}

func TestHTTPTimeouts(t *testing.T) {
	t.Parallel()
	// A TCP listener that accepts and never answers: TLS never completes.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// An HTTP server that never sends response headers.
	// (The handler does not read a POST body, so net/http cannot see the
	// client leave; release ends it before Close waits for it.)
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(stall.Close)
	t.Cleanup(func() { close(release) })
	stall.Config.ErrorLog = stdlog.New(io.Discard, "", 0)

	for _, tc := range []struct {
		name  string
		entry config.ServerEntry
		want  string
	}{
		{"connectionTimeoutMs bounds the TLS handshake",
			config.ServerEntry{URL: "https://" + silent.Addr().String() + "/mcp", Transport: "streamable-http", ConnectionTimeoutMs: 200}, "TLS handshake timeout"},
		{"requestTimeoutMs bounds the wait for response headers",
			config.ServerEntry{URL: stall.URL + "/mcp", Transport: "streamable-http", RequestTimeoutMs: 200}, "timeout awaiting response headers"},
		{"requestTimeoutMs on SSE",
			config.ServerEntry{URL: stall.URL + "/sse", RequestTimeoutMs: 200}, "timeout awaiting response headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := resolve(t, "slow", tc.entry, quiet())
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
			cs, err := c.Connect(ctx, r.Transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err == nil {
				cs.Close()
				t.Fatal("Connect succeeded")
			}
			if ctx.Err() != nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Connect = %v (ctx %v), want %q", err, ctx.Err(), tc.want)
			}
		})
	}
}

// TestEmptySecretIsNotSent resolves a header `Authorization: Bearer
// ${MY_TOKEN}` with MY_TOKEN set but empty or blank: resolution must fail
// naming the variable, the server and the header, and no request may reach
// the server (a blank credential is never sent).
func TestEmptySecretIsNotSent(t *testing.T) {
	t.Parallel()
	for _, val := range []string{"", "   ", "\t\n"} {
		t.Run(fmt.Sprintf("%q", val), func(t *testing.T) {
			t.Parallel()
			hl := &headerLog{}
			srv := httptest.NewServer(hl.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)))
			t.Cleanup(srv.Close)
			lookup := func(k string) (string, bool) {
				if k == "MY_TOKEN" {
					return val, true
				}
				return "", false
			}
			e := config.ServerEntry{URL: srv.URL + "/mcp", Transport: "streamable-http",
				Headers: map[string]any{"Authorization": "Bearer ${MY_TOKEN}"}}
			r, err := Resolve("blank", e, &Options{Logger: slog.New(slog.DiscardHandler), LookupEnv: lookup})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				cs, cerr := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, r.Transport, nil)
				if cerr == nil {
					cs.Close()
				}
				t.Errorf("Resolve accepted MY_TOKEN=%q; the server then received Authorization %q", val, hl.all("Authorization"))
				return
			}
			for _, want := range []string{"MY_TOKEN", `"blank"`, `"Authorization"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Resolve error %q does not name %s", err, want)
				}
			}
			if n := len(hl.all("Authorization")); n != 0 {
				t.Errorf("%d requests reached the server", n)
			}
		})
	}
}
