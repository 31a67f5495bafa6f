package testkit

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Redis is a real redis-server (Debian's redis-server package) run by a
// test on a free loopback port, in a directory of t.TempDir(), with no
// persistence (--save "" --appendonly no). [Redis.Stop] and [Redis.Start]
// take it down and bring it back on the same port (a Redis outage); the
// test's cleanup stops it.
type Redis struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// StartRedis starts a redis-server for t, with the further
// command-line options args (e.g. "--requirepass", "secret"), or skips
// t when redis-server is not on PATH (fails under CI=true, which
// installs it).
func StartRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not on PATH (Debian: apt-get install redis-server)"
		if InCI() {
			t.Fatal(msg + "; CI installs it, so this is a failure")
		}
		t.Skip(msg)
	}
	r := &Redis{t: t, bin: bin, dir: t.TempDir(), args: args}
	t.Cleanup(r.Stop)
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if err := r.start(); err == nil {
			return r
		} else if attempt == 2 { // the port was taken in between: try another
			t.Fatal(err)
		}
	}
}

// Addr returns the server's HOST:PORT.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// URL returns redis://HOST:PORT/0.
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// Start starts the server again on its port after [Redis.Stop], and
// waits until it answers PING.
func (r *Redis) Start() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *Redis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	log := &bytes.Buffer{}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", r.dir, "--logfile", "", "--daemonize", "no")
	cmd.Args = append(cmd.Args, r.args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(r.Addr()) {
			r.cmd, r.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start:\n%s", r.port, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d did not answer PING within 10 s:\n%s", r.port, log)
		}
	}
}

// Stop kills the server (SIGKILL, as a crash would) and waits for it to
// exit; its data is gone. It does nothing when the server is stopped.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// ping reports whether a Redis server on addr answers PING: PONG, or
// NOAUTH from one started with --requirepass.
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (line == "+PONG\r\n" || strings.HasPrefix(line, "-NOAUTH"))
}
