package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStderrLine is the cap on one logged stderr line of a stdio child, in
// bytes (docs/protocol-facts.md, Transport resolution); the rest of a longer line is dropped.
const MaxStderrLine = 8192

// DefaultMaxMessageBytes is the default cap on one JSON-RPC message read
// from a stdio child.
const DefaultMaxMessageBytes = 64 << 20

// ErrClosed is returned by Read and Write on a closed stdio connection.
var ErrClosed = errors.New("transport: connection closed")

// StdioTransport is an mcp.Transport that runs an MCP server as a child
// process speaking newline-delimited JSON-RPC on its stdin and stdout.
// Resolve builds it; its fields may also be set directly.
//
// Unlike go-sdk's CommandTransport it:
//   - starts the server under a small supervisor (this same executable,
//     re-run) in a process group of its own; the supervisor is a child
//     subreaper (PR_SET_CHILD_SUBREAPER), so even grandchildren that call
//     setsid stay under it, and it kills every descendant when the server
//     exits, when Close asks, and when our process dies, even by SIGKILL
//     (it reads EOF on a pipe that only our process holds open);
//   - passes only Env to the child;
//   - logs each stderr line (capped at [MaxStderrLine]) tagged with the
//     server name instead of writing it anywhere near our stdout;
//   - reads each stdout line as one frame ([DecodeFrame]: trailing bytes
//     make a line invalid), and logs and skips the lines that are not one
//     JSON-RPC 2.0 message (banners, debug prints) instead of ending the
//     session: the first few one by one, then a summary at most every
//     30 s, all counted ([StdioTransport.SkippedLines]); a whole message
//     glued onto a cut-off line (a server that wrote part of a line, then
//     a whole one) is read;
//   - fails at once, with [CodeMessageTooLarge], the call that a line over
//     MaxMessageBytes answers (every call in flight when the line's id
//     cannot be read before the cut), instead of leaving it to its
//     timeout;
//   - on Close, answers with a JSON-RPC error every request the server
//     sent us (sampling, elicitation, roots, ping) that is still open
//     before it closes stdin, so that a server waiting on one still exits
//     on stdin EOF instead of after TerminateDuration and SIGTERM; a
//     server that sends a request after its stdin closed gets SIGTERM at
//     once, since nothing can answer it.
//
// Each Connect starts one child; a StdioTransport may be connected again
// after the previous connection closed.
type StdioTransport struct {
	// Server is the mcp.servers name, used in logs and errors.
	Server string
	// Command is run with Args; without a '/', it is searched in the PATH
	// of Env.
	Command string
	Args    []string
	// Env is the child's complete environment ("KEY=value").
	Env []string
	// Dir is the working directory; empty means ours.
	Dir string
	// Logger receives stderr lines and the warnings about skipped stdout
	// lines; nil means slog.Default().
	Logger *slog.Logger
	// TerminateDuration: see [Options]. 0 means 5 s.
	TerminateDuration time.Duration
	// MaxMessageBytes caps one message (one stdout line, in bytes); 0
	// means [DefaultMaxMessageBytes].
	MaxMessageBytes int
	// Redactor masks secrets in everything logged; nil means redact.Text.
	Redactor *redact.Redactor
	// Confine, when set, runs the server confined (Linux Landlock): see
	// [Confinement]. Connect fails, naming the reason, where the kernel
	// cannot confine; the server is then not started.
	Confine *Confinement

	skips skipCounter // the stdout lines skipped, over every connection
}

// Connect starts the server and returns its connection. ctx bounds only the
// start; the child lives until the connection is closed or it exits.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("server", t.Server)
	path, err := lookPathIn(t.Command, envValue(t.Env, "PATH"), t.Dir)
	if err != nil {
		return nil, fmt.Errorf("transport: server %q: %w", t.Server, err)
	}
	if t.Dir != "" {
		if st, err := os.Stat(t.Dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("transport: server %q: cwd %s is not a directory", t.Server, t.Dir)
		}
	}
	grace := t.TerminateDuration
	if grace <= 0 {
		grace = 5 * time.Second
	}
	maxMsg := t.MaxMessageBytes
	if maxMsg <= 0 {
		maxMsg = DefaultMaxMessageBytes
	}

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("transport: server %q: stdin pipe: %w", t.Server, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("transport: server %q: stdout pipe: %w", t.Server, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("transport: server %q: stderr pipe: %w", t.Server, err)
	}
	cmd, lifeline, err := supervisedCommand(path, t.Args, t.Env, grace, t.Confine)
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("transport: server %q: %w", t.Server, err)
	}
	cmd.Dir = t.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW, lifeline)
		closeAll(cmd.ExtraFiles...)
		return nil, fmt.Errorf("transport: server %q: starting %s: %w", t.Server, t.Redactor.Redact(t.Command), err)
	}
	closeAll(inR, outW, errW)
	closeAll(cmd.ExtraFiles...)

	c := &stdioConn{
		server:     t.Server,
		log:        log,
		red:        t.Redactor,
		cmd:        cmd,
		lifeline:   lifeline,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		grace:      grace,
		maxMsg:     maxMsg,
		msgs:       make(chan jsonrpc.Message),
		closing:    make(chan struct{}),
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		in:         newInbound(),
		out:        newOutbound(),
		skips:      &t.skips,
	}
	c.pumps.Add(2)
	go c.readStdout()
	go c.readStderr()
	go c.wait()
	return c, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPathIn resolves command the way the child's exec would: with a '/' it
// is a path (relative to dir), else it is searched in pathEnv.
func lookPathIn(command, pathEnv, dir string) (string, error) {
	isExec := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
	}
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if !isExec(p) {
			return "", fmt.Errorf("command %s is not an executable file", command)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, command)
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if isExec(p) {
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in the child's PATH %q", command, pathEnv)
}

// stdioConn is the mcp.Connection of one supervised child. It owns three
// goroutines, all ended by Close or by the child's exit: readStdout,
// readStderr and wait.
type stdioConn struct {
	server string
	log    *slog.Logger
	red    *redact.Redactor
	cmd    *exec.Cmd
	// lifeline is held open while the server should live; see
	// supervisedCommand. nil outside Linux.
	lifeline *os.File
	stdin    *os.File
	stdout   *os.File
	stderr   *os.File
	grace    time.Duration
	maxMsg   int

	msgs    chan jsonrpc.Message // closed by readStdout after readErr is set
	readErr error
	pumps   sync.WaitGroup

	writeMu sync.Mutex
	in      *inbound     // the server's requests we have not answered (stdio_close.go)
	out     *outbound    // our calls the server has not answered (stdio_frames.go)
	skips   *skipCounter // the transport's count of skipped stdout lines

	closeOnce sync.Once
	closing   chan struct{}
	exited    chan struct{} // closed by wait after exitErr is set
	exitErr   error

	stderrDone chan struct{} // closed when readStderr returns
	tailMu     sync.Mutex
	tail       []string // the last stderrTail stderr lines, redacted
}

// Read returns the next JSON-RPC message of the child's stdout.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m, ok := <-c.msgs:
		if !ok {
			return nil, c.readErr
		}
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closing:
		return nil, ErrClosed
	}
}

// Write sends one message as a line on the child's stdin. ctx cancellation
// interrupts a write blocked on a full pipe (a server that stopped
// reading): before any byte went out, Write returns ctx.Err() and the
// connection stays usable; in the middle of a message the stream is
// corrupt, so the connection is closed.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("transport: server %q: encoding message: %w", c.server, err)
	}
	data = append(data, '\n')
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closing:
		return ErrClosed
	default:
	}
	c.out.sending(msg)
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.stdin.SetWriteDeadline(time.Now())
		close(interrupted)
	})
	n, err := c.stdin.Write(data)
	if err != nil && n == 0 {
		c.out.unsent(msg)
	}
	if !stop() {
		<-interrupted
		_ = c.stdin.SetWriteDeadline(time.Time{})
		if err != nil && n == 0 {
			return ctx.Err()
		}
	}
	if err != nil {
		if n > 0 {
			go c.Close() // the child saw half a message; nothing after it can be trusted
		}
		return fmt.Errorf("transport: server %q: writing to its stdin (%d of %d bytes sent): %w", c.server, n, len(data), err)
	}
	c.in.answered(msg)
	return nil
}

// SessionID implements mcp.Connection; stdio has no session ID.
func (c *stdioConn) SessionID() string { return "" }

// Close ends the child and everything it started, as the MCP spec's stdio
// shutdown asks: it answers every request the server sent us and is still
// waiting on with a JSON-RPC error (-32603), closes stdin and gives the
// server TerminateDuration to exit, then asks the supervisor to SIGTERM
// every descendant and SIGKILL what remains after another
// TerminateDuration, and as a last resort SIGKILLs the process group. A
// request the server sends after its stdin is closed can never be
// answered, so it ends the first wait at once (SIGTERM). Close returns
// once the supervisor is reaped and the reading goroutines ended. Safe to
// call several times and concurrently.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.closeStdin()
		c.terminate()
		// The supervisor has exited, so every writer of the pipes is gone
		// unless a process escaped it; give the readers a moment to drain
		// the last lines, then force them to stop.
		done := make(chan struct{})
		go func() { c.pumps.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			c.stdout.Close()
			c.stderr.Close()
			<-done
		}
		c.stdout.Close()
		c.stderr.Close()
		closeAll(c.lifeline)
	})
	return nil
}

func (c *stdioConn) terminate() {
	grace := time.NewTimer(c.grace)
	defer grace.Stop()
	select {
	case <-c.exited:
		return
	case <-c.in.stranded:
		select {
		case <-c.exited:
			return
		default:
		}
		c.log.Info("transport: server sent a request after its stdin closed, which nothing can answer; sending SIGTERM without waiting",
			"method", c.in.strandedBy())
	case <-grace.C:
		c.log.Info("transport: server did not exit after its stdin closed; sending SIGTERM", "waited", c.grace)
	}
	_ = c.cmd.Process.Signal(sigTerm)
	select {
	case <-c.exited:
		return
	case <-time.After(2*c.grace + time.Second):
	}
	c.log.Warn("transport: supervisor did not exit; killing its process group")
	killGroup(c.cmd.Process.Pid)
	<-c.exited
}

func (c *stdioConn) wait() {
	c.exitErr = c.cmd.Wait()
	close(c.exited)
}

// readStdout turns stdout lines into messages. Each line is one frame
// (DecodeFrame); a line that is not a message is skipped (skipLine), except
// that a whole message glued onto a cut-off one is delivered
// (splitCutOff). A line over maxMsg bytes is not read whole: the calls it
// may answer fail at once (tooLarge).
func (c *stdioConn) readStdout() {
	defer c.pumps.Done()
	br := bufio.NewReaderSize(c.stdout, 64<<10)
	var buf []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(buf)+len(line) <= c.maxMsg {
				buf = append(buf, line...)
				continue
			}
			head := keepHead(nil, buf, line)
			n, derr := discardLine(br)
			c.tooLarge(head, len(buf)+len(line)+n)
			buf = nil // do not hold a multi-MB buffer for an idle connection
			if derr != nil {
				c.endRead(derr)
				return
			}
			continue
		}
		if len(buf) > 0 {
			line = append(buf, line...)
			buf = buf[:0]
			if cap(buf) > 1<<20 {
				buf = nil // do not hold a multi-MB buffer for an idle connection
			}
		}
		if len(line) > c.maxMsg {
			c.tooLarge(keepHead(nil, line), len(line))
		} else if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			// Copy: trimmed points into the reader's buffer, and the message
			// outlives the next read.
			frame := bytes.Clone(trimmed)
			msg, derr := DecodeFrame(frame)
			if derr != nil {
				if cut, m, ok := splitCutOff(frame); ok {
					c.skipLine(cut, "a message cut off (the server wrote part of a line, then a whole message)")
					msg, derr = m, nil
				} else {
					c.skipLine(frame, derr.Error())
				}
			}
			if derr == nil {
				c.in.received(msg)
				c.out.received(msg)
				c.deliver(msg)
			}
		}
		if err != nil {
			c.endRead(err)
			return
		}
	}
}

// deliver hands msg to Read. Once Close has begun nobody reads: the
// message is dropped, and reading goes on until the child's stdout ends so
// that a request it sends meanwhile is seen (inbound.received).
func (c *stdioConn) deliver(msg jsonrpc.Message) {
	select {
	case <-c.closing:
		return
	default:
	}
	select {
	case c.msgs <- msg:
	case <-c.closing:
	}
}

// discardLine reads the rest of a line and returns its length.
func discardLine(br *bufio.Reader) (int, error) {
	n := 0
	for {
		b, err := br.ReadSlice('\n')
		n += len(b)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, err
		}
	}
}

func (c *stdioConn) endRead(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
		select {
		case <-c.closing:
			err = ErrClosed
		case <-c.exited:
			// The last lines it wrote on stderr usually say why ("Cannot
			// find module …"); they are read once the pipe ends.
			t := time.NewTimer(200 * time.Millisecond)
			select {
			case <-c.stderrDone:
			case <-t.C:
			}
			t.Stop()
			err = &exitError{server: c.server, exit: c.exitErr, stderr: c.stderrTail()}
		case <-time.After(exitGrace):
			err = fmt.Errorf("transport: server %q closed its stdout: %w", c.server, io.EOF)
		}
	} else {
		err = fmt.Errorf("transport: server %q: reading its stdout: %w", c.server, err)
	}
	c.readErr = err
	close(c.msgs)
}

// exitGrace is how long a server whose stdout ended may take to be seen
// exiting before its read error says it closed its stdout (and keeps
// running); a loaded machine can take over 100 ms to reap it.
const exitGrace = time.Second

// stderrTail is how many of a server's last stderr lines an exit error
// quotes, each cut to stderrTailLine bytes.
const (
	stderrTail     = 3
	stderrTailLine = 300
)

// exitError is the read error of a stdio server that exited: its exit
// status and its last stderr lines. It wraps io.EOF.
type exitError struct {
	server string
	exit   error
	stderr []string
}

func (e *exitError) Error() string {
	msg := fmt.Sprintf("transport: server %q exited (%v)", e.server, e.exit)
	if len(e.stderr) == 0 {
		return msg + " and wrote nothing on stderr"
	}
	return msg + "; its last stderr: " + strings.Join(e.stderr, " | ")
}

func (e *exitError) Unwrap() error { return io.EOF }

// stderrTail returns the last lines of the server's stderr.
func (c *stdioConn) stderrTail() []string {
	c.tailMu.Lock()
	defer c.tailMu.Unlock()
	return slices.Clone(c.tail)
}

// readStderr logs each stderr line, capped at MaxStderrLine bytes, and
// keeps the last ones for an exit error.
func (c *stdioConn) readStderr() {
	defer c.pumps.Done()
	defer close(c.stderrDone)
	br := bufio.NewReaderSize(c.stderr, MaxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		truncated := false
		if errors.Is(err, bufio.ErrBufferFull) {
			truncated = true
			line = append([]byte(nil), line...)
			_, err = discardLine(br)
		}
		if s := strings.TrimRight(string(line), "\r\n"); s != "" {
			s = c.red.Redact(s)
			c.tailMu.Lock()
			if len(c.tail) == stderrTail {
				c.tail = slices.Delete(c.tail, 0, 1)
			}
			c.tail = append(c.tail, strings.ToValidUTF8(truncate(strings.TrimSpace(s), stderrTailLine), "\uFFFD"))
			c.tailMu.Unlock()
			attrs := []any{"line", s}
			if truncated {
				attrs = append(attrs, "truncated", true)
			}
			c.log.Info("server stderr", attrs...)
		}
		if err != nil {
			return
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
