package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"
)

// ListPage is one MCP list request (tools/list, resources/list,
// resources/templates/list, prompts/list) as a client pages it: go-sdk's
// typed params omit an empty cursor, and its typed results cannot tell an
// absent nextCursor from "". The client's own connection wrapper writes
// the request and reads the result through a ListPage; over streamable
// HTTP, where go-sdk's connection cannot be wrapped, the HTTP transport
// of ListPages does it for the request whose context carries one
// (WithListPage). Its methods are safe for concurrent use.
type ListPage struct {
	// EmptyCursor makes the request carry "cursor":"" (the cursor "" a
	// server handed out), which go-sdk would leave out.
	EmptyCursor bool
	// Repair, when set, may rewrite the page's result before go-sdk
	// decodes it: it returns the result to decode instead, or nil to keep
	// the result as it is. Over streamable HTTP the response's message
	// that carries the result is held back until it is complete (the whole
	// JSON body, or its event of the stream).
	Repair func(result []byte) []byte

	mu   sync.Mutex
	read bool // the result's nextCursor was read from the wire
	has  bool // it is present (a string)
	next string
}

type listPageKey struct{}

// WithListPage returns ctx carrying p for the list request sent under it.
func WithListPage(ctx context.Context, p *ListPage) context.Context {
	return context.WithValue(ctx, listPageKey{}, p)
}

func listPageFrom(ctx context.Context) *ListPage {
	p, _ := ctx.Value(listPageKey{}).(*ListPage)
	return p
}

// SetNextCursor records the result's nextCursor as read from the wire:
// next and whether it is present (a JSON string; absent or null is not).
func (p *ListPage) SetNextCursor(next string, present bool) {
	p.mu.Lock()
	p.read, p.next, p.has = true, next, present
	p.mu.Unlock()
}

// NextCursor returns the recorded nextCursor, whether it is present, and
// whether it was read from the wire at all (false: only go-sdk's decoded
// value is known, where "" means absent).
func (p *ListPage) NextCursor() (next string, present, read bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next, p.has, p.read
}

// WithEmptyCursor returns params (a list request's params: an object, or
// none) with "cursor":"" set first. Invalid params are returned as they
// are, for the server to refuse.
func WithEmptyCursor(params json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage(`{"cursor":""}`)
	}
	if trimmed[0] != '{' {
		return params
	}
	rest := bytes.TrimSpace(trimmed[1:])
	if len(rest) > 0 && rest[0] == '}' {
		return json.RawMessage(`{"cursor":""}`)
	}
	return append(json.RawMessage(`{"cursor":"",`), rest...)
}

// NextCursorOf reads the nextCursor member of a list result: its value and
// whether it is present as a string. ok is false when result is not a JSON
// object.
func NextCursorOf(result []byte) (next string, present, ok bool) {
	var m struct {
		NextCursor *string `json:"nextCursor"`
	}
	if json.Unmarshal(result, &m) != nil {
		return "", false, false
	}
	if m.NextCursor == nil {
		return "", false, true
	}
	return *m.NextCursor, true, true
}

// ListPages wraps base, the HTTP transport of a streamable HTTP MCP client,
// so that a list request whose context carries a ListPage (WithListPage)
// goes out with "cursor":"" when the page asks for it, and the nextCursor
// of its result is recorded in the page as the response body is read. The
// HTTP client Resolve builds has it; a client of go-sdk's
// StreamableClientTransport built elsewhere gets it this way. nil base is
// http.DefaultTransport.
func ListPages(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return listPageTripper{base: base}
}

type listPageTripper struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t listPageTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	page := listPageFrom(req.Context())
	if page == nil || req.Method != http.MethodPost {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	if err := listPageRequest(req, page); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	listPageResponse(resp, page)
	return resp, err
}

// listPageRequest prepares req, a POST of a list request under a
// ListPage, for the round trip: it adds "cursor":"" when the page asks
// for it. The body is read and replaced.
func listPageRequest(req *http.Request, p *ListPage) error {
	if !p.EmptyCursor || req.Body == nil {
		return nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return err
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) == nil {
		msg["params"] = WithEmptyCursor(msg["params"])
		if b, err := json.Marshal(msg); err == nil {
			body = b
		}
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	return nil
}

// listPageResponse wraps the body of resp, the answer to a list request
// under p, so that the result's nextCursor is recorded in p as its bytes
// pass to go-sdk: before go-sdk can decode the response, whether it is a
// JSON body or an event stream.
func listPageResponse(resp *http.Response, p *ListPage) {
	if resp == nil || resp.Body == nil || resp.StatusCode != http.StatusOK {
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case (mt == "application/json" || mt == "text/event-stream") && p.Repair != nil:
		resp.Body = &repairBody{ReadCloser: resp.Body, page: p, sse: mt == "text/event-stream"}
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	case mt == "application/json" || mt == "text/event-stream":
		resp.Body = &listPageBody{ReadCloser: resp.Body, page: p, sse: mt == "text/event-stream"}
	}
}

// listPageBody is a response body that records the nextCursor of the first
// JSON-RPC result it carries: a JSON body when it ends, an event stream
// event by event.
type listPageBody struct {
	io.ReadCloser
	page *ListPage
	sse  bool
	buf  []byte // the JSON body so far, or the stream's unfinished line
	data []byte // the data lines of the current event
	done bool   // a result was seen
}

func (b *listPageBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.done {
		b.buf = append(b.buf, p[:n]...)
		if b.sse {
			b.lines()
		} else if err == io.EOF {
			b.message(b.buf)
			b.buf = nil
		}
	}
	return n, err
}

// lines handles the complete lines of the stream read so far.
func (b *listPageBody) lines() {
	for !b.done {
		i := bytes.IndexByte(b.buf, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimSuffix(b.buf[:i], []byte("\r"))
		b.buf = b.buf[i+1:]
		switch {
		case len(line) == 0: // the event ends
			if len(b.data) > 0 {
				b.message(b.data)
			}
			b.data = b.data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if len(b.data) > 0 {
				b.data = append(b.data, '\n')
			}
			b.data = append(b.data, d...)
		}
	}
	if b.done {
		b.buf, b.data = nil, nil
	}
}

// message records the nextCursor of msg when it is a JSON-RPC result (the
// answer: the requests and notifications of the stream have none).
func (b *listPageBody) message(msg []byte) {
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(msg, &m) != nil || len(m.Result) == 0 {
		return
	}
	b.done = true
	if next, present, ok := NextCursorOf(m.Result); ok {
		b.page.SetNextCursor(next, present)
	}
}

// repairBody is the response body of a list request whose ListPage has a
// Repair function: the message carrying the result (the JSON body, or the
// event of the stream) is held back until it is complete, goes through
// Repair, and its nextCursor is recorded; everything else passes as it
// comes.
type repairBody struct {
	io.ReadCloser
	page *ListPage
	sse  bool
	in   []byte // read, not yet handed out
	out  []byte // ready to hand out
	done bool   // the result was seen: the rest passes through
	err  error  // the underlying body's error (io.EOF at its end)
	buf  [4096]byte
}

func (b *repairBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		n, err := b.ReadCloser.Read(b.buf[:])
		b.in = append(b.in, b.buf[:n]...)
		b.err = err
		b.process(err != nil)
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// process moves what can be handed out from in to out; end says the body
// ended.
func (b *repairBody) process(end bool) {
	switch {
	case b.done:
		b.out, b.in = append(b.out, b.in...), b.in[:0]
	case !b.sse:
		if end {
			b.out, b.in = append(b.out, b.repaired(b.in)...), nil
		}
	default:
		b.events(end)
	}
}

// events hands out each complete event of the stream, the one carrying
// the result repaired.
func (b *repairBody) events(end bool) {
	for !b.done {
		n := eventEnd(b.in)
		if n < 0 {
			break
		}
		b.out = append(b.out, b.event(b.in[:n])...)
		b.in = b.in[n:]
	}
	if b.done || end {
		b.out, b.in = append(b.out, b.in...), b.in[:0]
	}
}

// eventEnd returns the length of the first complete event of an event
// stream (its blank line included), or -1.
func eventEnd(in []byte) int {
	for i := 0; i < len(in); {
		j := bytes.IndexByte(in[i:], '\n')
		if j < 0 {
			return -1
		}
		line := bytes.TrimSuffix(in[i:i+j], []byte("\r"))
		i += j + 1
		if len(line) == 0 {
			return i
		}
	}
	return -1
}

// event returns ev, one event of the stream, with its data repaired when
// it is the result's message.
func (b *repairBody) event(ev []byte) []byte {
	var data []byte
	var other [][]byte
	for line := range bytes.Lines(ev) {
		l := bytes.TrimRight(line, "\r\n")
		if d, ok := bytes.CutPrefix(l, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		} else if len(l) > 0 {
			other = append(other, l)
		}
	}
	if len(data) == 0 {
		return ev
	}
	fixed := b.repaired(data)
	if !b.done || bytes.Equal(fixed, data) {
		return ev
	}
	out := make([]byte, 0, len(ev)+len(fixed)-len(data))
	for _, l := range other {
		out = append(append(out, l...), '\n')
	}
	return append(append(append(out, "data: "...), fixed...), "\n\n"...)
}

// repaired returns msg, a JSON-RPC message, with its result through
// Repair, and records its nextCursor; a message with no result (a request
// or notification of the stream) is returned as it is.
func (b *repairBody) repaired(msg []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || len(m["result"]) == 0 {
		return msg
	}
	b.done = true
	result := []byte(m["result"])
	if fixed := b.page.Repair(result); fixed != nil {
		m["result"] = fixed
		if out, err := json.Marshal(m); err == nil {
			msg, result = out, fixed
		}
	}
	if next, present, ok := NextCursorOf(result); ok {
		b.page.SetNextCursor(next, present)
	}
	return msg
}
