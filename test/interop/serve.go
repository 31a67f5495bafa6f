// Package interop drives an `openclaw mcp serve` process (the real OpenClaw
// 2026.9.6 one or ours) as a real MCP client would, for interop checks and
// side-by-side benchmarks against a real OpenClaw Gateway.
//
// It is test tooling, run by bench/interop.sh and bench/serve-vs-openclaw.sh
// through the ocinterop command; nothing in the product imports it.
//
// A [Serve] is one child process spoken to over stdio with the go-sdk client
// (protocol 2025-06-18 by default, what the real OpenClaw answers). Every line
// exchanged is also recorded raw, so that results can be compared byte for
// byte and notifications the go-sdk client ignores (notifications/claude/channel)
// can be seen:
//
//	s, err := interop.StartServe(ctx, interop.ServeOptions{
//		Command: []string{"bin/openclaw", "mcp", "serve", "--url", url, "--token", tok},
//	})
//	if err != nil { … }
//	defer s.Kill()
//	res, err := s.Session.CallTool(ctx, &mcp.CallToolParams{Name: "conversations_list"})
//	exit, err := s.CloseStdin(ctx) // exit latency after stdin EOF, exit code
package interop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultProtocolVersion is the MCP revision the client requests unless
// [ServeOptions.ProtocolVersion] says otherwise: the one the real
// `openclaw mcp serve` 2026.9.6 answers (docs/protocol-facts.md, mcp serve initialize).
const DefaultProtocolVersion = "2025-06-18"

// ServeOptions describes one `mcp serve` child process.
type ServeOptions struct {
	// Command is the argv of the server, for example
	// {"bin/openclaw", "mcp", "serve", "--url", "ws://127.0.0.1:18789", "--token", "t"}.
	// Command[0] is looked up in PATH when it has no slash. Required.
	Command []string
	// Env is appended to the current environment of the calling process.
	Env []string
	// Stderr receives the child's stderr. Nil discards it.
	Stderr io.Writer
	// ProtocolVersion is the MCP revision requested in initialize. Empty
	// means [DefaultProtocolVersion]. "latest" lets go-sdk negotiate its
	// newest revision (server/discover first, then initialize).
	ProtocolVersion string
	// ClientName is the clientInfo.name sent in initialize. Empty means
	// "ocinterop".
	ClientName string
}

// Serve is a running `mcp serve` child with an initialized MCP client
// session. Its methods are safe for concurrent use, except that
// [Serve.CloseStdin] and [Serve.Kill] end the session.
type Serve struct {
	// Session is the initialized go-sdk client session.
	Session *mcp.ClientSession
	// Spawned is when the child was started.
	Spawned time.Time
	// Initialized is the time from spawn to the initialize response (or to
	// the server/discover response with ProtocolVersion "latest").
	Initialized time.Duration
	// Raw records every JSON-RPC line written to and read from the child.
	Raw *Recorder

	cmd      *exec.Cmd
	stdin    *onceCloser
	done     chan struct{} // closed when cmd.Wait returned
	waitErr  error         // set before done is closed
	killOnce sync.Once
}

// StartServe starts the child and runs the MCP handshake. On error the child
// is killed and reaped. The ctx bounds the handshake only; the child lives
// until [Serve.CloseStdin] or [Serve.Kill].
func StartServe(ctx context.Context, opts ServeOptions) (*Serve, error) {
	s, outR, err := spawn(opts)
	if err != nil {
		return nil, err
	}
	name := opts.ClientName
	if name == "" {
		name = "ocinterop"
	}
	pv := opts.ProtocolVersion
	switch pv {
	case "":
		pv = DefaultProtocolVersion
	case "latest":
		pv = ""
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "0.1.0"}, nil)
	tr := &mcp.IOTransport{
		Reader: s.Raw.reader(outR),
		Writer: s.Raw.writer(s.stdin),
	}
	cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		s.Kill()
		return nil, fmt.Errorf("interop: MCP handshake with %q: %w", opts.Command[0], err)
	}
	s.Initialized = time.Since(s.Spawned)
	s.Session = cs
	return s, nil
}

// spawn starts the child with its stdin and stdout on pipes, and a
// goroutine that reaps it. It returns the read end of the child's stdout.
func spawn(opts ServeOptions) (*Serve, *os.File, error) {
	if len(opts.Command) == 0 {
		return nil, nil, errors.New("interop: ServeOptions.Command is empty")
	}
	// Own pipes rather than cmd.StdoutPipe: cmd.Wait must not close our
	// ends while the client session still reads.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("interop: creating stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, fmt.Errorf("interop: creating stdout pipe: %w", err)
	}
	cmd := exec.Command(opts.Command[0], opts.Command[1:]...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.Stderr = opts.Stderr
	// Own process group, so that Kill can reach the whole tree (the real
	// openclaw re-spawns itself).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	rec := NewRecorder()
	s := &Serve{Raw: rec, cmd: cmd, done: make(chan struct{})}
	s.Spawned = time.Now()
	rec.start = s.Spawned
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, nil, fmt.Errorf("interop: starting %q: %w", opts.Command[0], err)
	}
	inR.Close()
	outW.Close()
	s.stdin = &onceCloser{WriteCloser: inW}
	go func() { // owner: s; ends when the child exits (Kill guarantees it)
		s.waitErr = cmd.Wait()
		close(s.done)
	}()

	return s, outR, nil
}

// Pid is the process id of the direct child.
func (s *Serve) Pid() int { return s.cmd.Process.Pid }

// Exit describes how the child ended after [Serve.CloseStdin].
type Exit struct {
	// After is the time from closing stdin to the child's exit.
	After time.Duration
	// Code is the exit code; -1 when the child was killed by a signal.
	Code int
	// Leftover lists descendants still alive when the child exited (pid and
	// name), which a well-behaved server leaves none of.
	Leftover []Proc
}

// CloseStdin closes the child's stdin (what an MCP client does to end a
// stdio server) and waits for the child to exit or ctx to end. On ctx's end
// the child is killed and ctx's error returned. The client session is closed
// afterwards in both cases.
func (s *Serve) CloseStdin(ctx context.Context) (Exit, error) {
	tree := s.descendants()
	t0 := time.Now()
	s.stdin.Close()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.Kill()
		return Exit{}, fmt.Errorf("interop: waiting for exit after stdin EOF: %w", ctx.Err())
	}
	e := Exit{After: time.Since(t0), Code: s.cmd.ProcessState.ExitCode()}
	for _, p := range tree {
		if alive(p.Pid) {
			e.Leftover = append(e.Leftover, p)
		}
	}
	if s.Session != nil {
		s.Session.Close()
	}
	return e, nil
}

// Kill ends the child's whole process group with SIGKILL, waits for it and
// closes the session. Safe to call more than once and after CloseStdin.
func (s *Serve) Kill() {
	s.killOnce.Do(func() {
		select {
		case <-s.done:
		default:
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		// Descendants that left the group are not ours to hunt; the group
		// kill covers the real openclaw's self re-spawn.
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.stdin.Close()
		if s.Session != nil {
			s.Session.Close()
		}
	})
}

// Exited reports whether the child has exited, and its wait error if so.
func (s *Serve) Exited() (bool, error) {
	select {
	case <-s.done:
		return true, s.waitErr
	default:
		return false, nil
	}
}

func (s *Serve) descendants() []Proc {
	var out []Proc
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range children(pid) {
			out = append(out, Proc{Pid: c, Name: procName(c)})
			walk(c)
		}
	}
	walk(s.Pid())
	return out
}

func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z) is dead for our purpose.
	for i := len(st) - 1; i > 0; i-- {
		if st[i] == ')' && i+2 < len(st) {
			return st[i+2] != 'Z'
		}
	}
	return true
}

type onceCloser struct {
	io.WriteCloser
	once sync.Once
	err  error
}

func (c *onceCloser) Close() error {
	c.once.Do(func() { c.err = c.WriteCloser.Close() })
	return c.err
}

// Line is one newline-delimited JSON-RPC message seen on the child's stdio.
type Line struct {
	// T is the time since spawn.
	T time.Duration
	// Out is true for a line written to the child (client → server).
	Out bool
	// Text is the line without its newline.
	Text string
}

// Recorder keeps every line exchanged with a child. Safe for concurrent use.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	lines []Line
}

// NewRecorder returns an empty recorder whose times count from now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Lines returns a copy of the lines recorded so far.
func (r *Recorder) Lines() []Line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Line(nil), r.lines...)
}

func (r *Recorder) add(out bool, text string) {
	r.mu.Lock()
	r.lines = append(r.lines, Line{T: time.Since(r.start), Out: out, Text: text})
	r.mu.Unlock()
}

// reader copies src to the returned reader, recording each complete line.
func (r *Recorder) reader(src io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { // owner: the Recorder; ends when src reaches EOF or pr is closed
		br := bufio.NewReaderSize(src, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				r.add(false, string(trimNL(line)))
				if _, werr := pw.Write(line); werr != nil {
					src.Close()
					return
				}
			}
			if err != nil {
				src.Close()
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

func (r *Recorder) writer(dst io.WriteCloser) io.WriteCloser {
	return &recWriter{r: r, dst: dst}
}

type recWriter struct {
	r   *Recorder
	dst io.WriteCloser
	mu  sync.Mutex
	buf []byte
}

func (w *recWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	for {
		i := indexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.r.add(true, string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	w.mu.Unlock()
	return w.dst.Write(p)
}

func (w *recWriter) Close() error { return w.dst.Close() }

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Ready waits until the server answers conversations_list with a success,
// that is until its Gateway connection is up and subscribed (tools that need
// the Gateway wait for that; docs/protocol-facts.md, mcp serve lifecycle), for at most timeout.
func Ready(ctx context.Context, s *Serve, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := s.Session.CallTool(ctx, &mcp.CallToolParams{Name: "conversations_list", Arguments: map[string]any{"limit": 1}})
	if err != nil {
		return fmt.Errorf("interop: waiting for the Gateway connection: %w", err)
	}
	if r.IsError {
		return fmt.Errorf("interop: waiting for the Gateway connection: conversations_list: %s", ResultText(r))
	}
	return nil
}
