package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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
	// DrainTimeout bounds the drain that starts at EOF on the reader or at
	// [ServeStdioTransport.Shutdown]: requests still unanswered that long
	// after it began are abandoned (their handlers' contexts are cancelled
	// with [ErrDrainTimeout]) and the session ends. 0 or less waits for
	// every answer.
	DrainTimeout time.Duration
}

// ErrDrainTimeout ends a session whose requests were not all answered
// within [ServeStdioOptions.DrainTimeout] of EOF or Shutdown;
// mcp.ServerSession.Wait and mcp.Server.Run return an error wrapping it.
var ErrDrainTimeout = errors.New("transport: requests still unanswered when the drain timeout expired")

// codeShuttingDown is the JSON-RPC error code of a request refused after
// Shutdown, and of a server-to-client request that can no longer be
// answered: go-sdk's own code for "server is closing" (jsonrpc2
// ErrServerClosing, in the implementation-defined -32000..-32099 range).
const codeShuttingDown = -32004

// ServeStdioTransport is the server side of the MCP stdio transport: an
// mcp.Transport reading newline-delimited JSON-RPC from Reader and writing
// to Writer, like go-sdk's mcp.IOTransport, but a malformed line does not
// end the session. go-sdk's connection dies on the first line it cannot
// decode, and every call in flight with it; this one passes on only lines
// that [DecodeFrame] accepts as one JSON-RPC 2.0 message, and answers every
// other line on Writer with an error whose id is null (JSON-RPC 2.0 §5.1):
//
//   - -32700 Parse error for a line that is not JSON, holds more than one
//     value or trailing bytes (`{…},`), nests deeper than encoding/json
//     allows, or is longer than [ServeStdioOptions.MaxLineLength] (a
//     request that long whose start names its method and id is answered
//     by that id instead, with [CodeMessageTooLarge], so its caller fails
//     at once);
//   - -32600 Invalid Request for valid JSON that is not a message: an
//     array (batches do not exist in the protocol revisions we answer),
//     a string, number or null, a wrong or missing "jsonrpc", an id that
//     is not a string or number (a request whose id is null included:
//     MCP forbids it, and go-sdk would take it for a notification), a
//     method that is not a string.
//
// A line that ends in a whole message after the start of one that never
// ended (the client wrote part of a line, then a whole one) is the one
// exception: the cut-off part is answered with -32700 and the message is
// served.
//
// A rejected line that looks like a response (an object with "result" or
// "error" and no "method") is only logged, never answered, so two peers
// cannot trade error replies forever. Blank lines are skipped, as go-sdk
// skips them. Error replies and go-sdk's writes share one mutex, so lines
// never interleave.
//
// Ending is a drain, never a loss. At EOF on Reader (a last line without a
// newline still counts), every request already read is answered on Writer
// before the session ends, and every request the server sent the client
// and still awaits (sampling, elicitation, roots/list) is failed at once
// with code -32004, since no answer can arrive any more; one sent later
// fails the same way. [ServeStdioTransport.Shutdown] starts the same drain
// with Reader still open: requests arriving after it are refused with
// -32004, while notifications (cancellations) and the client's answers
// still pass, so calls in flight can finish. go-sdk's own connection
// would instead stop writing the moment its reader ends or it is closed,
// dropping those answers. [ServeStdioOptions.DrainTimeout] bounds the
// drain. Closing the connection closes Reader and Writer. Unlike go-sdk's decoder, a message
// must fit on one line, as the MCP stdio transport requires
// (specification 2025-06-18, "Transports": messages MUST NOT contain
// embedded newlines).
type ServeStdioTransport struct {
	r            io.ReadCloser
	w            io.WriteCloser
	max          int
	log          *slog.Logger
	drainTimeout time.Duration
	connected    atomic.Bool

	eof chan struct{} // closed by the connection when Reader reached EOF

	mu      sync.Mutex
	conn    *drainConn   // set by Connect
	stopped bool         // Shutdown was called
	local   LocalHandler // set by AnswerLocally
}

// A LocalHandler answers a request the server can answer without the
// session's machinery (no server-to-client request, no notification). It
// gets each request [DecodeFrame] accepted, decoded once, on the
// transport's reading goroutine, and returns its [LocalAnswer]: the zero
// value passes the request on to the session unchanged. It is not called
// while the session drains, so a request refused then is refused as every
// other. It must not block: the next line is read after it returns; what
// waits (an upstream request, a long poll) goes in [LocalAnswer.Later].
type LocalHandler func(req *jsonrpc.Request) LocalAnswer

// LocalAnswer is a [LocalHandler]'s answer to one request: Frame, or
// Later, or neither.
type LocalAnswer struct {
	// Frame is the whole JSON-RPC response frame to write at once, without
	// a line ending (see [AppendResult]).
	Frame []byte
	// Later, when Frame is nil, makes the response frame on a goroutine of
	// its own, so the reading goroutine goes on to the next line. The
	// request counts as in flight until then (a drain waits for it), and
	// its frame is written once, with the session's other writes. ctx is
	// cancelled when the client cancels the request (notifications/cancelled:
	// its frame is then not written, as MCP cancellation requires), when
	// the session's reading ends in an error (the drain timeout: the cause
	// wraps [ErrDrainTimeout]) and when the connection closes. Later must
	// return a frame.
	Later func(ctx context.Context) []byte
}

// AnswerLocally installs h as the transport's [LocalHandler]. It must be
// called before Connect; a later call has no effect on the session.
func (t *ServeStdioTransport) AnswerLocally(h LocalHandler) {
	t.mu.Lock()
	t.local = h
	t.mu.Unlock()
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
	return &ServeStdioTransport{r: r, w: w, max: o.MaxLineLength, log: o.Logger, drainTimeout: o.DrainTimeout,
		eof: make(chan struct{})}
}

// EOF is closed once Reader reached end of file, after every message read
// before it was passed on to the session (their handlers may still run):
// the moment the MCP client can no longer send anything. A server uses it
// to release what its handlers wait on (long polls, upstream requests), so
// that the drain, and the process, end promptly. It is never closed by
// Shutdown alone.
func (t *ServeStdioTransport) EOF() <-chan struct{} { return t.eof }

// Connect returns the session's connection. It may be called once; a
// second call returns [ErrConnected].
func (t *ServeStdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if !t.connected.CompareAndSwap(false, true) {
		return nil, ErrConnected
	}
	w := &lockedWriter{w: t.w}
	t.mu.Lock()
	local := t.local
	t.mu.Unlock()
	f := &lineFilter{
		src:   t.r,
		br:    bufio.NewReaderSize(t.r, 64<<10),
		max:   t.max,
		out:   w,
		log:   t.log,
		local: local,
	}
	c := &drainConn{
		eofCh:     t.eof,
		timeout:   t.drainTimeout,
		incoming:  map[jsonrpc.ID]bool{},
		cancelled: map[jsonrpc.ID]bool{},
		outgoing:  map[jsonrpc.ID]bool{},
		wake:      make(chan struct{}, 1),
		closed:    make(chan struct{}),
		locals:    map[jsonrpc.ID]context.CancelCauseFunc{},
	}
	// As go-sdk's handlers, later answers are not cancelled by ctx itself,
	// only by the client, the end of reading and Close.
	c.base, c.cancelBase = context.WithCancelCause(context.WithoutCancel(ctx))
	f.conn = c // before go-sdk's reader starts
	// Our filter bounds every line, so go-sdk's own frame cap is off.
	inner, err := (&mcp.IOTransport{Reader: f, Writer: w, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	c.inner = inner
	t.mu.Lock()
	t.conn = c
	stopped := t.stopped
	t.mu.Unlock()
	if stopped {
		c.startDrain(false)
	}
	return c, nil
}

// Shutdown starts the drain of the session (see [ServeStdioTransport]):
// no new request is taken, the requests in flight are answered, then the
// session ends as at EOF. Called before Connect, the session drains as
// soon as it starts. Safe to call several times and concurrently.
func (t *ServeStdioTransport) Shutdown() {
	t.mu.Lock()
	t.stopped = true
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		c.startDrain(false)
	}
}

// drainConn is the connection of a ServeStdioTransport: go-sdk's stdio
// connection plus the bookkeeping of the drain. It tracks the ids of the
// requests read and not yet answered (incoming) and of the requests
// written and not yet answered (outgoing).
type drainConn struct {
	inner   mcp.Connection
	timeout time.Duration
	eofCh   chan struct{} // the transport's EOF channel, closed at eof

	mu        sync.Mutex
	incoming  map[jsonrpc.ID]bool
	cancelled map[jsonrpc.ID]bool // incoming requests the client cancelled: not answered
	outgoing  map[jsonrpc.ID]bool
	synth     []jsonrpc.Message  // answers made up for outgoing requests, for Read to return
	eof       bool               // the reader ended: no message can arrive
	draining  bool               // EOF or Shutdown
	expired   bool               // the drain timeout passed
	timer     *time.Timer        // the drain timeout, once draining
	interrupt context.CancelFunc // cancels the inner Read in progress
	wake      chan struct{}      // capacity 1: the state changed
	closed    chan struct{}      // closed by Close
	closeOnce sync.Once

	// The requests a LocalHandler answers later (LocalAnswer.Later): each
	// one's context, derived from base, by id. They count in incoming too.
	locals     map[jsonrpc.ID]context.CancelCauseFunc
	base       context.Context
	cancelBase context.CancelCauseFunc

	// The order of the filter's messages: a LocalHandler answers a request
	// only after the session took in every message passed to it before
	// (a notification that changes what the answer says is read first).
	passed    int64         // messages the filter passed to the session
	processed int64         // of them, those the session is done reading
	reading   bool          // Read returned a passed message; its next call means the session is done with it
	caughtUp  chan struct{} // closed when processed reaches passed, if someone waits
}

// notify wakes Read after a state change; c.mu is held.
func (c *drainConn) notify() {
	if c.interrupt != nil {
		c.interrupt()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// startDrain begins the drain; eof reports that the reader ended, so the
// outgoing requests can no longer be answered.
func (c *drainConn) startDrain(eof bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if eof && !c.eof {
		c.eof = true
		close(c.eofCh)
		for id := range c.outgoing {
			c.synth = append(c.synth, unanswerable(id))
		}
		clear(c.outgoing)
	}
	if !c.draining {
		c.draining = true
		if c.timeout > 0 {
			c.timer = time.AfterFunc(c.timeout, c.expire)
		}
	}
	c.notify()
}

func (c *drainConn) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expired = true
	c.notify()
}

// isDraining reports whether the drain began.
func (c *drainConn) isDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}

// unanswerable is the made-up answer to a request the client can no
// longer answer.
func unanswerable(id jsonrpc.ID) *jsonrpc.Response {
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code:    codeShuttingDown,
		Message: "transport: the MCP client closed stdin before answering this request",
	}}
}

// Read implements mcp.Connection. It returns the client's messages, and
// io.EOF once draining with every request read answered.
func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	c.mu.Lock()
	if c.reading {
		c.reading = false
		c.processedLocked()
	}
	c.mu.Unlock()
	for {
		c.mu.Lock()
		switch {
		case len(c.synth) > 0:
			m := c.synth[0]
			c.synth = c.synth[1:]
			c.mu.Unlock()
			return m, nil
		case c.expired:
			n := len(c.incoming)
			c.mu.Unlock()
			err := fmt.Errorf("%w: %d of them after %v", ErrDrainTimeout, n, c.timeout)
			c.cancelBase(err) // as go-sdk cancels its handlers with it
			return nil, err
		case c.draining && len(c.incoming) == 0:
			c.mu.Unlock()
			return nil, io.EOF
		}
		if c.eof {
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-c.closed:
				return nil, io.EOF
			case <-c.wake:
			}
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		c.interrupt = cancel
		c.mu.Unlock()
		msg, err := c.inner.Read(rctx)
		c.mu.Lock()
		c.interrupt = nil
		woken := ctx.Err() == nil && rctx.Err() != nil
		c.mu.Unlock()
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			c.startDrain(true)
			continue
		case woken:
			continue // a state change
		default:
			c.cancelBase(err)
			return nil, err
		}
		m, ok := c.take(ctx, msg)
		c.mu.Lock()
		if ok {
			c.reading = true // the session reads it once Read returns
		} else {
			c.processedLocked()
		}
		c.mu.Unlock()
		if ok {
			return m, nil
		}
	}
}

// processedLocked counts one passed message as taken in by the session;
// c.mu is held.
func (c *drainConn) processedLocked() {
	c.processed++
	if c.caughtUp != nil && c.processed >= c.passed {
		close(c.caughtUp)
		c.caughtUp = nil
	}
}

// pass counts a message the filter passes on to the session.
func (c *drainConn) pass() {
	c.mu.Lock()
	c.passed++
	c.mu.Unlock()
}

// awaitSession returns once the session took in every message passed to
// it, or the connection closed.
func (c *drainConn) awaitSession() {
	c.mu.Lock()
	if c.processed >= c.passed {
		c.mu.Unlock()
		return
	}
	if c.caughtUp == nil {
		c.caughtUp = make(chan struct{})
	}
	ch := c.caughtUp
	c.mu.Unlock()
	select {
	case <-ch:
	case <-c.closed:
	}
}

// take records msg as read, and reports whether to pass it on: a request
// that arrives while draining is refused here instead.
func (c *drainConn) take(ctx context.Context, msg jsonrpc.Message) (jsonrpc.Message, bool) {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			c.mu.Lock()
			draining := c.draining
			if !draining {
				c.incoming[m.ID] = true
			}
			c.mu.Unlock()
			if draining {
				_ = c.inner.Write(ctx, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
					Code:    codeShuttingDown,
					Message: fmt.Sprintf("server is shutting down: %s refused", m.Method),
				}})
				return nil, false
			}
			return m, true
		}
		if id, ok := CancelledID(m); ok {
			// A cancelled request gets no answer (MCP cancellation): go-sdk
			// writes one, which Write drops; the drain stops waiting for it.
			c.mu.Lock()
			if c.incoming[id] {
				c.cancelled[id] = true
			}
			cancel := c.locals[id]
			c.mu.Unlock()
			if cancel != nil {
				cancel(nil)
			}
			c.answered(id)
		}
	case *jsonrpc.Response:
		c.mu.Lock()
		delete(c.outgoing, m.ID)
		c.mu.Unlock()
	}
	return msg, true
}

// answered forgets an incoming request, and wakes Read when it was the
// last one of a drain.
func (c *drainConn) answered(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.incoming, id)
	if c.draining && len(c.incoming) == 0 {
		c.notify()
	}
}

// errConnClosed is the cause of the cancellation of the requests
// answered later that are still running when the connection closes.
var errConnClosed = errors.New("transport: the serving stdio connection closed")

// startLocal records the request id, which a LocalHandler answers later,
// as in flight, and returns its context.
func (c *drainConn) startLocal(id jsonrpc.ID) context.Context {
	ctx, cancel := context.WithCancelCause(c.base)
	c.mu.Lock()
	c.incoming[id] = true
	c.locals[id] = cancel
	c.mu.Unlock()
	return ctx
}

// finishLocal writes frame, the later answer to the request id, on w
// unless the client cancelled the request, then counts it answered.
func (c *drainConn) finishLocal(id jsonrpc.ID, frame []byte, w *lockedWriter, log *slog.Logger) {
	c.mu.Lock()
	cancel := c.locals[id]
	delete(c.locals, id)
	cancelled := c.cancelled[id]
	delete(c.cancelled, id)
	c.mu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
	if !cancelled {
		if _, err := w.Write(append(frame, '\n')); err != nil {
			log.Warn("stdout: writing an answer", "id", id.Raw(), "err", err)
		}
	}
	c.answered(id)
}

// Write implements mcp.Connection. An answer is written before its
// request counts as answered, so the drain never ends ahead of it.
func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		c.mu.Lock()
		cancelled := c.cancelled[m.ID]
		delete(c.cancelled, m.ID)
		c.mu.Unlock()
		if cancelled {
			return nil
		}
		err := c.inner.Write(ctx, m)
		c.answered(m.ID)
		return err
	case *jsonrpc.Request:
		if !m.IsCall() {
			break
		}
		c.mu.Lock()
		if c.eof {
			c.synth = append(c.synth, unanswerable(m.ID))
			c.notify()
		} else {
			c.outgoing[m.ID] = true
		}
		c.mu.Unlock()
		err := c.inner.Write(ctx, m)
		if err != nil {
			c.mu.Lock()
			delete(c.outgoing, m.ID)
			c.mu.Unlock()
		}
		return err
	}
	return c.inner.Write(ctx, msg)
}

// Close implements mcp.Connection: it closes the reader and the writer.
func (c *drainConn) Close() error {
	c.closeOnce.Do(func() {
		c.cancelBase(errConnClosed)
		close(c.closed)
		c.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
	})
	return c.inner.Close()
}

// SessionID implements mcp.Connection; stdio has no session ID.
func (c *drainConn) SessionID() string { return "" }

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

	local LocalHandler // nil: every request goes to the session
	conn  *drainConn   // the connection, for its drain state

	buf     []byte // the line being read
	head    []byte // the start of the line being read, once it is too long
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
				f.head = keepHead(f.head, f.buf, chunk)
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
		if len(line) > f.max && !tooLong {
			tooLong = true
			f.head = keepHead(f.head, line)
		}
		return line, tooLong, true, err
	}
}

// check passes line on when it is one JSON-RPC message (DecodeFrame), and
// otherwise logs and answers it. A line that ends in a whole message glued
// onto a cut-off one (splitCutOff) has the cut-off part rejected and the
// message passed on.
func (f *lineFilter) check(line []byte, tooLong bool) {
	f.lineNo++
	if tooLong {
		reason := fmt.Sprintf("line longer than %d bytes", f.max)
		if h := readFrameHead(f.head); h.method && h.id.IsValid() {
			// A request: its caller learns at once, by its id.
			f.replyTo(h.id, len(line), CodeMessageTooLarge, "message too large: "+reason)
			return
		}
		f.reject(len(line), &FrameError{Code: jsonrpc.CodeParseError, Reason: reason})
		return
	}
	msg := bytes.TrimSpace(line)
	if len(msg) == 0 {
		return
	}
	msg = RepairUTF8(msg) // as Node.js decodes it: one value for everyone downstream
	m, err := DecodeFrame(msg)
	if err == nil && f.answer(m) {
		return
	}
	if err == nil {
		// msg aliases f.buf, unused until pending drains. Surrounding
		// blanks are dropped: go-sdk's decoder takes any byte but a line
		// ending after a value for trailing data and ends the session.
		f.passOn(msg)
		return
	}
	fe := err.(*FrameError)
	if cut, _, ok := splitCutOff(msg); ok {
		f.reject(len(cut), &FrameError{Code: jsonrpc.CodeParseError,
			Reason: fmt.Sprintf("a message cut off after %d bytes; the whole message that follows it on the line is served", len(cut))})
		f.passOn(msg[len(cut):])
		return
	}
	f.reject(len(line), fe)
}

// passOn makes msg, one message, the next bytes Read returns, and counts
// it passed to the session.
func (f *lineFilter) passOn(msg []byte) {
	f.pending = append(msg, '\n')
	if f.conn != nil {
		f.conn.pass()
	}
}

// answer lets the LocalHandler answer m, and reports whether it did.
func (f *lineFilter) answer(m jsonrpc.Message) bool {
	req, ok := m.(*jsonrpc.Request)
	if !ok || f.local == nil || !req.IsCall() || f.conn == nil || f.conn.isDraining() {
		return false
	}
	f.conn.awaitSession()
	a := f.local(req)
	switch {
	case a.Frame != nil:
		f.write(a.Frame)
	case a.Later != nil:
		ctx := f.conn.startLocal(req.ID)
		go func() { f.conn.finishLocal(req.ID, a.Later(ctx), f.out, f.log) }()
	default:
		return false
	}
	return true
}

// reject logs a rejected line of size bytes and, unless it is a
// response, answers it with an error whose id is null.
func (f *lineFilter) reject(size int, fe *FrameError) {
	f.log.Warn("stdin: rejected a line that is not a JSON-RPC 2.0 message",
		"line", f.lineNo, "bytes", size, "code", fe.Code, "reason", fe.Reason, "answered", !fe.Response)
	if fe.Response {
		return
	}
	f.write(EncodeErrorReply(jsonrpc.ID{}, fe.Code, fe.Error()))
}

// replyTo logs a request refused before it was read whole and answers it
// by its id.
func (f *lineFilter) replyTo(id jsonrpc.ID, size int, code int64, message string) {
	f.log.Warn("stdin: refused a request", "line", f.lineNo, "bytes", size, "id", id.Raw(), "code", code, "reason", message)
	f.write(EncodeErrorReply(id, code, message))
}

// write sends one error reply line.
func (f *lineFilter) write(data []byte) {
	if _, err := f.out.Write(append(data, '\n')); err != nil {
		f.log.Warn("stdin: writing an error reply", "line", f.lineNo, "err", err)
	}
}
