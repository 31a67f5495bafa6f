package testkit

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// HAProxyConfig is the haproxy.cfg of [StartHAProxy] for MCP replicas
// (docs/replicas.md): two backends over the same replicas, sharing one
// stick table. A request without an Mcp-Session-Id (initialize, an MCP
// 2026-07-28 request) goes to backend "ready", round robin among the
// replicas whose /readyz answers 200, or, when none does (Redis down
// everywhere), to "live"; its answer's Mcp-Session-Id is stored in the
// stick table. A request with an Mcp-Session-Id goes to backend "live",
// whose check is /healthz (a replica that lost Redis stays up there):
// to the replica the stick table names, or, when that one is down, to the
// one the id's hash picks (consistent hashing: a replica going away moves
// only its own sessions), which takes the session over. The checks are
// HTTP/1.1 with a Host the replicas accept, every 200 ms, one failure
// marks a replica down; a refused connection or a 503 is retried on
// another replica, never a request a replica may have run (no
// empty-response), and each request has a server connection of its own
// (http-server-close), so that one sent after a replica died is refused
// and retried. The stats socket (admin level) answers
// [HAProxy.ServerStatus]. The first %s is the socket's path, then the
// frontend's address, then the server lines of "ready", then those of
// "live".
const HAProxyConfig = `global
  maxconn 512
  stats socket %s level admin
defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch 1
  retry-on conn-failure 503
  option http-server-close
  option httpchk
  default-server inter 200ms fall 1 rise 1
frontend mcp
  bind %s
  use_backend live if { req.hdr(Mcp-Session-Id) -m found } || { nbsrv(ready) eq 0 }
  default_backend ready
backend ready
  balance roundrobin
  stick-table type string len 128 size 100k expire 30m
  stick store-response res.hdr(Mcp-Session-Id)
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
  http-check expect status 200
%s
backend live
  balance hdr(Mcp-Session-Id)
  hash-type consistent
  stick on req.hdr(Mcp-Session-Id) table ready
  stick store-response res.hdr(Mcp-Session-Id) table ready
  http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host localhost
  http-check expect status 200
%s`

// The backends of [HAProxyConfig].
const (
	// BackendReady takes the requests without a session: its check is
	// /readyz.
	BackendReady = "ready"
	// BackendLive takes the requests of a session: its check is /healthz.
	BackendLive = "live"
)

// HAProxy is a running haproxy of [StartHAProxy].
type HAProxy struct {
	// Addr is the frontend's HOST:PORT.
	Addr string
	// socket is the stats socket's path.
	socket string
}

// StartHAProxy runs Debian's haproxy in front of backends (HOST:PORT
// each, named r0, r1, … in that order) with [HAProxyConfig] on a free
// loopback port; the test's cleanup stops it. It skips t when haproxy is
// not on PATH (fails under CI=true, which installs it).
func StartHAProxy(t testing.TB, backends []string) *HAProxy {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		msg := "haproxy not on PATH (Debian: apt-get install haproxy)"
		if InCI() {
			t.Fatal(msg + "; CI installs it, so this is a failure")
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// The same ids in both backends: the shared stick table stores a
	// server's id.
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "  server r%d %s id %d check\n", i, b, i+1)
	}
	// A unix socket's path is limited to 108 bytes: t.TempDir's can be
	// longer.
	dir, err := os.MkdirTemp("", "haproxy")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &HAProxy{Addr: addr, socket: filepath.Join(dir, "stats.sock")}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(HAProxyConfig, h.socket, addr, servers.String(), servers.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "-db", "-f", cfg)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return h
		}
		select {
		case <-exited:
			t.Fatalf("haproxy exited at start:\n%s", log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy on %s did not accept within 10 s:\n%s", addr, log.String())
		}
	}
}

// ServerStatus is server rN's health in backend (BackendReady,
// BackendLive) as HAProxy's stats socket reports it ("UP", "DOWN",
// "MAINT", "UP 1/2", …), or an error when the socket does not answer or
// names no such server.
func (h *HAProxy) ServerStatus(backend string, n int) (string, error) {
	return h.serverStat(backend, n, "status")
}

// ServerSessions is the number of connections server rN of backend has
// open now (the stats' scur: a session's GET stream is one while open)
// and has had in all (stot).
func (h *HAProxy) ServerSessions(backend string, n int) (open, total int, err error) {
	v, err := h.serverStat(backend, n, "scur")
	if err == nil {
		open, err = strconv.Atoi(v)
	}
	if err == nil {
		v, err = h.serverStat(backend, n, "stot")
	}
	if err == nil {
		total, err = strconv.Atoi(v)
	}
	return open, total, err
}

// CutConnections closes every connection HAProxy has open to server rN
// of backend (the admin command "shutdown sessions server"), as a network
// failure between the balancer and the replica would: the clients'
// streams through it end, and their clients reconnect.
func (h *HAProxy) CutConnections(backend string, n int) error {
	out, err := h.command(fmt.Sprintf("shutdown sessions server %s/r%d\n", backend, n))
	if err == nil && strings.TrimSpace(out) != "" {
		err = fmt.Errorf("haproxy: shutdown sessions server %s/r%d: %s", backend, n, strings.TrimSpace(out))
	}
	return err
}

// command sends one command to the stats socket and returns its answer.
func (h *HAProxy) command(cmd string) (string, error) {
	c, err := net.DialTimeout("unix", h.socket, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	return string(out), err
}

// serverStat is the column col of server rN of backend in "show stat".
func (h *HAProxy) serverStat(backend string, n int, col string) (string, error) {
	out, err := h.command("show stat\n")
	if err != nil {
		return "", err
	}
	// CSV: "# pxname,svname,…".
	lines := strings.Split(out, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") {
		return "", fmt.Errorf("haproxy stats: unexpected answer %q", out)
	}
	i := slices.Index(strings.Split(strings.TrimPrefix(lines[0], "# "), ","), col)
	if i < 0 {
		return "", fmt.Errorf("haproxy stats: no %s column in %q", col, lines[0])
	}
	name := fmt.Sprintf("r%d", n)
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) > i && f[0] == backend && f[1] == name {
			return f[i], nil
		}
	}
	return "", fmt.Errorf("haproxy stats: no server %s/%s in %q", backend, name, out)
}

// WaitStatus waits until HAProxy reports server rN of backend with a
// status starting with want ("UP", "DOWN"); it fails t after 10 s.
func (h *HAProxy) WaitStatus(t testing.TB, backend string, n int, want string) {
	t.Helper()
	var status string
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if status, err = h.ServerStatus(backend, n); err == nil && strings.HasPrefix(status, want) {
			return
		}
	}
	t.Fatalf("haproxy did not report %s/r%d %s within 10 s: status %q, %v", backend, n, want, status, err)
}

// WaitDown waits until HAProxy has marked server rN down in both
// backends (its health checks failed), so that no request of the test is
// sent to it after it is gone; it fails t after 10 s.
func (h *HAProxy) WaitDown(t testing.TB, n int) {
	t.Helper()
	h.WaitStatus(t, BackendReady, n, "DOWN")
	h.WaitStatus(t, BackendLive, n, "DOWN")
}
