package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// A frame is the unit a transport hands over as one JSON-RPC message: one
// stdio line (without its line ending), one HTTP POST body. go-sdk's
// jsonrpc.DecodeMessage reads the first JSON value of its input and ignores
// what follows, so `{…},` or `{…}}` would pass as the message before the
// junk; every frame we read is checked here first, whole.

// FrameError reports a frame that is not exactly one JSON-RPC 2.0 message
// object.
type FrameError struct {
	// Code is the JSON-RPC error code to answer with:
	// jsonrpc.CodeParseError (-32700) for bytes that are not one JSON
	// value (trailing data included), jsonrpc.CodeInvalidRequest (-32600)
	// for JSON that is not one message object.
	Code int64
	// Reason says what is wrong with the frame, for logs and replies.
	Reason string
	// Batch reports a JSON array (a JSON-RPC batch).
	Batch bool
	// Response reports an object that looks like a response ("result" or
	// "error" and no "method"): a reader logs it, and never answers it.
	Response bool
}

// Error returns the reply's message: "Parse error: <reason>" or
// "Invalid Request: <reason>".
func (e *FrameError) Error() string {
	if e.Code == jsonrpc.CodeParseError {
		return "Parse error: " + e.Reason
	}
	return "Invalid Request: " + e.Reason
}

// DecodeFrame decodes frame, surrounding blanks aside, as exactly one
// JSON-RPC 2.0 message object. The error is a *FrameError when the frame
// is not valid JSON, holds more than one value or trailing bytes, is not an
// object (arrays are batches, which the MCP revisions from 2025-06-18 do not
// have), or is an object jsonrpc.DecodeMessage refuses; and also for a
// request whose "id" is null, which MCP forbids ("the ID MUST NOT be
// null") and which go-sdk would take for a notification, leaving it
// unanswered. The message may alias frame.
func DecodeFrame(frame []byte) (jsonrpc.Message, error) {
	msg := bytes.TrimSpace(frame)
	if len(msg) == 0 {
		return nil, &FrameError{Code: jsonrpc.CodeParseError, Reason: "empty message"}
	}
	if !json.Valid(msg) {
		var raw json.RawMessage
		reason := "not one JSON value"
		if err := json.Unmarshal(msg, &raw); err != nil {
			reason = err.Error()
		}
		return nil, &FrameError{Code: jsonrpc.CodeParseError, Reason: reason}
	}
	switch msg[0] {
	case '{':
	case '[':
		return nil, &FrameError{Code: jsonrpc.CodeInvalidRequest, Batch: true,
			Reason: "batches are not supported (a message must be one JSON-RPC message object)"}
	default:
		return nil, &FrameError{Code: jsonrpc.CodeInvalidRequest, Reason: "not a JSON-RPC message object"}
	}
	m, err := decodeMessage(msg)
	if err != nil {
		fe := &FrameError{Code: jsonrpc.CodeInvalidRequest, Reason: err.Error()}
		var keys map[string]json.RawMessage
		if json.Unmarshal(msg, &keys) == nil {
			_, hasMethod := keys["method"]
			_, hasResult := keys["result"]
			_, hasError := keys["error"]
			fe.Response = !hasMethod && (hasResult || hasError)
		}
		return nil, fe
	}
	if req, ok := m.(*jsonrpc.Request); ok && !req.ID.IsValid() {
		// A notification, or a request whose id is null.
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(msg, &probe) == nil && probe.ID != nil {
			return nil, &FrameError{Code: jsonrpc.CodeInvalidRequest,
				Reason: fmt.Sprintf("the id of request %q is null (MCP request ids are strings or integers; a notification has no id)", req.Method)}
		}
	}
	return m, nil
}

// splitCutOff recovers the message of a stdio line that a cut-off message
// was glued onto: a server (or client) that wrote part of a line, stopped,
// and then wrote a whole message line. It returns the last JSON object of
// line, when the bytes before it are not themselves a JSON value (they are
// the start of a message that never ended) and the object is a message
// DecodeFrame accepts. A line of two complete values, or a message with
// trailing bytes, is not such a line: ok is false. The scan runs backwards
// from the line's last '}' to the '{' that opens its object, outside
// strings, so it costs one pass over the line.
func splitCutOff(line []byte) (cut []byte, msg jsonrpc.Message, ok bool) {
	line = bytes.TrimSpace(line)
	end := len(line) - 1
	if end < 1 || line[end] != '}' {
		return nil, nil, false
	}
	depth, inString := 0, false
	for i := end; i >= 0; i-- {
		b := line[i]
		if b == '"' {
			bs := 0
			for j := i - 1; j >= 0 && line[j] == '\\'; j-- {
				bs++
			}
			if bs%2 == 0 {
				inString = !inString
			}
			continue
		}
		if inString {
			continue
		}
		switch b {
		case '}', ']':
			depth++
		case '{', '[':
			depth--
		}
		if depth < 0 {
			return nil, nil, false
		}
		if depth > 0 {
			continue
		}
		if b != '{' || i == 0 {
			return nil, nil, false
		}
		head := bytes.TrimSpace(line[:i])
		if len(head) == 0 || head[0] != '{' || json.Valid(head) {
			return nil, nil, false
		}
		m, err := DecodeFrame(line[i:])
		if err != nil {
			return nil, nil, false
		}
		return line[:i], m, true
	}
	return nil, nil, false
}

// CodeMessageTooLarge is the JSON-RPC error code of a message refused for
// its size, in the range JSON-RPC 2.0 leaves to implementations (-32000 to
// -32099): a stdio server's answer over [StdioTransport.MaxMessageBytes]
// fails its call with it at once, instead of leaving the call to its
// timeout; a client's request over the serving cap is answered with it,
// by its id when the request's start names one.
const CodeMessageTooLarge = -32010

// frameHeadBytes is how much of a frame over the size cap is kept to read
// its id from.
const frameHeadBytes = 64 << 10

// keepHead returns dst[:0] with the first frameHeadBytes bytes of the
// concatenation of parts: the start of a frame too large to keep whole.
func keepHead(dst []byte, parts ...[]byte) []byte {
	dst = dst[:0]
	for _, p := range parts {
		dst = append(dst, p[:min(len(p), frameHeadBytes-len(dst))]...)
	}
	return dst
}

// frameHead is what the first bytes of a frame too large to read say
// about it.
type frameHead struct {
	id      jsonrpc.ID // valid when an "id" came before the cut
	method  bool       // a "method" key came first: a request or notification
	answer  bool       // a "result" or "error" key came first: a response
	decoded bool       // the prefix starts a JSON object
}

// readFrameHead reads the top-level keys of the JSON object that prefix
// (the first bytes of a frame) starts, up to the cut or to the first
// "result", "error" or "params" key, whose value is what makes a message
// large.
func readFrameHead(prefix []byte) frameHead {
	var h frameHead
	i := jsonw.SkipSpace(prefix, 0)
	if i >= len(prefix) || prefix[i] != '{' {
		return h
	}
	h.decoded = true
	// The walk ends at the cut (an error), at the object's end, or at
	// errHeadDone.
	_, _ = jsonw.EachMember(prefix, i, jsonw.MaxDepth, func(key []byte, _, vs int) (int, error) {
		switch string(key) {
		case "result", "error":
			h.answer = !h.method
			return vs, errHeadDone
		case "params":
			return vs, errHeadDone
		case "method":
			h.method, h.answer = true, false
		case "id":
			end, err := jsonw.ScanValue(prefix, vs, jsonw.MaxDepth-1)
			if err != nil {
				return end, err
			}
			var v any
			if json.Unmarshal(prefix[vs:end], &v) == nil {
				if id, err := jsonrpc.MakeID(v); err == nil {
					h.id = id
				}
			}
			return end, nil
		}
		return jsonw.ScanValue(prefix, vs, jsonw.MaxDepth-1)
	})
	return h
}

// errHeadDone stops readFrameHead's walk at the member that decides.
var errHeadDone = errors.New("frame head read")

// errorReply is a JSON-RPC 2.0 error response whose id may be null, which
// go-sdk's encoder cannot write (it leaves an invalid id out).
type errorReply struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"`
	Error   struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// EncodeErrorReply returns the JSON-RPC 2.0 error response to the request
// id (null when id is not valid: the request's id could not be read), with
// code and message, without a line ending.
func EncodeErrorReply(id jsonrpc.ID, code int64, message string) []byte {
	r := errorReply{JSONRPC: "2.0", ID: id.Raw()}
	r.Error.Code = code
	r.Error.Message = message
	data, err := json.Marshal(r)
	if err != nil { // a string and two numbers always encode
		panic(err)
	}
	return data
}

// AppendResult appends to dst the JSON-RPC 2.0 response to the request id
// (a valid id) whose result is the JSON value result, written as go-sdk
// writes a response: {"jsonrpc":"2.0","id":…,"result":…}, without a line
// ending.
func AppendResult(dst []byte, id jsonrpc.ID, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	switch v := id.Raw().(type) {
	case string:
		dst = jsonw.AppendString(dst, v)
	case int64:
		dst = strconv.AppendInt(dst, v, 10)
	default:
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// ResponseID reports the id of the response that msg, one encoded
// JSON-RPC message, is: an object with "result" or "error", no "method"
// and a valid "id" (a string or an integer), in any key order. It reads
// only the top-level keys and the id, so the cost of a large result is
// one scan of its bytes; ok is false for a request, a notification or
// bytes that are not a JSON object.
func ResponseID(msg []byte) (id jsonrpc.ID, ok bool) {
	i := jsonw.SkipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return jsonrpc.ID{}, false
	}
	method, answer := false, false
	_, err := jsonw.EachMember(msg, i, jsonw.MaxDepth, func(key []byte, _, vs int) (int, error) {
		end, err := jsonw.ScanValue(msg, vs, jsonw.MaxDepth-1)
		if err != nil {
			return end, err
		}
		switch string(key) {
		case "method":
			method = true
		case "result", "error":
			answer = true
		case "id":
			id = rawID(msg[vs:end])
		}
		return end, nil
	})
	if err != nil || method || !answer || !id.IsValid() {
		return jsonrpc.ID{}, false
	}
	return id, true
}

// rawID is the JSON-RPC id that raw, one JSON value, encodes, read as
// jsonrpc.DecodeMessage reads it; the zero ID when it is not a string or
// a number.
func rawID(raw []byte) jsonrpc.ID {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && n >= -1<<53 && n <= 1<<53 {
		id, _ := jsonrpc.MakeID(float64(n)) // exact: a float64 holds it
		return id
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return jsonrpc.ID{}
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return jsonrpc.ID{}
	}
	return id
}

// PeekFrameID returns the id of the message that prefix, the first bytes of
// a frame too large to read whole, starts, when it names one before the
// cut. It is what an oversized request is answered to.
func PeekFrameID(prefix []byte) jsonrpc.ID {
	return readFrameHead(prefix).id
}
