//go:build linux

package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/procfs"
)

// recordingTransport remembers the connection it made, so tests can see the
// supervisor's PID.
type recordingTransport struct {
	mcp.Transport
	conn mcp.Connection
}

func (r *recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	r.conn = c
	return c, err
}

func (r *recordingTransport) supervisorPID() int { return r.conn.(*stdioConn).cmd.Process.Pid }

func misbehaveEntry(args ...string) config.ServerEntry {
	return config.ServerEntry{Command: misbehaveBin, Args: args}
}

func spawnPIDs(t *testing.T, cs *mcp.ClientSession) []int {
	t.Helper()
	var pids []int
	if err := json.Unmarshal([]byte(callText(t, cs, "spawn", nil)), &pids); err != nil || len(pids) != 3 {
		t.Fatalf("spawn answered %v, %v", pids, err)
	}
	for _, p := range pids {
		if !procfs.Alive(p) {
			t.Fatalf("pid %d of %v not alive after spawn", p, pids)
		}
	}
	return pids
}

func TestStdioJunkStderrEnvAndLargeMessages(t *testing.T) {
	t.Parallel()
	log, lb := newLogger()
	lookup := func(k string) (string, bool) {
		switch k {
		case "PATH":
			return os.Getenv("PATH"), true
		case "HOME":
			return "/home/test", true
		case "SECRET_OF_OURS":
			return "must-not-leak", true
		}
		return "", false
	}
	e := misbehaveEntry("-banner")
	// GORACE: a -race build's supervisor sets its own and must give the
	// server back the configured value.
	e.Env = map[string]any{"MISBEHAVE_SECRET": "hunter2-very-secret", "COUNT": 3.0, "FLAG": true, "GITHUB_TOKEN": "ghtok", "GORACE": "halt_on_error=1"}
	r := resolve(t, "junky", e, &Options{Logger: log, LookupEnv: lookup})
	cs := connect(t, r.Transport, "")

	if got := callText(t, cs, "echo", map[string]any{"text": "hi"}); got != "echo:hi" {
		t.Errorf("echo = %q", got)
	}
	if got := callText(t, cs, "noise", nil); got != "noisy" {
		t.Errorf("noise = %q (junk between messages must not end the session)", got)
	}
	if got := callText(t, cs, "echo", map[string]any{"text": "after"}); got != "echo:after" {
		t.Errorf("echo after noise = %q", got)
	}

	var env []string
	if err := json.Unmarshal([]byte(callText(t, cs, "env", nil)), &env); err != nil {
		t.Fatal(err)
	}
	slices.Sort(env) // the order of an environment means nothing
	want := []string{"COUNT=3", "FLAG=true", "GITHUB_TOKEN=ghtok", "GORACE=halt_on_error=1", "HOME=/home/test", "MISBEHAVE_SECRET=hunter2-very-secret", "PATH=" + os.Getenv("PATH")}
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Errorf("child env:\n%s\nwant:\n%s", strings.Join(env, "\n"), strings.Join(want, "\n"))
	}

	for _, size := range []int{3 << 20, 9 << 20} {
		if got := callText(t, cs, "echo", map[string]any{"size": size}); len(got) != size {
			t.Errorf("echo of %d bytes returned %d bytes", size, len(got))
		}
	}
	cs.Close()

	out := lb.String()
	if strings.Contains(out, "hunter2-very-secret") {
		t.Errorf("env value leaked into the log:\n%s", truncate(out, 2000))
	}
	var sawSecretLine, sawLong, sawBanner, sawVersion bool
	for _, rec := range lb.records() {
		if rec["server"] != "junky" {
			t.Errorf("log record without server=junky: %v", rec)
		}
		line, _ := rec["line"].(string)
		switch {
		case rec["msg"] == "server stderr" && strings.HasPrefix(line, "misbehave starting, secret=***"):
			sawSecretLine = true
		case rec["msg"] == "server stderr" && strings.HasPrefix(line, "xxx"):
			sawLong = len(line) == MaxStderrLine && rec["truncated"] == true
		case strings.Contains(fmt.Sprint(rec["msg"]), "not JSON-RPC") && line == "Server starting...":
			sawBanner = true
		case strings.Contains(fmt.Sprint(rec["msg"]), "not JSON-RPC") && strings.Contains(line, `"1.0"`):
			sawVersion = true
		}
	}
	if !sawSecretLine || !sawLong || !sawBanner || !sawVersion {
		t.Errorf("stderr line redacted %t, long line capped at %d %t, banner logged %t, bad version logged %t; log:\n%s",
			sawSecretLine, MaxStderrLine, sawLong, sawBanner, sawVersion, truncate(out, 3000))
	}
}

func TestStdioBothProtocolRevisions(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "2025-11-25"} {
		t.Run("version="+v, func(t *testing.T) {
			t.Parallel()
			log, _ := newLogger()
			cs := connect(t, resolve(t, "rev", misbehaveEntry(), &Options{Logger: log}).Transport, v)
			if got := callText(t, cs, "echo", map[string]any{"text": v}); got != "echo:"+v {
				t.Errorf("echo = %q", got)
			}
		})
	}
}

func TestStdioExitMidCall(t *testing.T) {
	t.Parallel()
	log, _ := newLogger()
	cs := connect(t, resolve(t, "quitter", misbehaveEntry(), &Options{Logger: log}).Transport, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exit"})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("call to a server that exits: err=%v ctx=%v; want a connection error before the deadline", err, ctx.Err())
	}
	if err := cs.Wait(); err == nil {
		t.Log("session ended without error") // either is fine; what matters is that it ended
	}
}

func TestStdioCloseKillsTree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		hang bool
	}{
		{"cooperative", nil, false},
		{"ignores SIGTERM and stdin EOF, hung in a call", []string{"-ignore-term"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log, _ := newLogger()
			rt := &recordingTransport{Transport: resolve(t, "tree", misbehaveEntry(tc.args...),
				&Options{Logger: log, TerminateDuration: 200 * time.Millisecond}).Transport}
			cs := connect(t, rt, "")
			pids := append(spawnPIDs(t, cs), rt.supervisorPID())
			if tc.hang {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hang"})
					done <- err
				}()
				defer func() { cancel(); <-done }()
			}
			if err := cs.Close(); err != nil && !errors.Is(err, ErrClosed) {
				t.Logf("Close: %v", err)
			}
			waitGone(t, pids)
		})
	}
}

func TestStdioSIGKILLOfOurProcessKillsTree(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(self, "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=sigkill", "MISBEHAVE_BIN="+misbehaveBin)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper: %v", err)
	}
	var pids []int
	if err := json.Unmarshal([]byte(line), &pids); err != nil || len(pids) != 4 {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper printed %q", line)
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	waitGone(t, pids)
}

// runSIGKILLHelper connects to the misbehave server, makes it start
// grandchildren, prints their PIDs, the server's and the supervisor's, then
// waits to be killed.
func runSIGKILLHelper() int {
	r, err := Resolve("victim", config.ServerEntry{Command: os.Getenv("MISBEHAVE_BIN")}, quiet())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rt := &recordingTransport{Transport: r.Transport}
	c := mcp.NewClient(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	ctx := context.Background()
	cs, err := c.Connect(ctx, rt, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "spawn"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var pids []int
	_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &pids)
	pids = append(pids, rt.supervisorPID())
	b, _ := json.Marshal(pids)
	fmt.Println(string(b))
	select {}
}

func TestStdioBlockedEnvIsNotStarted(t *testing.T) {
	t.Parallel()
	e := misbehaveEntry()
	e.Env = map[string]any{"LD_PRELOAD": "/tmp/evil.so", " node_options ": "--require x", "OK": "1"}
	_, err := Resolve("evil", e, nil)
	var be *BlockedEnvError
	if !errors.As(err, &be) {
		t.Fatalf("Resolve = %v, want *BlockedEnvError", err)
	}
	if strings.Join(be.Keys, ",") != " node_options ,LD_PRELOAD" || be.Server != "evil" {
		t.Errorf("BlockedEnvError = %+v", be)
	}
	msg := err.Error()
	for _, want := range []string{`"evil"`, `"LD_PRELOAD"`, `" node_options "`, "not started"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %s", msg, want)
		}
	}
	if strings.Contains(msg, "evil.so") {
		t.Errorf("error %q quotes an env value", msg)
	}
}

func TestStdioStartErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		e    config.ServerEntry
		want string
	}{
		{"missing command", config.ServerEntry{Command: "no-such-mcp-server-xyz"}, `command "no-such-mcp-server-xyz" not found`},
		{"missing cwd", config.ServerEntry{Command: misbehaveBin, Cwd: "/no/such/dir"}, "cwd /no/such/dir is not a directory"},
		{"relative command in cwd", config.ServerEntry{Command: "./nothing-here", Cwd: os.TempDir()}, "is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := resolve(t, "bad", tc.e, nil)
			_, err := r.Transport.Connect(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `server "bad"`) {
				t.Errorf("Connect = %v, want an error naming the server and containing %q", err, tc.want)
			}
		})
	}
}

func TestStdioWriteToAServerThatStoppedReading(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command")
	}
	o := quiet()
	o.TerminateDuration = 100 * time.Millisecond
	r := resolve(t, "deaf", config.ServerEntry{Command: sleep, Args: []string{"1000"}}, o)
	conn, err := r.Transport.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := &jsonrpc.Request{Method: "notifications/message", Params: json.RawMessage(`"` + strings.Repeat("z", 1<<20) + `"`)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- conn.Write(ctx, big) }()
	// Cancel once the message is partly in the pipe: the write has begun.
	raw, err := conn.(*stdioConn).stdin.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for queued := 0; queued == 0; time.Sleep(time.Millisecond) {
		var errno syscall.Errno
		_ = raw.Control(func(fd uintptr) {
			var n int32
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
			queued = int(n)
		})
		if errno != 0 {
			t.Fatalf("FIONREAD on the stdin pipe: %v", errno)
		}
	}
	cancel()
	err = <-done
	if err == nil || !strings.Contains(err.Error(), `server "deaf"`) || !strings.Contains(err.Error(), "bytes sent") {
		t.Fatalf("Write = %v; want the interrupted partial write reported", err)
	}
	if _, err := conn.Read(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after a torn write = %v, want ErrClosed", err)
	}
	if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "ping"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after a torn write = %v, want ErrClosed", err)
	}
}

// connTransport hands out one connection made beforehand.
type connTransport struct{ conn mcp.Connection }

func (c connTransport) Connect(context.Context) (mcp.Connection, error) { return c.conn, nil }

func TestStdioSurvivesTheExitOfTheStartingThread(t *testing.T) {
	t.Parallel()
	rt := &recordingTransport{Transport: resolve(t, "threaded", misbehaveEntry(), quiet()).Transport}
	type result struct {
		conn mcp.Connection
		tid  int
		err  error
	}
	var res result
	for {
		ch := make(chan result, 1)
		go func() {
			// Never unlocked: the OS thread that forked the supervisor exits
			// with this goroutine (a parent-death signal would fire now).
			runtime.LockOSThread()
			c, err := rt.Connect(context.Background())
			ch <- result{c, syscall.Gettid(), err}
		}()
		res = <-ch
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.tid != os.Getpid() {
			break
		}
		// The Go runtime never ends the main thread; try again elsewhere.
		res.conn.Close()
	}
	task := fmt.Sprintf("/proc/self/task/%d", res.tid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(task); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not exit", res.tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cs := connect(t, connTransport{res.conn}, "")
	for i := range 3 {
		if got := callText(t, cs, "echo", map[string]any{"text": "alive"}); got != "echo:alive" {
			t.Errorf("call %d: echo = %q", i, got)
		}
	}
	if !procfs.Alive(rt.supervisorPID()) {
		t.Error("the supervisor died with the thread that started it")
	}
}

// A server that dies at start says why: its exit status and the last lines
// it wrote on stderr are in the error its client sees, without -v.
func TestStdioCrashAtStartQuotesStderr(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	log, _ := newLogger()
	script := `echo "node:internal/modules: starting" >&2; echo "Error: Cannot find module '/srv/missing.js'" >&2; exit 1`
	r := resolve(t, "crashy", config.ServerEntry{Command: sh, Args: []string{"-c", script}}, &Options{Logger: log})
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = client.Connect(ctx, r.Transport, nil)
	want := `transport: server "crashy" exited (exit status 1); its last stderr: node:internal/modules: starting | Error: Cannot find module '/srv/missing.js'`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("connect: %v\nwant it to hold %q", err, want)
	}
}
