package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/internal/procfs"
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
	// Stderr also receives the child's stderr, which [Serve.Stderr] keeps in
	// any case. Nil sends it nowhere else.
	Stderr io.Writer
	// ProtocolVersion is the MCP revision requested in initialize. Empty
	// means [DefaultProtocolVersion]. "latest" lets go-sdk negotiate its
	// newest revision (server/discover first, then initialize).
	ProtocolVersion string
	// ClientName is the clientInfo.name sent in initialize. Empty means
	// "e2e".
	ClientName string
}

// StartServe starts `openclaw mcp serve` (g.Bin) against g with the token
// read from tokenFile (so that it never shows in a process listing) and
// args appended, under a go-sdk client named clientName that negotiates its
// newest protocol revision, and completes the MCP handshake.
func (g *Gateway) StartServe(ctx context.Context, tokenFile, clientName string, args ...string) (*Serve, error) {
	cmd := append([]string{g.Bin, "mcp", "serve", "--url", g.URL, "--token-file", tokenFile}, args...)
	return StartServe(ctx, ServeOptions{Command: cmd, ClientName: clientName, ProtocolVersion: "latest"})
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
	stderr   *LockedBuffer
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
		name = "e2e"
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
		return nil, fmt.Errorf("e2e: MCP handshake with %q: %w", opts.Command[0], err)
	}
	s.Initialized = time.Since(s.Spawned)
	s.Session = cs
	return s, nil
}

// spawn starts the child with its stdin and stdout on pipes, and a
// goroutine that reaps it. It returns the read end of the child's stdout.
func spawn(opts ServeOptions) (*Serve, *os.File, error) {
	if len(opts.Command) == 0 {
		return nil, nil, errors.New("e2e: ServeOptions.Command is empty")
	}
	// Own pipes rather than cmd.StdoutPipe: cmd.Wait must not close our
	// ends while the client session still reads.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("e2e: creating stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, fmt.Errorf("e2e: creating stdout pipe: %w", err)
	}
	cmd := exec.Command(opts.Command[0], opts.Command[1:]...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdin, cmd.Stdout = inR, outW
	stderr := &LockedBuffer{}
	cmd.Stderr = stderr
	if opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(stderr, opts.Stderr)
	}
	// Own process group, so that Kill can reach the whole tree (the real
	// openclaw re-spawns itself).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	rec := newRecorder()
	s := &Serve{Raw: rec, cmd: cmd, stderr: stderr, done: make(chan struct{})}
	s.Spawned = time.Now()
	rec.start = s.Spawned
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, nil, fmt.Errorf("e2e: starting %q: %w", opts.Command[0], err)
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
		return Exit{}, fmt.Errorf("e2e: waiting for exit after stdin EOF: %w", ctx.Err())
	}
	e := Exit{After: time.Since(t0), Code: s.cmd.ProcessState.ExitCode()}
	for _, p := range tree {
		if procfs.Alive(p.Pid) {
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

// Close ends the session as an MCP client does: it closes the child's
// stdin and waits for the exit, sending SIGTERM to the child's process
// group after 5 s and SIGKILL after 5 s more. It returns the child's wait
// error (an *exec.ExitError for an exit code other than 0).
func (s *Serve) Close() error {
	s.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, sig)
			continue
		}
		break
	}
	<-s.done
	if s.Session != nil {
		s.Session.Close()
	}
	return s.waitErr
}

// ExitCode is the child's exit code once it has exited: -1 while it runs
// or when a signal ended it.
func (s *Serve) ExitCode() int {
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Stderr returns what the child wrote on stderr so far.
func (s *Serve) Stderr() string { return s.stderr.String() }

// Result is a tools/call result reduced to what a user reads: the text of
// the first content block, the error flag and the structured content.
type Result struct {
	Text       string
	IsError    bool
	Structured json.RawMessage
}

// Call calls a tool and reduces the result; a JSON-RPC error is an error.
func (s *Serve) Call(ctx context.Context, tool string, args map[string]any) (*Result, error) {
	res, err := s.Session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, err)
	}
	r := &Result{IsError: res.IsError}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			r.Text = tc.Text
		}
	}
	if res.StructuredContent != nil {
		r.Structured, _ = json.Marshal(res.StructuredContent)
	}
	return r, nil
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
	for _, c := range procfs.Descendants(s.Pid()) {
		out = append(out, Proc{Pid: c, Name: procName(c)})
	}
	return out
}

// LockedBuffer is a strings.Builder safe for one writer and concurrent
// readers: a child process's stderr, a logger's output.
type LockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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

// newRecorder returns an empty recorder whose times count from now.
func newRecorder() *Recorder { return &Recorder{start: time.Now()} }

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
