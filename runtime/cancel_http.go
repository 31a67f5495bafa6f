package runtime

// notifications/cancelled over streamable HTTP.
//
// go-sdk's streamable HTTP connection cannot be wrapped (see conn.connect),
// so cancelConn does not see its messages; its HTTP requests are seen
// instead. cancelTripper notes each POST of a call, and when the call's
// request context ends before its response came (on the POST's stream or
// as its JSON body), it POSTs the call's notifications/cancelled itself,
// with the session's headers. go-sdk's own notice for the same call is then
// answered 202 without being sent, and the DELETE that closes the session
// waits for the notices being written.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withStreamableHTTP returns a copy of a *mcp.StreamableClientTransport
// whose HTTP client's transport is wrap(its transport) (nil is
// http.DefaultTransport); any other transport is returned as is. It is how
// the runtime reaches the messages of go-sdk's streamable HTTP connection,
// which cannot be wrapped (conn.connect).
func withStreamableHTTP(tr mcp.Transport, wrap func(http.RoundTripper) http.RoundTripper) mcp.Transport {
	st, ok := tr.(*mcp.StreamableClientTransport)
	if !ok || st == nil {
		return tr
	}
	hc := http.Client{}
	if st.HTTPClient != nil {
		hc = *st.HTTPClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = wrap(base)
	cp := *st
	cp.HTTPClient = &hc
	return &cp
}

// newCancelTripper returns base sending the notifications/cancelled of
// the calls POSTed through it (cancelTripper).
func newCancelTripper(base http.RoundTripper) http.RoundTripper {
	return &cancelTripper{base: base, calls: map[string]*httpCall{}, noticed: map[string]bool{}}
}

// httpCall is a call POSTed and not yet answered.
type httpCall struct {
	url    string
	header http.Header
	ctx    context.Context
	stop   func() bool
	end    *callEnd // the call context's, or nil
}

type cancelTripper struct {
	base http.RoundTripper

	mu      sync.Mutex
	calls   map[string]*httpCall // by the request id's JSON
	noticed map[string]bool      // a notice was sent: go-sdk's is not
	writing sync.WaitGroup
}

// RoundTrip notes calls, sends one notice per cancelled call, and lets a
// DELETE wait for the notices due.
func (t *cancelTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.Method == http.MethodDelete:
		t.flush()
	case req.Method == http.MethodPost && req.Body != nil && req.Body != http.NoBody:
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) != nil || m.Method == "" {
			break // a response to the server, or a batch: passed on
		}
		if m.Method == "notifications/cancelled" {
			key := string(m.Params.RequestID)
			t.mu.Lock()
			if t.noticed[key] {
				delete(t.noticed, key)
				t.mu.Unlock()
				return &http.Response{StatusCode: http.StatusAccepted, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
			}
			t.forgetLocked(key)
			t.noticed[key] = true
			t.writing.Add(1)
			t.mu.Unlock()
			defer t.writing.Done()
			break
		}
		if len(m.ID) == 0 || string(m.ID) == "null" {
			break
		}
		key := string(m.ID)
		ctx := req.Context()
		hc := &httpCall{url: req.URL.String(), header: req.Header.Clone(), ctx: ctx, end: callEndOf(ctx)}
		if hc.end != nil {
			hc.end.sent.Store(true)
		}
		t.mu.Lock()
		t.calls[key] = hc
		hc.stop = context.AfterFunc(ctx, func() { t.notice(key, ctx) })
		t.mu.Unlock()
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			t.settled(key)
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			t.settled(key) // refused: no call runs upstream
			return resp, nil
		}
		resp.Body = &answerWatch{ReadCloser: resp.Body, id: m.ID, settled: func() { t.settled(key) }}
		return resp, nil
	}
	return t.base.RoundTrip(req)
}

func (t *cancelTripper) forgetLocked(key string) {
	if hc, ok := t.calls[key]; ok {
		hc.stop()
		delete(t.calls, key)
		hc.end.finish()
	}
}

func (t *cancelTripper) settled(key string) {
	t.mu.Lock()
	t.forgetLocked(key)
	t.mu.Unlock()
}

// notice POSTs the cancellation of call key, unless it was answered or
// noticed already.
func (t *cancelTripper) notice(key string, ctx context.Context) {
	t.mu.Lock()
	hc, ok := t.calls[key]
	if !ok || t.noticed[key] {
		t.mu.Unlock()
		return
	}
	delete(t.calls, key)
	t.noticed[key] = true
	t.writing.Add(1)
	t.mu.Unlock()
	defer t.writing.Done()
	// The call's POST stream is gone with its context: its late answer
	// cannot be seen, so the call counts as ended once it is cancelled.
	defer hc.end.finish()
	r, _ := json.Marshal(cancelReason(ctx))
	body := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + key + `,"reason":` + string(r) + `}}`
	wctx, stop := context.WithTimeout(context.Background(), cancelNoticeTimeout)
	defer stop()
	req, err := http.NewRequestWithContext(wctx, http.MethodPost, hc.url, strings.NewReader(body))
	if err != nil {
		return
	}
	req.Header = hc.header.Clone()
	for k := range req.Header {
		if strings.HasPrefix(strings.ToLower(k), "mcp-") && !strings.EqualFold(k, "Mcp-Session-Id") && !strings.EqualFold(k, "Mcp-Protocol-Version") {
			req.Header.Del(k) // Mcp-Method, Mcp-Name, Mcp-Param-*: the call's
		}
	}
	req.Header.Set("Mcp-Method", "notifications/cancelled")
	if resp, err := t.base.RoundTrip(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// flush sends the notices of calls whose context has ended and waits for
// the notices being written (within cancelNoticeTimeout).
func (t *cancelTripper) flush() {
	t.mu.Lock()
	due := map[string]context.Context{}
	for key, hc := range t.calls {
		if hc.ctx.Err() != nil {
			due[key] = hc.ctx
		}
	}
	t.mu.Unlock()
	for key, ctx := range due {
		t.notice(key, ctx)
	}
	waitNotices(&t.writing)
}

// answerWatch passes a call's response body on, and reports when the
// response to id has gone by: a JSON body, or an SSE data line, that is a
// response (no method) with that id.
type answerWatch struct {
	io.ReadCloser
	id      json.RawMessage
	settled func()
	line    []byte
	done    bool
}

func (a *answerWatch) Read(p []byte) (int, error) {
	n, err := a.ReadCloser.Read(p)
	if !a.done {
		a.scan(p[:n], err != nil)
	}
	return n, err
}

func (a *answerWatch) scan(b []byte, end bool) {
	a.line = append(a.line, b...)
	for {
		i := bytes.IndexByte(a.line, '\n')
		if i < 0 {
			break
		}
		a.check(a.line[:i])
		a.line = a.line[i+1:]
	}
	if end {
		a.check(a.line)
		a.line = nil
	}
}

func (a *answerWatch) check(line []byte) {
	line = bytes.TrimSpace(line)
	line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data:")))
	if a.done || len(line) == 0 || line[0] != '{' {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &m) == nil && m.Method == "" && bytes.Equal(m.ID, a.id) {
		a.done = true
		a.settled()
	}
}
