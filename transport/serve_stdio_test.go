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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveLog collects the transport's log lines safely across goroutines.
type serveLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *serveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *serveLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// serveHarness runs a go-sdk server over a ServeStdioTransport on pipes,
// with a tool "hold" that answers only after release is closed.
type serveHarness struct {
	in      *io.PipeWriter
	lines   chan map[string]any
	release chan struct{}
	log     *serveLog
	done    chan error
	tr      *ServeStdioTransport
	asked   chan error // what the "ask" tool's roots/list returned
}

func startServeHarness(t *testing.T, maxLine int) *serveHarness {
	t.Helper()
	return startServeHarnessWith(t, &ServeStdioOptions{MaxLineLength: maxLine}, `{}`)
}

// startServeHarnessWith is startServeHarness with opts (its Logger is
// replaced) and the client capabilities caps (JSON). Its server also has
// a tool "ask" that asks the client for roots/list and answers with what
// came back.
func startServeHarnessWith(t *testing.T, opts *ServeStdioOptions, caps string, local ...LocalHandler) *serveHarness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h := &serveHarness{lines: make(chan map[string]any, 64), release: make(chan struct{}), log: &serveLog{}, done: make(chan error, 1), asked: make(chan error, 1)}
	server := mcp.NewServer(&mcp.Implementation{Name: "serve-stdio-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "hold"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		//lint:ignore SA1019 the test checks that a roots request reaches the stdio client (roots: deprecated by SEP-2577, still served during its deprecation window)
		_, err := req.Session.ListRoots(ctx, nil)
		h.asked <- err
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("roots: %v", err)}}}, nil, nil
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h.in = inW
	o := *opts
	o.Logger = slog.New(slog.NewTextHandler(h.log, nil))
	tr := NewServeStdioTransport(inR, outW, &o)
	for _, l := range local {
		tr.AnswerLocally(l)
	}
	h.tr = tr
	go func() { h.done <- server.Run(ctx, tr) }()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(h.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsable stdout line": sc.Text()}
			}
			h.lines <- m
		}
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		<-readerDone
	})
	h.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
	h.expectID(t, 1)
	h.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return h
}

func (h *serveHarness) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(h.in, line+"\n"); err != nil {
		t.Fatalf("writing %.40q: %v", line, err)
	}
}

// next returns the next stdout message.
func (h *serveHarness) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case m, ok := <-h.lines:
		if !ok {
			t.Fatalf("stdout closed; server ended with %v; log:\n%s", <-h.done, h.log.String())
		}
		if _, bad := m["unparsable stdout line"]; bad {
			t.Fatalf("stdout carries a non-JSON line: %v", m)
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer; log:\n%s", h.log.String())
	}
	return nil
}

// expectID reads until the response to id and returns it.
func (h *serveHarness) expectID(t *testing.T, id float64) map[string]any {
	t.Helper()
	for {
		m := h.next(t)
		if got, ok := m["id"].(float64); ok && got == id {
			return m
		}
	}
}

func TestServeStdioBadLinesKeepServing(t *testing.T) {
	t.Parallel()
	const maxLine = 256 << 10
	deep := strings.Repeat("[", 100000)
	for _, tc := range []struct {
		name, line string
		code       float64
		reason     string // in the reply and the log
	}{
		{"invalid JSON", `{bad json`, -32700, "invalid character 'b'"},
		{"truncated object", `{"jsonrpc":"2.0","id":9,`, -32700, "unexpected end of JSON input"},
		{"two values on a line", `{"jsonrpc":"2.0","id":9,"method":"ping"} {}`, -32700, "invalid character '{' after top-level value"},
		{"two messages on a line", `{"jsonrpc":"2.0","id":9,"method":"ping"}{"jsonrpc":"2.0","id":10,"method":"ping"}`, -32700, "invalid character '{' after top-level value"},
		{"100k nested arrays", deep, -32700, "exceeded max depth"},
		{"line over the cap", `{"jsonrpc":"2.0","result":{"x":"` + strings.Repeat("a", maxLine) + `"},"id":9}`, -32700, "line longer than 262144 bytes"},
		{"empty array", `[]`, -32600, "batches are not supported"},
		{"batch", `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, "batches are not supported"},
		{"string", `"str"`, -32600, "not a JSON-RPC message object"},
		{"number", `123`, -32600, "not a JSON-RPC message object"},
		{"null", `null`, -32600, "not a JSON-RPC message object"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":9,"method":"ping"}`, -32600, `invalid message version tag "1.0"`},
		{"missing jsonrpc", `{"id":9,"method":"ping"}`, -32600, `invalid message version tag ""`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, "invalid ID type"},
		{"non-string method", `{"jsonrpc":"2.0","id":9,"method":42}`, -32600, `cannot unmarshal "42" into Go value of type string`},
		{"neither request nor response", `{"jsonrpc":"2.0"}`, -32600, "invalid request"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, `the id of request "ping" is null`},
		{"trailing comma", `{"jsonrpc":"2.0","id":9,"method":"ping"},`, -32700, "invalid character ',' after top-level value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := startServeHarness(t, maxLine)
			// A call in flight across the bad line is answered after it.
			h.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
			h.send(t, tc.line)
			m := h.next(t)
			id, hasID := m["id"]
			e, _ := m["error"].(map[string]any)
			if !hasID || id != nil || e == nil {
				t.Fatalf("bad line answered with %v, want an error with id null", m)
			}
			if e["code"] != tc.code || !strings.Contains(fmt.Sprint(e["message"]), tc.reason) {
				t.Errorf("error = %v, want code %v and a message containing %q", e, tc.code, tc.reason)
			}
			h.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
			if r := h.expectID(t, 3); r["result"] == nil {
				t.Errorf("ping after the bad line: %v", r)
			}
			close(h.release)
			r := h.expectID(t, 2)
			if !strings.Contains(fmt.Sprint(r["result"]), "released") {
				t.Errorf("call in flight across the bad line: %v", r)
			}
			_ = h.in.Close()
			if err := <-h.done; err != nil {
				t.Errorf("server ended with %v after EOF, want nil", err)
			}
			if log := h.log.String(); !strings.Contains(log, "line=4 ") || !strings.Contains(log, strings.ReplaceAll(tc.reason, `"`, `\"`)) {
				t.Errorf("log does not name line 4 and the reason %q:\n%s", tc.reason, log)
			}
		})
	}
}

// TestServeStdioQuietLines: blank lines and CRLF endings are served like
// go-sdk serves them; a rejected response is logged but never answered.
func TestServeStdioQuietLines(t *testing.T) {
	t.Parallel()
	h := startServeHarness(t, 0)
	h.send(t, "")
	h.send(t, "   \t")
	h.send(t, `{"jsonrpc":"2.0","id":{"x":1},"result":{}}`) // a response: no reply
	h.send(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`)
	h.send(t, " {\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"} \r")
	if m := h.next(t); m["id"] != float64(4) || m["result"] == nil {
		t.Fatalf("first answer after quiet lines is %v, want the ping result for id 4", m)
	}
	_ = h.in.Close()
	if err := <-h.done; err != nil {
		t.Errorf("server ended with %v after EOF, want nil", err)
	}
	if n := strings.Count(h.log.String(), "answered=false"); n != 2 {
		t.Errorf("logged %d unanswered responses, want 2:\n%s", n, h.log.String())
	}
}

// TestServeStdioFilterStream reads the filtered stream itself: what go-sdk's
// decoder is given, including a last line without a newline before EOF.
func TestServeStdioFilterStream(t *testing.T) {
	t.Parallel()
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", ""},
		{"last line without newline", ping, ping + "\n"},
		{"CRLF and blanks", "\r\n \n" + ping + "\r\n\t" + ping + " \r\n", ping + "\n" + ping + "\n"},
		{"bad lines dropped", "x\n" + ping + "\n[1]\n{}", ping + "\n"},
		{"over-long line dropped to its newline", strings.Repeat("y", 300) + "\n" + ping, ping + "\n"},
		// As Node.js decodes a line: one U+FFFD for the truncated sequence.
		{"ill-formed UTF-8 repaired", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"q":"Z` + "\xe2\x82" + `A"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"x","params":{"q":"Z` + "\uFFFD" + `A"}}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			f := &lineFilter{
				src: io.NopCloser(strings.NewReader(tc.in)),
				br:  bufio.NewReaderSize(strings.NewReader(tc.in), 16),
				max: 100,
				out: &lockedWriter{w: nopWriteCloser{&out}},
				log: slog.New(slog.DiscardHandler),
			}
			got, err := io.ReadAll(f)
			if err != nil || string(got) != tc.want {
				t.Errorf("read %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// TestServeStdioDefaultCap sends a request just over 16 MiB (go-sdk's
// default frame cap), answered by its id, and then a ping.
func TestServeStdioDefaultCap(t *testing.T) {
	t.Parallel()
	h := startServeHarness(t, 0)
	big := `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"` + strings.Repeat("a", mcp.DefaultMaxLineLength) + `"}}`
	h.send(t, big)
	h.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	m := h.next(t)
	if e, _ := m["error"].(map[string]any); m["id"] != float64(9) || e == nil || e["code"] != float64(CodeMessageTooLarge) || !strings.Contains(fmt.Sprint(e["message"]), "message too large") {
		t.Fatalf("over-long request answered with %v, want a message too large error to id 9", m)
	}
	if r := h.next(t); r["id"] != float64(3) {
		t.Fatalf("after the over-long line: %v, want the ping result for id 3", r)
	}
}

func TestServeStdioConnectOnce(t *testing.T) {
	t.Parallel()
	inR, inW := io.Pipe()
	defer inW.Close()
	_, outW := io.Pipe()
	tr := NewServeStdioTransport(inR, outW, nil)
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := tr.Connect(context.Background()); !errors.Is(err, ErrConnected) {
		t.Fatalf("second Connect: %v, want ErrConnected", err)
	}
}

// FuzzServeStdioFilter: whatever the input, every line the filter passes on
// is one JSON-RPC message go-sdk decodes, and every other non-blank line is
// answered with one error reply or logged as a response.
func FuzzServeStdioFilter(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n{bad\n[]\n",
		"\"str\"\r\n123\n{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"x\"}",
		`{"jsonrpc":"2.0","id":1,"result":{}} {}` + "\n" + strings.Repeat("[", 300),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		fl := &lineFilter{
			src: io.NopCloser(bytes.NewReader(in)),
			br:  bufio.NewReaderSize(bytes.NewReader(in), 16),
			max: 200,
			out: &lockedWriter{w: nopWriteCloser{&out}},
			log: slog.New(slog.DiscardHandler),
		}
		got, err := io.ReadAll(fl)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.SplitAfter(string(got), "\n") {
			if line == "" {
				continue
			}
			if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
				t.Fatalf("passed on %q, not one line", line)
			}
			if _, err := jsonrpc.DecodeMessage([]byte(line)); err != nil || !json.Valid([]byte(line)) {
				t.Fatalf("passed on %q: %v", line, err)
			}
		}
		for _, reply := range strings.SplitAfter(out.String(), "\n") {
			if reply == "" {
				continue
			}
			var r struct {
				ID    *json.RawMessage
				Error struct{ Code int }
			}
			if err := json.Unmarshal([]byte(reply), &r); err != nil || (r.Error.Code != CodeMessageTooLarge && r.ID != nil) || (r.Error.Code != -32700 && r.Error.Code != -32600 && r.Error.Code != CodeMessageTooLarge) {
				t.Fatalf("error reply %q", reply)
			}
		}
	})
}

// BenchmarkServeStdioFilter measures the filter's cost per valid 1 KiB
// line (go-sdk decodes the line again after it).
func BenchmarkServeStdioFilter(b *testing.B) {
	line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"t":"` + strings.Repeat("a", 960) + `"}}}` + "\n"
	in := strings.Repeat(line, b.N)
	fl := &lineFilter{
		src: io.NopCloser(strings.NewReader(in)),
		br:  bufio.NewReaderSize(strings.NewReader(in), 64<<10),
		max: mcp.DefaultMaxLineLength,
		out: &lockedWriter{w: nopWriteCloser{io.Discard}},
		log: slog.New(slog.DiscardHandler),
	}
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	if n, err := io.Copy(io.Discard, fl); err != nil || n != int64(len(in)) {
		b.Fatalf("copied %d bytes, %v; want %d", n, err, len(in))
	}
}

// TestServeStdioDrain: EOF on stdin or Shutdown does not lose the answers
// to requests already read; requests after Shutdown are refused; a
// request to the client still unanswered at EOF fails at once; the drain
// timeout abandons what is left.
func TestServeStdioDrain(t *testing.T) {
	t.Parallel()
	call := func(id int, tool string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
	}
	t.Run("EOF answers the calls in flight", func(t *testing.T) {
		t.Parallel()
		h := startServeHarness(t, 0)
		h.send(t, call(2, "hold"))
		h.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		_ = h.in.Close()
		if r := h.expectID(t, 3); r["result"] == nil {
			t.Errorf("ping before EOF: %v", r)
		}
		close(h.release)
		if r := h.expectID(t, 2); !strings.Contains(fmt.Sprint(r["result"]), "released") {
			t.Errorf("call in flight at EOF answered %v, want its result", r)
		}
		if err := <-h.done; err != nil {
			t.Errorf("server ended with %v after the drain, want nil", err)
		}
	})
	t.Run("Shutdown refuses new requests and answers the rest", func(t *testing.T) {
		t.Parallel()
		h := startServeHarness(t, 0)
		h.send(t, call(2, "hold"))
		h.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		h.expectID(t, 3) // call 2 was read before the ping was answered
		h.tr.Shutdown()
		h.tr.Shutdown() // idempotent
		h.send(t, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
		r := h.expectID(t, 4)
		e, _ := r["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32004) || !strings.Contains(fmt.Sprint(e["message"]), "shutting down: ping refused") {
			t.Errorf("request after Shutdown answered %v, want error -32004 naming ping", r)
		}
		close(h.release)
		if r := h.expectID(t, 2); !strings.Contains(fmt.Sprint(r["result"]), "released") {
			t.Errorf("call in flight at Shutdown answered %v, want its result", r)
		}
		if err := <-h.done; err != nil {
			t.Errorf("server ended with %v after the drain, want nil", err)
		}
	})
	t.Run("EOF fails the requests to the client", func(t *testing.T) {
		t.Parallel()
		h := startServeHarnessWith(t, &ServeStdioOptions{}, `{"roots":{"listChanged":true}}`)
		h.send(t, call(2, "ask"))
		for m := h.next(t); m["method"] != "roots/list"; m = h.next(t) {
		}
		_ = h.in.Close() // roots/list will never be answered
		if err := <-h.asked; err == nil || !strings.Contains(err.Error(), "closed stdin") {
			t.Errorf("roots/list after EOF returned %v, want an error naming the closed stdin", err)
		}
		if r := h.expectID(t, 2); !strings.Contains(fmt.Sprint(r["result"]), "closed stdin") {
			t.Errorf("call answered %v, want its result naming the failed roots/list", r)
		}
		if err := <-h.done; err != nil {
			t.Errorf("server ended with %v after the drain, want nil", err)
		}
	})
	t.Run("drain timeout", func(t *testing.T) {
		t.Parallel()
		h := startServeHarnessWith(t, &ServeStdioOptions{DrainTimeout: 50 * time.Millisecond}, `{}`)
		h.send(t, call(2, "hold"))
		h.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		h.expectID(t, 3)
		_ = h.in.Close() // hold is never released
		if err := <-h.done; !errors.Is(err, ErrDrainTimeout) || !strings.Contains(err.Error(), "1 of them") {
			t.Errorf("server ended with %v, want ErrDrainTimeout for 1 request", err)
		}
	})
}

// A LocalHandler answers the requests it takes on the reading goroutine,
// with its frame written as is, while the session serves the rest; lines
// DecodeFrame refuses are answered as before and never reach it, and once
// the drain began it is not asked: requests are refused as every other.
func TestServeStdioAnswerLocally(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	local := func(req *jsonrpc.Request) LocalAnswer {
		mu.Lock()
		asked = append(asked, req.Method)
		mu.Unlock()
		if req.Method != "local/echo" {
			return LocalAnswer{}
		}
		return LocalAnswer{Frame: AppendResult(nil, req.ID, req.Params)}
	}
	h := startServeHarnessWith(t, &ServeStdioOptions{}, `{}`, local)
	h.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{}}}`)
	h.send(t, `{"jsonrpc":"2.0","id":"e1","method":"local/echo","params":{"x":[1,2]}}`)
	if r := h.expectID2(t, "e1"); fmt.Sprint(r["result"]) != "map[x:[1 2]]" {
		t.Errorf("local answer %v, want the echoed params (while call 2 is held)", r)
	}
	h.send(t, `{"jsonrpc":"2.0","id":5,"method":"local/echo",`)
	if r := h.next(t); fmt.Sprint(r["error"]) == "<nil>" || r["id"] != nil {
		t.Errorf("malformed line answered %v, want a parse error with id null", r)
	}
	h.tr.Shutdown()
	h.send(t, `{"jsonrpc":"2.0","id":"e2","method":"local/echo","params":{}}`)
	r := h.expectID2(t, "e2")
	if e, _ := r["error"].(map[string]any); e == nil || e["code"] != float64(-32004) {
		t.Errorf("request after Shutdown answered %v, want error -32004", r)
	}
	close(h.release)
	if r := h.expectID(t, 2); !strings.Contains(fmt.Sprint(r["result"]), "released") {
		t.Errorf("call 2 answered %v, want its result", r)
	}
	if err := <-h.done; err != nil {
		t.Errorf("server ended with %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// initialize and tools/call were declined, so the session answered them.
	if want := []string{"initialize", "tools/call", "local/echo"}; !slices.Equal(asked, want) {
		t.Errorf("handler asked %q, want %q", asked, want)
	}
}

// A LocalAnswer.Later is answered on its own goroutine: the lines after
// its request are read and answered meanwhile, a cancelled one gets no
// answer and sees its context cancelled, and the drain at EOF waits for
// the answers still due.
func TestServeStdioAnswerLater(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cancelled := make(chan error, 1)
	local := func(req *jsonrpc.Request) LocalAnswer {
		switch req.Method {
		case "local/now":
			return LocalAnswer{Frame: AppendResult(nil, req.ID, []byte(`"now"`))}
		case "local/later":
			return LocalAnswer{Later: func(ctx context.Context) []byte {
				select {
				case <-release:
					return AppendResult(nil, req.ID, []byte(`"later"`))
				case <-ctx.Done():
					cancelled <- context.Cause(ctx)
					return AppendResult(nil, req.ID, []byte(`"cancelled"`))
				}
			}}
		}
		return LocalAnswer{}
	}
	h := startServeHarnessWith(t, &ServeStdioOptions{}, `{}`, local)
	h.send(t, `{"jsonrpc":"2.0","id":"l1","method":"local/later"}`)
	h.send(t, `{"jsonrpc":"2.0","id":"l2","method":"local/later"}`)
	h.send(t, `{"jsonrpc":"2.0","id":"n1","method":"local/now"}`)
	if r := h.next(t); r["id"] != "n1" || r["result"] != "now" {
		t.Fatalf("first answer %v, want n1's while l1 and l2 wait", r)
	}
	h.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"l2"}}`)
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request's context ended with %v, want context.Canceled", err)
	}
	h.send(t, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if r := h.next(t); r["id"] != float64(3) {
		t.Fatalf("answer %v, want the ping's (l2 cancelled: no answer)", r)
	}
	_ = h.in.Close()
	select {
	case err := <-h.done:
		t.Fatalf("session ended (%v) with l1 unanswered", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if r := h.next(t); r["id"] != "l1" || r["result"] != "later" {
		t.Errorf("answer after the release %v, want l1's", r)
	}
	if err := <-h.done; err != nil {
		t.Errorf("server ended with %v, want nil", err)
	}
	for m := range h.lines {
		t.Errorf("unexpected line after the drain: %v", m)
	}
}

// A drain that times out cancels the requests still answered later, with
// ErrDrainTimeout as the cause.
func TestServeStdioAnswerLaterDrainTimeout(t *testing.T) {
	t.Parallel()
	cause := make(chan error, 1)
	local := func(req *jsonrpc.Request) LocalAnswer {
		if req.Method != "local/stuck" {
			return LocalAnswer{}
		}
		return LocalAnswer{Later: func(ctx context.Context) []byte {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return AppendResult(nil, req.ID, []byte(`null`))
		}}
	}
	h := startServeHarnessWith(t, &ServeStdioOptions{DrainTimeout: 50 * time.Millisecond}, `{}`, local)
	h.send(t, `{"jsonrpc":"2.0","id":2,"method":"local/stuck"}`)
	_ = h.in.Close()
	if err := <-h.done; !errors.Is(err, ErrDrainTimeout) || !strings.Contains(err.Error(), "1 of them") {
		t.Errorf("server ended with %v, want ErrDrainTimeout for 1 request", err)
	}
	if err := <-cause; !errors.Is(err, ErrDrainTimeout) {
		t.Errorf("stuck request's context ended with %v, want ErrDrainTimeout", err)
	}
}

// expectID2 reads until the response to the string id and returns it.
func (h *serveHarness) expectID2(t *testing.T, id string) map[string]any {
	t.Helper()
	for {
		m := h.next(t)
		if got, ok := m["id"].(string); ok && got == id {
			return m
		}
	}
}

// EOF closes when the reader ends, after the messages before it were read,
// while their answers are still due.
func TestServeStdioEOFChannel(t *testing.T) {
	t.Parallel()
	inR, inW := io.Pipe()
	tr := NewServeStdioTransport(inR, nopWriteCloser{io.Discard}, nil)
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		inW.Close()
	}()
	msg, err := c.Read(context.Background())
	if req, ok := msg.(*jsonrpc.Request); err != nil || !ok || req.Method != "ping" {
		t.Fatalf("Read: %v, %v; want the ping", msg, err)
	}
	select {
	case <-tr.EOF():
		t.Fatal("EOF closed before the reader ended")
	default:
	}
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(context.Background())
		read <- err
	}()
	<-tr.EOF() // the reader ended; the ping is still unanswered
	select {
	case err := <-read:
		t.Fatalf("Read ended (%v) before the ping was answered", err)
	default:
	}
	id, _ := jsonrpc.MakeID(float64(1))
	if err := c.Write(context.Background(), &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := <-read; !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the answer: %v, want io.EOF", err)
	}
}

// A client that wrote part of a line and then a whole request: the cut-off
// part is answered with a parse error, and the request is served.
func TestServeStdioCutOffLine(t *testing.T) {
	t.Parallel()
	h := startServeHarness(t, 0)
	h.send(t, `{"jsonrpc":"2.0","id":7,"method":"to`+`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	m := h.next(t)
	if e, _ := m["error"].(map[string]any); m["id"] != nil || e == nil || e["code"] != float64(-32700) || !strings.Contains(fmt.Sprint(e["message"]), "cut off after 36 bytes") {
		t.Fatalf("first answer %v, want a parse error with id null for the cut-off part", m)
	}
	if r := h.expectID(t, 8); r["result"] == nil {
		t.Errorf("the whole request after the cut-off part: %v", r)
	}
}
