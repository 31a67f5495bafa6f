//go:build linux

package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openclaw-go/openclaw/config"
)

// These tests show how Close ends a stdio server that still waits on a
// request it sent us. They assert how the server ended (its exit status:
// 0 when it exited by itself after stdin EOF, 143 when our SIGTERM ended
// it) and what it read, never how long Close took; the durations are
// logged as information.

// waiterScript is a stdio server that sends request 7 (and, with argument
// "cancel", withdraws it with notifications/cancelled), logs every line
// that answers it on stderr, and at stdin EOF behaves like the TypeScript
// SDK: it exits only when nothing it asked is still open, else it waits
// (for an hour).
const waiterScript = `
printf '%s\n' '{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}'
open=1
if [ "$1" = cancel ]; then
	printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}'
	open=0
fi
answers=0
while IFS= read -r line; do
	case "$line" in
	*'"id":7'*) answers=$((answers+1)); open=0; printf 'answer: %s\n' "$line" >&2 ;;
	esac
done
printf 'answers: %d\n' "$answers" >&2
[ "$open" = 0 ] && exit 0
exec sleep 3600
`

// strandingScript is a stdio server that sends a request only once its
// stdin is closed, then waits for the answer (for an hour).
const strandingScript = `
while IFS= read -r line; do :; done
printf '%s\n' '{"jsonrpc":"2.0","id":"late","method":"roots/list"}'
exec sleep 3600
`

// shServer connects a `sh -c script` stdio server.
func shServer(t *testing.T, name, script string, grace time.Duration, args ...string) (*stdioConn, *logBuffer) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	log, lb := newLogger()
	r := resolve(t, name, config.ServerEntry{Command: sh, Args: append([]string{"-c", script, "sh"}, args...)},
		&Options{Logger: log, TerminateDuration: grace})
	conn, err := r.Transport.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn.(*stdioConn), lb
}

// readUntil reads messages until a request for method (any, if method is
// "") and returns it; the context is a guard against a hung test.
func readUntil(t *testing.T, conn mcp.Connection, method string) *jsonrpc.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("reading until %q: %v", method, err)
		}
		if req, ok := msg.(*jsonrpc.Request); ok && (method == "" || req.Method == method) {
			return req
		}
	}
}

// exitCode is the supervisor's exit status (the server's; 128+n when
// signal n ended it) once Close returned.
func exitCode(t *testing.T, c *stdioConn) int {
	t.Helper()
	select {
	case <-c.exited:
	default:
		t.Fatal("Close returned before the server was reaped")
	}
	var ee *exec.ExitError
	switch {
	case c.exitErr == nil:
		return 0
	case errors.As(c.exitErr, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("wait: %v", c.exitErr)
		return -1
	}
}

// stderrLines returns the server's stderr lines as logged.
func stderrLines(lb *logBuffer) []string {
	var out []string
	for _, r := range lb.records() {
		if r["msg"] == "server stderr" {
			s, _ := r["line"].(string)
			out = append(out, s)
		}
	}
	return out
}

func TestStdioCloseAnswersRequestsTheServerWaitsOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		arg    string
		answer bool   // the session answers request 7 before Close
		want   string // the answer line the server logged ("" for none)
	}{
		{name: "open at Close: answered with an error", want: `"error":{"code":-32603,"message":"client closed the connection before answering"}`},
		{name: "answered by the session: not answered again", answer: true, want: `"result":{"model":"m"`},
		{name: "withdrawn by the server: not answered", arg: "cancel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A grace of a minute: were the server not answered, it would
			// only end by SIGTERM (status 143) a minute later.
			c, lb := shServer(t, "waiter", waiterScript, time.Minute, tc.arg)
			req := readUntil(t, c, "sampling/createMessage")
			if tc.arg == "cancel" {
				readUntil(t, c, "notifications/cancelled")
			}
			if tc.answer {
				res := &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"model":"m","role":"assistant","content":{"type":"text","text":"x"}}`)}
				if err := c.Write(context.Background(), res); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			c.Close()
			t.Logf("Close took %v", time.Since(start))
			if code := exitCode(t, c); code != 0 {
				t.Fatalf("server exit status %d, want 0 (it exits by itself once nothing it asked is open); stderr %q", code, stderrLines(lb))
			}
			var answers []string
			for _, l := range stderrLines(lb) {
				if a, ok := strings.CutPrefix(l, "answer: "); ok {
					answers = append(answers, a)
				}
			}
			switch {
			case tc.want == "" && len(answers) != 0:
				t.Errorf("server read answers %q, want none", answers)
			case tc.want != "" && (len(answers) != 1 || !strings.Contains(answers[0], tc.want)):
				t.Errorf("server read answers %q, want one containing %s", answers, tc.want)
			}
		})
	}
}

func TestStdioCloseDoesNotWaitForAServerStrandedOnALateRequest(t *testing.T) {
	t.Parallel()
	// The grace is long: only the late request may end the wait early.
	c, lb := shServer(t, "strander", strandingScript, 10*time.Minute)
	start := time.Now()
	c.Close()
	t.Logf("Close took %v", time.Since(start))
	if code := exitCode(t, c); code != 128+15 {
		t.Errorf("server exit status %d, want 143 (our SIGTERM)", code)
	}
	var info []string
	for _, r := range lb.records() {
		if m, _ := r["msg"].(string); strings.Contains(m, "SIGTERM") {
			info = append(info, m+" method="+toString(r["method"]))
		}
	}
	want := "transport: server sent a request after its stdin closed, which nothing can answer; sending SIGTERM without waiting method=roots/list"
	if !slices.Equal(info, []string{want}) {
		t.Errorf("SIGTERM logged as %q, want %q", info, want)
	}
}

func toString(v any) string { s, _ := v.(string); return s }

// TestStdioCloseEverything closes server-everything, the reference
// TypeScript server, while it waits on a sampling, elicitation or roots
// request we read and did not answer (it keeps a 60 s timer per request
// and does not exit on stdin EOF while one runs), and while idle.
func TestStdioCloseEverything(t *testing.T) {
	t.Parallel()
	dir := peers(t)
	for _, tc := range []struct {
		name, caps, tool, args, method string
	}{
		{name: "idle", caps: `{}`},
		{name: "sampling open", caps: `{"sampling":{}}`, tool: "trigger-sampling-request", args: `{"prompt":"hi"}`, method: "sampling/createMessage"},
		{name: "elicitation open", caps: `{"elicitation":{}}`, tool: "trigger-elicitation-request", args: `{}`, method: "elicitation/create"},
		{name: "roots open", caps: `{"roots":{"listChanged":true}}`, method: "roots/list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log, lb := newLogger()
			r := resolve(t, "everything", config.ServerEntry{Command: "node", Args: []string{peerScript(dir, "server-everything"), "stdio"}},
				&Options{Logger: log, TerminateDuration: time.Minute})
			conn, err := r.Transport.Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			c := conn.(*stdioConn)
			write := func(line string) {
				t.Helper()
				msg, err := jsonrpc.DecodeMessage([]byte(line))
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				if err := c.Write(context.Background(), msg); err != nil {
					t.Fatal(err)
				}
			}
			write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + tc.caps + `,"clientInfo":{"name":"close-test","version":"1"}}}`)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for {
				msg, err := c.Read(ctx)
				if err != nil {
					t.Fatalf("waiting for the initialize result: %v", err)
				}
				if res, ok := msg.(*jsonrpc.Response); ok && res.ID.Raw() == int64(1) {
					break
				}
			}
			write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if tc.tool != "" {
				write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":` + tc.args + `}}`)
			}
			if tc.method != "" {
				readUntil(t, c, tc.method) // read, never answered by the session
			}
			start := time.Now()
			c.Close()
			t.Logf("Close took %v", time.Since(start))
			if code := exitCode(t, c); code != 0 {
				t.Errorf("server-everything exit status %d, want 0 (exited by itself after stdin EOF); log:\n%s", code, lb)
			}
		})
	}
}

func TestInboundTracksTheServersOpenRequests(t *testing.T) {
	t.Parallel()
	decode := func(t *testing.T, line string) jsonrpc.Message {
		t.Helper()
		m, err := jsonrpc.DecodeMessage([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		read     []string // messages read from the server, in order
		written  []string // messages we wrote, after them
		want     []any    // raw IDs open at the seal, sorted by their text
		late     string   // a message read after the seal
		stranded string   // the method it strands the server with ("" for none)
	}{
		{name: "requests with numeric and string IDs stay open",
			read: []string{`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`, `{"jsonrpc":"2.0","id":"s-2","method":"ping"}`},
			want: []any{int64(1), "s-2"}},
		{name: "an answer closes its request, result or error",
			read:    []string{`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":3,"method":"ping"}`},
			written: []string{`{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}`},
			want:    []any{int64(2)}},
		{name: "notifications/cancelled withdraws a request; an unknown or malformed one is ignored",
			read: []string{`{"jsonrpc":"2.0","id":"a","method":"sampling/createMessage","params":{}}`, `{"jsonrpc":"2.0","id":5,"method":"ping"}`,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`,
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"x":1}}}`},
			want: []any{int64(5)}},
		{name: "our requests and the server's answers are not its requests",
			read:    []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`},
			written: []string{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`}},
		{name: "a request after the seal strands the server", late: `{"jsonrpc":"2.0","id":9,"method":"roots/list"}`, stranded: "roots/list"},
		{name: "a notification after the seal does not", late: `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := newInbound()
			for _, l := range tc.read {
				in.received(decode(t, l))
			}
			for _, l := range tc.written {
				in.answered(decode(t, l))
			}
			var got []any
			for _, id := range in.seal() {
				got = append(got, id.Raw())
			}
			slices.SortFunc(got, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("open at the seal = %v, want %v", got, tc.want)
			}
			if tc.late != "" {
				in.received(decode(t, tc.late))
			}
			select {
			case <-in.stranded:
				if tc.stranded == "" || in.strandedBy() != tc.stranded {
					t.Errorf("stranded by %q, want %q", in.strandedBy(), tc.stranded)
				}
			default:
				if tc.stranded != "" {
					t.Errorf("not stranded, want stranded by %q", tc.stranded)
				}
			}
		})
	}
}

// TestStdioCloseWithAWriteStuckOnADeafServer: a server that never reads
// holds a Write of ours (and so writeMu) on a full pipe. Close cannot
// answer its open request; it gives up on that after closingWriteBudget,
// closes stdin (which fails the stuck Write) and ends the server.
func TestStdioCloseWithAWriteStuckOnADeafServer(t *testing.T) {
	t.Parallel()
	c, lb := shServer(t, "deaf", `printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"roots/list"}'; exec sleep 3600`, 100*time.Millisecond)
	readUntil(t, c, "roots/list")
	big := &jsonrpc.Request{Method: "notifications/message", Params: json.RawMessage(`"` + strings.Repeat("z", 1<<20) + `"`)}
	wrote := make(chan error, 1)
	go func() { wrote <- c.Write(context.Background(), big) }()
	for c.writeMu.TryLock() { // wait until the Write holds writeMu
		c.writeMu.Unlock()
		time.Sleep(time.Millisecond)
	}
	c.Close()
	if err := <-wrote; err == nil {
		t.Error("the Write stuck on the deaf server succeeded")
	}
	if code := exitCode(t, c); code != 128+15 {
		t.Errorf("server exit status %d, want 143 (our SIGTERM)", code)
	}
	var warned bool
	for _, r := range lb.records() {
		if r["msg"] == "transport: server stopped reading its stdin; its requests are closed unanswered" && r["requests"] == float64(1) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning that the open request was left unanswered; log:\n%s", lb)
	}
}
