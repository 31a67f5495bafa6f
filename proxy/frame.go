package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
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
//   - on /mcp, an Mcp-* header given more than once (repeatedMcpHeader):
//     400, CodeHeaderMismatch, with the request's id;
//   - on /mcp, for a session-bearing revision (before 2026-07-28), a POST
//     without Mcp-Session-Id whose message is not initialize: 400, -32600,
//     with the request's id (go-sdk would open a session for it and answer
//     200 with an error of code 0).
//
// go-sdk's jsonrpc.DecodeMessage takes the first JSON value of a body and
// ignores what follows, and answers the other cases in plain text. A body
// that passes is a stateless 2026-07-28 tools/call the lean path answers
// (serveLean, from the message decoded here), or goes on to next.
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
		if name, repeated := repeatedMcpHeader(r.Header); !sse && repeated {
			writeRPCError(w, http.StatusBadRequest, firstRequestID(msgs), CodeHeaderMismatch,
				fmt.Sprintf("Bad Request: the %s header is repeated; send it once", name))
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
		if !sse && version >= sessionlessRevision && h.serveLean(w, r, msgs) {
			return
		}
		if !sse {
			var done func()
			w, done = h.watchAnswer(w, r, msgs)
			defer done()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// repeatedMcpHeader returns the first (in name order) Mcp-* header that
// hdr holds more than once, in any case of letters (Mcp-Name,
// Mcp-Param-Region…). Only the first value is checked against the body,
// and an intermediary that routes or filters by another would act on a
// value the proxy never checked.
func repeatedMcpHeader(hdr http.Header) (first string, repeated bool) {
	for name, values := range hdr {
		if len(values) > 1 && strings.HasPrefix(name, "Mcp-") && (!repeated || name < first) {
			first, repeated = name, true
		}
	}
	return first, repeated
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

// watchAnswer returns the writer go-sdk answers a POST to /mcp on. When
// msgs is one request (not subscriptions/listen), it is an answerWriter:
// the answer goes out as application/json when nothing is streamed before
// it, and, on a session, is left out once the client cancelled the
// request (a cancelled request gets no answer, MCP cancellation; go-sdk
// writes one). On a session it also notes the cancellations msgs carry.
// done forgets the request.
func (h *HTTPHandler) watchAnswer(w http.ResponseWriter, r *http.Request, msgs []jsonrpc.Message) (http.ResponseWriter, func()) {
	sid := r.Header.Get("Mcp-Session-Id")
	req, ok := msgs[0].(*jsonrpc.Request)
	call := len(msgs) == 1 && ok && req.IsCall() && !isListen(r)
	if sid == "" {
		if !call {
			return w, func() {}
		}
		return &answerWriter{ResponseWriter: w, id: req.ID}, func() {}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noteCancelsLocked(sid, msgs)
	if !call {
		return w, func() {}
	}
	key := callKey{sid, req.ID}
	h.calls[key] = false
	return &answerWriter{ResponseWriter: w, id: req.ID, h: h, key: key}, func() {
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

// answerWriter is the response to a POST on /mcp that carries one
// request, id. go-sdk frames each message of the POST's stream as one SSE
// event, one Write each. When the first is the answer to id (nothing was
// streamed before it: no progress, log line or server request), it is
// written as an application/json body instead, with its Content-Length: a
// server may answer a POST with either, and a client must take both
// (streamable HTTP transport; go-sdk's handler has checked that Accept
// lists both). Otherwise the response stays an SSE stream. With h set,
// the answer is left out once the client cancelled the request
// (HTTPHandler.calls[key]).
type answerWriter struct {
	http.ResponseWriter
	id     jsonrpc.ID
	h      *HTTPHandler // nil: no cancellation to watch (no session)
	key    callKey
	stream bool // an SSE event passed: the response is a stream
	json   bool // the answer was written as the JSON body
}

// sseMessagePrefix and sseMessageSuffix frame a message as go-sdk writes
// it as an SSE event (without an event store: no id line).
const sseMessagePrefix, sseMessageSuffix = "event: message\ndata: ", "\n\n"

func (a *answerWriter) Write(b []byte) (int, error) {
	if a.json {
		return 0, errors.New("proxy: a write after the JSON answer")
	}
	data, isEvent := bytes.CutPrefix(b, []byte(sseMessagePrefix))
	if isEvent {
		data, isEvent = bytes.CutSuffix(data, []byte(sseMessageSuffix))
	}
	isEvent = isEvent && bytes.IndexByte(data, '\n') < 0
	var got jsonrpc.ID
	var isAnswer bool
	if isEvent {
		got, isAnswer = transport.ResponseID(data)
	} else {
		got, isAnswer = answered(b) // another framing: the answer is still found
	}
	isAnswer = isAnswer && got == a.id
	if isAnswer && a.cancelled() {
		return len(b), nil
	}
	if isEvent && isAnswer && !a.stream && a.Header().Get("Content-Type") == "text/event-stream" {
		hdr := a.Header()
		hdr.Set("Content-Type", "application/json")
		hdr.Del("Connection")
		hdr.Set("Content-Length", strconv.Itoa(len(data)))
		a.json = true
		if _, err := a.ResponseWriter.Write(data); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	a.stream = true
	return a.ResponseWriter.Write(b)
}

// cancelled reports whether the client cancelled the request.
func (a *answerWriter) cancelled() bool {
	if a.h == nil {
		return false
	}
	a.h.mu.Lock()
	defer a.h.mu.Unlock()
	return a.h.calls[a.key]
}

// FlushError flushes an SSE stream; a JSON answer is sent whole when the
// handler returns, with its Content-Length.
func (a *answerWriter) FlushError() error {
	if a.json {
		return nil
	}
	return http.NewResponseController(a.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// answered returns the id of the response that the SSE event (or JSON
// body) b carries, if it carries one.
func answered(b []byte) (jsonrpc.ID, bool) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		data := bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data:")))
		if id, ok := transport.ResponseID(data); ok {
			return id, true
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
