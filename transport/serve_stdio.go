package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrConnected is returned by [ServeStdioTransport.Connect] when the
// transport already served a session: its reader holds one stream.
var ErrConnected = errors.New("transport: serving stdio transport already connected")

// ServeStdioOptions configures [NewServeStdioTransport]. The zero value is
// ready to use.
type ServeStdioOptions struct {
	// MaxLineLength caps one input line in bytes, not counting its line
	// ending. A longer line is discarded up to its newline and answered
	// with a parse error. 0 or less means mcp.DefaultMaxLineLength
	// (16 MiB), go-sdk's own default.
	MaxLineLength int
	// Logger receives one warning per rejected line (line number, size,
	// JSON-RPC code and reason); nil means slog.Default().
	Logger *slog.Logger
}

// ServeStdioTransport is the server side of the MCP stdio transport: an
// mcp.Transport reading newline-delimited JSON-RPC from Reader and writing
// to Writer, like go-sdk's mcp.IOTransport, but a malformed line does not
// end the session. go-sdk's connection dies on the first line it cannot
// decode, and every call in flight with it; this one passes on only lines
// that jsonrpc.DecodeMessage accepts as one JSON-RPC 2.0 message, and
// answers every other line on Writer with an error whose id is null
// (JSON-RPC 2.0 §5.1):
//
//   - -32700 Parse error for a line that is not JSON, holds more than one
//     value, nests deeper than encoding/json allows, or is longer than
//     [ServeStdioOptions.MaxLineLength];
//   - -32600 Invalid Request for valid JSON that is not a message: an
//     array (batches do not exist in the protocol revisions we answer),
//     a string, number or null, a wrong or missing "jsonrpc", an id that
//     is not a string or number, a method that is not a string.
//
// A rejected line that looks like a response (an object with "result" or
// "error" and no "method") is only logged, never answered, so two peers
// cannot trade error replies forever. Blank lines are skipped, as go-sdk
// skips them. Error replies and go-sdk's writes share one mutex, so lines
// never interleave.
//
// Otherwise it behaves as mcp.IOTransport: EOF on Reader ends the session
// cleanly (a last line without a newline still counts), and closing the
// connection closes Reader and Writer. Unlike go-sdk's decoder, a message
// must fit on one line, as the MCP stdio transport requires
// (specification 2025-06-18, "Transports": messages MUST NOT contain
// embedded newlines).
type ServeStdioTransport struct {
	r         io.ReadCloser
	w         io.WriteCloser
	max       int
	log       *slog.Logger
	connected atomic.Bool
}

// NewServeStdioTransport returns a transport serving one MCP session over
// r (the client's requests, usually os.Stdin) and w (our answers, usually
// os.Stdout). opts may be nil; it is copied.
func NewServeStdioTransport(r io.ReadCloser, w io.WriteCloser, opts *ServeStdioOptions) *ServeStdioTransport {
	var o ServeStdioOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxLineLength <= 0 {
		o.MaxLineLength = mcp.DefaultMaxLineLength
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &ServeStdioTransport{r: r, w: w, max: o.MaxLineLength, log: o.Logger}
}

// Connect returns the session's connection. It may be called once; a
// second call returns [ErrConnected].
func (t *ServeStdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if !t.connected.CompareAndSwap(false, true) {
		return nil, ErrConnected
	}
	w := &lockedWriter{w: t.w}
	f := &lineFilter{
		src: t.r,
		br:  bufio.NewReaderSize(t.r, 64<<10),
		max: t.max,
		out: w,
		log: t.log,
	}
	// Our filter bounds every line, so go-sdk's own frame cap is off.
	inner := &mcp.IOTransport{Reader: f, Writer: w, MaxLineLength: -1}
	return inner.Connect(ctx)
}

// lockedWriter serializes whole writes: go-sdk writes each message in one
// Write call, and so do our error replies.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close does not take the lock: a write blocked on a stuck peer must not
// keep the connection from closing.
func (l *lockedWriter) Close() error { return l.w.Close() }

// lineFilter is the io.ReadCloser go-sdk's decoder reads: the accepted
// lines of src, each ending in '\n'. Read is called by go-sdk's single
// read goroutine only.
type lineFilter struct {
	src io.ReadCloser
	br  *bufio.Reader
	max int
	out *lockedWriter
	log *slog.Logger

	buf     []byte // the line being read
	pending []byte // the rest of the accepted line not yet returned
	lineNo  int
	err     error // the read error to return once pending is drained
}

// Read returns bytes of accepted lines, and src's error (io.EOF at the
// end) after the last one.
func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, tooLong, ok, err := f.readLine()
		if err != nil {
			f.err = err
		}
		if ok {
			f.check(line, tooLong)
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// Close closes src.
func (f *lineFilter) Close() error { return f.src.Close() }

// readLine reads one line without its line ending. tooLong reports a line
// over f.max bytes, whose bytes were dropped. ok is false when no line was
// read: at EOF, or after a read error (a partial line before an error
// other than EOF is dropped; before EOF it counts as the last line).
func (f *lineFilter) readLine() (line []byte, tooLong, ok bool, err error) {
	f.buf = f.buf[:0]
	if cap(f.buf) > 1<<20 {
		f.buf = nil // do not keep a huge line's memory for the session
	}
	var seen bool
	for {
		chunk, rerr := f.br.ReadSlice('\n')
		seen = seen || len(chunk) > 0
		if !tooLong {
			if len(f.buf)+len(chunk) > f.max+2 { // room for "\r\n"
				tooLong = true
				f.buf = f.buf[:0]
			} else {
				f.buf = append(f.buf, chunk...)
			}
		}
		switch {
		case rerr == bufio.ErrBufferFull:
			continue
		case rerr == io.EOF:
			if !seen {
				return nil, false, false, io.EOF
			}
			err = io.EOF
		case rerr != nil:
			return nil, false, false, rerr
		}
		line = bytes.TrimSuffix(f.buf, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > f.max {
			tooLong = true
		}
		return line, tooLong, true, err
	}
}

// check passes line on when it is one JSON-RPC message, and otherwise logs
// and answers it.
func (f *lineFilter) check(line []byte, tooLong bool) {
	f.lineNo++
	if tooLong {
		f.reject(line, jsonrpc.CodeParseError, "Parse error", fmt.Sprintf("line longer than %d bytes", f.max), false)
		return
	}
	msg := bytes.TrimSpace(line)
	if len(msg) == 0 {
		return
	}
	if !json.Valid(msg) {
		var raw json.RawMessage
		f.reject(line, jsonrpc.CodeParseError, "Parse error", json.Unmarshal(msg, &raw).Error(), false)
		return
	}
	_, err := jsonrpc.DecodeMessage(msg)
	if err == nil && msg[0] == '{' {
		// msg aliases f.buf, unused until pending drains. Surrounding
		// blanks are dropped: go-sdk's decoder takes any byte but a line
		// ending after a value for trailing data and ends the session.
		f.pending = append(msg, '\n')
		return
	}
	reason := "not a JSON-RPC message object"
	if err != nil {
		reason = err.Error()
	}
	var keys map[string]json.RawMessage
	isResponse := false
	switch msg[0] {
	case '[':
		reason = "batches are not supported (a line must hold one JSON-RPC message object)"
	case '{':
		if json.Unmarshal(msg, &keys) == nil {
			_, hasMethod := keys["method"]
			_, hasResult := keys["result"]
			_, hasError := keys["error"]
			isResponse = !hasMethod && (hasResult || hasError)
		}
	default:
		reason = "not a JSON-RPC message object: " + reason
	}
	f.reject(line, jsonrpc.CodeInvalidRequest, "Invalid Request", reason, isResponse)
}

// errorReply is a JSON-RPC 2.0 error response with a null id.
type errorReply struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int   `json:"id"` // always nil: null
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// reject logs a rejected line and, unless it is a response, answers it.
func (f *lineFilter) reject(line []byte, code int, title, reason string, isResponse bool) {
	size := len(line)
	f.log.Warn("stdin: rejected a line that is not a JSON-RPC 2.0 message",
		"line", f.lineNo, "bytes", size, "code", code, "reason", reason, "answered", !isResponse)
	if isResponse {
		return
	}
	r := errorReply{JSONRPC: "2.0"}
	r.Error.Code = code
	r.Error.Message = title + ": " + reason
	data, err := json.Marshal(r)
	if err != nil {
		f.log.Error("stdin: encoding an error reply", "line", f.lineNo, "err", err)
		return
	}
	if _, err := f.out.Write(append(data, '\n')); err != nil {
		f.log.Warn("stdin: writing an error reply", "line", f.lineNo, "err", err)
	}
}
