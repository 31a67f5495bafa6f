package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/transport"
)

// DefaultMaxMessageBytes is the default cap on one message a client sends
// the proxy, on every surface: an HTTP POST body on /mcp or /sse, a stdio
// line. It is go-sdk's stdio default (16 MiB); go-sdk's HTTP handlers
// default to 4 MiB, which the proxy overrides.
const DefaultMaxMessageBytes = mcp.DefaultMaxLineLength

// batchlessRevision is the first MCP revision without JSON-RPC batches.
const batchlessRevision = "2025-06-18"

// checkFrames reads and checks the body of every POST before next (go-sdk's
// streamable or SSE handler) sees it, answering what it refuses with a
// JSON-RPC error object (application/json) and nothing run:
//
//   - a body over max bytes: 413, with the request's id when its start
//     names one, code transport.CodeMessageTooLarge;
//   - a body that is not exactly one JSON-RPC message (transport.DecodeFrame:
//     trailing bytes, a null request id, invalid JSON…): 400, id null,
//     -32700 or -32600. On /mcp a batch (array) of valid messages passes
//     only on a revision before 2025-06-18, which had batches;
//   - on /mcp, for a session-bearing revision (before 2026-07-28), a POST
//     without Mcp-Session-Id whose message is not initialize: 400, -32600,
//     with the request's id (go-sdk would open a session for it and answer
//     200 with an error of code 0).
//
// go-sdk's jsonrpc.DecodeMessage takes the first JSON value of a body and
// ignores what follows, and answers the other cases in plain text.
func (h *HTTPHandler) checkFrames(sse bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		// The headers are in; the body has BodyTimeout to follow. The
		// deadline is lifted once it is read: a streamed answer may last.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(h.limits.BodyTimeout))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
		if err != nil {
			endBody(w) // what is left of the body is not read
		} else {
			_ = rc.SetReadDeadline(time.Time{})
		}
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			writeRPCError(w, http.StatusRequestTimeout, transport.PeekFrameID(body), jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("request timeout: the body did not arrive within %v (--body-timeout)", h.limits.BodyTimeout))
			return
		}
		if err != nil {
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, transport.PeekFrameID(body), transport.CodeMessageTooLarge,
					fmt.Sprintf("message too large: the request body is over the %d-byte limit of this proxy (--max-message-bytes)", h.maxBody))
				return
			}
			writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: reading the request body: "+err.Error())
			return
		}
		// Ill-formed UTF-8 is repaired here, as Node.js decodes a body, so
		// that the policy, the audit log and the upstream see one value.
		body = transport.RepairUTF8(body)
		version := r.Header.Get("Mcp-Protocol-Version")
		msgs, ferr := decodeBody(body, !sse && version < batchlessRevision)
		if ferr != nil {
			writeRPCError(w, http.StatusBadRequest, jsonrpc.ID{}, ferr.Code, ferr.Error())
			return
		}
		if h.refuseCallScope(w, r, msgs) {
			return
		}
		if id, method, bad := taskNameMismatch(r, msgs); bad {
			writeRPCError(w, http.StatusBadRequest, id, CodeHeaderMismatch,
				fmt.Sprintf("Bad Request: the Mcp-Name header is not the params.taskId of %s", method))
			return
		}
		if !sse && version < sessionlessRevision && r.Header.Get("Mcp-Session-Id") == "" {
			if id, method, ok := needsSession(msgs); ok {
				writeRPCError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("Bad Request: %s needs the Mcp-Session-Id header of a session; send initialize first to start one", method))
				return
			}
		}
		if !sse && (version >= sessionlessRevision || r.Header.Get("Mcp-Session-Id") == "") && h.refuseDraining(w, firstRequestID(msgs)) {
			return // a new session, or a sessionless request: another replica takes it
		}
		if !sse && version < sessionlessRevision && r.Header.Get("Mcp-Session-Id") == "" {
			// An initialize (needsSession passed it): a new session.
			if !h.admitSession(true) {
				writeTooManySessions(w, firstRequestID(msgs), h.limits.MaxSessions)
				return
			}
			defer h.sessionOpened()
		}
		if sid := r.URL.Query().Get("sessionid"); sse && sid != "" {
			h.watchCancelSSE(sid, msgs)
		}
		if sid := r.Header.Get("Mcp-Session-Id"); !sse && sid != "" {
			var done func()
			w, done = h.watchCancel(w, sid, msgs)
			defer done()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// decodeBody decodes a POST body as one message (transport.DecodeFrame),
// or, when batches are allowed, as a JSON array of such messages.
func decodeBody(body []byte, batches bool) ([]jsonrpc.Message, *transport.FrameError) {
	m, err := transport.DecodeFrame(body)
	if err == nil {
		return []jsonrpc.Message{m}, nil
	}
	fe := err.(*transport.FrameError)
	if !fe.Batch {
		return nil, fe
	}
	if !batches {
		fe.Reason = "JSON-RPC batches are not part of MCP from revision " + batchlessRevision + " on; send one message per request"
		return nil, fe
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil || len(raws) == 0 {
		return nil, &transport.FrameError{Code: jsonrpc.CodeInvalidRequest, Batch: true, Reason: "an empty batch"}
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for i, raw := range raws {
		m, err := transport.DecodeFrame(raw)
		if err != nil {
			e := err.(*transport.FrameError)
			e.Reason = fmt.Sprintf("batch element %d: %s", i, e.Reason)
			return nil, e
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// needsSession reports whether msgs, sent without a session, hold no
// initialize: the first request's id and method then name the refusal.
// server/discover (a 2026-07-28 client's probe) is answered without a
// session, as go-sdk does.
func needsSession(msgs []jsonrpc.Message) (jsonrpc.ID, string, bool) {
	var first *jsonrpc.Request
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		if !ok {
			continue
		}
		if req.Method == "initialize" || req.Method == "server/discover" {
			return jsonrpc.ID{}, "", false
		}
		if first == nil {
			first = req
		}
	}
	if first == nil {
		return jsonrpc.ID{}, "a response", true
	}
	return first.ID, first.Method, true
}

// watchCancel notes the cancellations msgs carry for requests in flight on
// session sid, and, when msgs is one request, returns a writer for its
// stream that leaves out the answer once the client cancelled it (a
// cancelled request gets no answer, MCP cancellation; go-sdk writes one).
// done forgets the request.
func (h *HTTPHandler) watchCancel(w http.ResponseWriter, sid string, msgs []jsonrpc.Message) (http.ResponseWriter, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noteCancelsLocked(sid, msgs)
	req, ok := msgs[0].(*jsonrpc.Request)
	if len(msgs) != 1 || !ok || !req.IsCall() {
		return w, func() {}
	}
	key := callKey{sid, req.ID}
	h.calls[key] = false
	return &cancelAwareWriter{ResponseWriter: w, h: h, key: key}, func() {
		h.mu.Lock()
		delete(h.calls, key)
		h.mu.Unlock()
	}
}

// noteCancelsLocked marks the requests in flight on session sid that msgs
// cancel. h.mu is held.
func (h *HTTPHandler) noteCancelsLocked(sid string, msgs []jsonrpc.Message) {
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok {
			if id, ok := transport.CancelledID(req); ok {
				if _, inFlight := h.calls[callKey{sid, id}]; inFlight {
					h.calls[callKey{sid, id}] = true
				}
			}
		}
	}
}

// sseCallSession is the key prefix of the requests of a legacy SSE
// session in HTTPHandler.calls (go-sdk's SSE and streamable session ids
// are drawn alike).
const sseCallSession = "sse:"

// watchCancelSSE notes the message of a POST to legacy SSE session sid:
// a request is in flight until its answer passes on the session's GET
// stream (sseWriter), which leaves the answer out once the client
// cancelled the request; a cancellation marks the request it names.
func (h *HTTPHandler) watchCancelSSE(sid string, msgs []jsonrpc.Message) {
	sid = sseCallSession + sid
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noteCancelsLocked(sid, msgs)
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			h.calls[callKey{sid, req.ID}] = false
		}
	}
}

// cancelAwareWriter drops the SSE event that answers key.id once the
// client cancelled that request.
type cancelAwareWriter struct {
	http.ResponseWriter
	h   *HTTPHandler
	key callKey
}

func (c *cancelAwareWriter) Write(b []byte) (int, error) {
	c.h.mu.Lock()
	cancelled := c.h.calls[c.key]
	c.h.mu.Unlock()
	if cancelled && answers(b, c.key.id) {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the Flusher.
func (c *cancelAwareWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// answers reports whether the SSE event (or JSON body) b is the response
// to request id.
func answers(b []byte, id jsonrpc.ID) bool {
	got, ok := answered(b)
	return ok && got == id
}

// answered returns the id of the response that the SSE event (or JSON
// body) b carries, if it carries one.
func answered(b []byte) (jsonrpc.ID, bool) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		data := bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data:")))
		if len(data) == 0 || data[0] != '{' {
			continue
		}
		var m struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		if json.Unmarshal(data, &m) != nil || m.Method != "" {
			continue
		}
		if got, err := jsonrpc.MakeID(m.ID); err == nil && got.IsValid() {
			return got, true
		}
	}
	return jsonrpc.ID{}, false
}

// firstRequestID is the id of the first request in msgs (null if none).
func firstRequestID(msgs []jsonrpc.Message) jsonrpc.ID {
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			return req.ID
		}
	}
	return jsonrpc.ID{}
}

// writeRPCError answers an HTTP request with status and a JSON-RPC error
// response to id (null when not valid).
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(transport.EncodeErrorReply(id, code, message)) // a client that left misses it
}
