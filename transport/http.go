package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openclaw-go/openclaw/config"
)

// idleConnTimeout is how long an idle HTTP connection to an MCP server is
// kept: under the 5 s after which Node servers close theirs.
const idleConnTimeout = 4 * time.Second

const (
	sessionIDHeader       = "Mcp-Session-Id"
	protocolVersionHeader = "Mcp-Protocol-Version"
)

// newHTTPClient builds the HTTP client of one SSE or streamable server: dial
// and TLS handshake bounded by the connection timeout, response headers by
// the request timeout, certificate verification per sslVerify, an optional
// client certificate, the entry's headers on every request, for
// streamable HTTP renewal of a session the server forgot (HTTP 404) and,
// for auth "oauth", the OAuth access token (oauth.go).
func newHTTPClient(name string, e config.ServerEntry, headers map[string]string, r *Resolved, log *slog.Logger, o *Options) (*http.Client, error) {
	base, err := newBaseTransport(name, e, r)
	if err != nil {
		return nil, err
	}
	var wire http.RoundTripper = base
	if e.Auth == "oauth" {
		st, err := newOAuthState(name, e.URL, base, headers, o.OAuth, o.LookupEnv, log)
		if err != nil {
			return nil, err
		}
		wire = &oauthRoundTripper{base: base, state: st}
	}
	rt := &headerRoundTripper{
		base:    wire,
		headers: headers,
		renew:   r.Kind == KindStreamableHTTP,
		log:     log,
		aliases: map[string]string{},
	}
	return &http.Client{Transport: ListPages(rt)}, nil
}

// newBaseTransport is the HTTP transport of one server: timeouts, TLS
// verification and the client certificate of its entry.
func newBaseTransport(name string, e config.ServerEntry, r *Resolved) (*http.Transport, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.SSLVerify != nil && !*e.SSLVerify {
		tlsConf.InsecureSkipVerify = true // the operator's explicit sslVerify:false
	}
	if (e.ClientCert == "") != (e.ClientKey == "") {
		return nil, fmt.Errorf("server %q: clientCert and clientKey must be set together", name)
	}
	if e.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(e.ClientCert, e.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("server %q: loading client certificate %s / key %s: %w", name, e.ClientCert, e.ClientKey, err)
		}
		tlsConf.Certificates = []tls.Certificate{cert}
	}
	dialer := &net.Dialer{Timeout: r.ConnectTimeout}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   r.ConnectTimeout,
		ResponseHeaderTimeout: r.RequestTimeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   8,
		// Node's http.Server closes a keep-alive connection after 5 s idle
		// (keepAliveTimeout); a request sent on it as it closes fails with
		// "connection reset by peer", and a POST is not retried. Dropping
		// idle connections first avoids that race.
		IdleConnTimeout: idleConnTimeout,
	}, nil
}

// headerRoundTripper adds the configured headers and renews stale
// streamable HTTP sessions.
//
// Session renewal: the go-sdk streamable client treats a 404 for its session
// as the end of the connection, and the caller's request is lost. Here the
// initialize request of the session (a POST without a session ID whose
// method is "initialize") is remembered; when a request carrying session ID
// S gets 404, the round tripper replays initialize and
// notifications/initialized to obtain a new session S', retries the same
// request with S', and from then on sends S' wherever the client says S and
// reports S back in responses. The go-sdk connection never notices; the
// server sees a new session, so its per-session state (subscriptions, log
// level) starts afresh, which the log line says.
type headerRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	renew   bool
	log     *slog.Logger

	mu       sync.Mutex
	initBody []byte            // body of the last initialize POST
	aliases  map[string]string // session ID the client knows → the live one
}

// RoundTrip implements http.RoundTripper.
func (t *headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.roundTrip(req)
}

// roundTrip sends req (its headers set) and, for streamable HTTP, renews
// a session the server forgot.
func (t *headerRoundTripper) roundTrip(req *http.Request) (*http.Response, error) {
	if !t.renew {
		return t.base.RoundTrip(req)
	}
	known := req.Header.Get(sessionIDHeader)
	// The body is read here only when it may be an initialize request (no
	// session yet) or could not be replayed otherwise.
	var body []byte
	if req.Body != nil && req.Method == http.MethodPost && (known == "" || req.GetBody == nil) {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if known == "" && body != nil && isInitialize(body) {
		t.mu.Lock()
		t.initBody = body
		t.mu.Unlock()
	}
	live := t.live(known)
	if live != known {
		req.Header.Set(sessionIDHeader, live)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusNotFound || known == "" {
		return t.fixResponse(resp, known, live), err
	}
	newID, rerr := t.renewSession(req, live)
	if rerr != nil {
		t.log.Warn("transport: session expired (HTTP 404) and renewing it failed", "error", rerr)
		return resp, nil
	}
	drain(resp)
	retry := req.Clone(req.Context())
	retry.Header.Set(sessionIDHeader, newID)
	if body != nil {
		retry.Body = io.NopCloser(bytes.NewReader(body))
	} else if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("transport: replaying a request after renewing the session: %w", err)
		}
		retry.Body = b
	}
	resp, err = t.base.RoundTrip(retry)
	return t.fixResponse(resp, known, newID), err
}

// live maps a session ID the client knows to the one in use.
func (t *headerRoundTripper) live(known string) string {
	if known == "" {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.aliases[known]; ok {
		return id
	}
	return known
}

// fixResponse shows the client the session ID it knows.
func (t *headerRoundTripper) fixResponse(resp *http.Response, known, live string) *http.Response {
	if resp != nil && known != "" && live != known && resp.Header.Get(sessionIDHeader) == live {
		resp.Header.Set(sessionIDHeader, known)
	}
	return resp
}

// renewSession replaces the dead session `dead` by a new one, unless another
// request already did, and returns the live session ID.
func (t *headerRoundTripper) renewSession(orig *http.Request, dead string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur := t.currentFor(dead); cur != dead {
		return cur, nil // another request renewed it already
	}
	if t.initBody == nil {
		return "", fmt.Errorf("no initialize request recorded")
	}
	ctx := orig.Context()
	init, err := http.NewRequestWithContext(ctx, http.MethodPost, orig.URL.String(), bytes.NewReader(t.initBody))
	if err != nil {
		return "", err
	}
	copyHeaders(init.Header, orig.Header)
	init.Header.Del(sessionIDHeader)
	init.Header.Del(protocolVersionHeader)
	init.Header.Set("Accept", "application/json, text/event-stream")
	init.Header.Set("Content-Type", "application/json")
	resp, err := t.base.RoundTrip(init)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	newID := resp.Header.Get(sessionIDHeader)
	ok := resp.StatusCode == http.StatusOK && readInitializeResult(resp.Body)
	drain(resp)
	if !ok || newID == "" {
		return "", fmt.Errorf("initialize: HTTP %d, session ID present: %t", resp.StatusCode, newID != "")
	}
	note, err := http.NewRequestWithContext(ctx, http.MethodPost, orig.URL.String(),
		strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`))
	if err != nil {
		return "", err
	}
	copyHeaders(note.Header, orig.Header)
	note.Header.Set(sessionIDHeader, newID)
	note.Header.Set("Accept", "application/json, text/event-stream")
	note.Header.Set("Content-Type", "application/json")
	nresp, err := t.base.RoundTrip(note)
	if err != nil {
		return "", fmt.Errorf("notifications/initialized: %w", err)
	}
	drain(nresp)
	if nresp.StatusCode/100 != 2 {
		return "", fmt.Errorf("notifications/initialized: HTTP %d", nresp.StatusCode)
	}
	for k, v := range t.aliases {
		if v == dead {
			t.aliases[k] = newID
		}
	}
	t.aliases[dead] = newID
	t.log.Warn("transport: the server forgot our session (HTTP 404); started a new session and resent the request (server-side session state starts afresh)")
	return newID, nil
}

// currentFor follows aliases from id; the caller holds t.mu.
func (t *headerRoundTripper) currentFor(id string) string {
	if v, ok := t.aliases[id]; ok {
		return v
	}
	return id
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}

func drain(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	}
}

func isInitialize(body []byte) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &m) == nil && m.Method == "initialize"
}

// readInitializeResult reads a JSON or SSE body up to the first JSON-RPC
// message and reports whether it is a result (not an error).
func readInitializeResult(body io.Reader) bool {
	br := bufio.NewReaderSize(io.LimitReader(body, 4<<20), 64<<10)
	first, err := br.Peek(1)
	if err != nil {
		return false
	}
	isResult := func(b []byte) bool {
		var m struct {
			Result json.RawMessage `json:"result"`
		}
		return json.Unmarshal(b, &m) == nil && len(m.Result) > 0
	}
	if first[0] == '{' {
		b, _ := io.ReadAll(br)
		return isResult(b)
	}
	for {
		line, err := br.ReadString('\n')
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok {
			if d := strings.TrimSpace(data); d != "" {
				return isResult([]byte(d))
			}
		}
		if err != nil {
			return false
		}
	}
}

// SSETransport is go-sdk's legacy SSE client transport (protocol 2024-11-05)
// with one fix: go-sdk ties the event stream to the context given to
// Connect, so a caller that bounds Connect with a timeout, as it should,
// sees the session die when that context ends. Here ctx bounds only the
// connection attempt; the stream lives until the connection is closed.
type SSETransport struct {
	mcp.SSEClientTransport
}

// Connect opens the event stream and waits for the endpoint event, both
// bounded by ctx.
func (t *SSETransport) Connect(ctx context.Context) (mcp.Connection, error) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	conn, err := t.SSEClientTransport.Connect(life)
	if !stop() {
		if err == nil {
			conn.Close()
		}
		cancel()
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &sseConn{Connection: conn, cancel: cancel}, nil
}

// sseConn ends the event stream's context when the connection closes.
type sseConn struct {
	mcp.Connection
	cancel context.CancelFunc
}

// Close closes the connection and ends its event stream.
func (c *sseConn) Close() error {
	err := c.Connection.Close()
	c.cancel()
	return err
}
