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
	"strings"
	"testing"
	"time"
)

// HAProxyConfig is the haproxy.cfg of [StartHAProxy] for MCP replicas:
// sessionless requests (initialize) go round robin; a request with an
// Mcp-Session-Id goes to the replica that answered with that id (a stick
// table learns it from the initialize response), or, when that replica
// is down, to the one the id's hash picks (consistent hashing: a replica
// going away moves only its own sessions), which takes it over; /readyz is
// the health check (HTTP/1.1 with a Host the replicas accept), every
// 200 ms, one failure marks a replica down; a
// refused connection or a 503 is retried on another replica, never a
// request a replica may have run (no empty-response), and each request
// has a server connection of its own (http-server-close), so that one
// sent after a replica died is refused and retried. The stats socket
// (admin level) answers [HAProxy.WaitDown]. The first %s is the socket's
// path, then the frontend's address, then the server lines.
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
frontend mcp
  bind %s
  default_backend replicas
backend replicas
  balance hdr(Mcp-Session-Id)
  hash-type consistent
  stick-table type string len 128 size 100k expire 30m
  stick on req.hdr(Mcp-Session-Id)
  stick store-response res.hdr(Mcp-Session-Id)
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
  http-check expect status 200
  default-server inter 200ms fall 1 rise 1
%s`

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
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "  server r%d %s check\n", i, b)
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
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(HAProxyConfig, h.socket, addr, servers.String())), 0o600); err != nil {
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

// ServerStatus is server rN's health as HAProxy's stats socket reports
// it ("UP", "DOWN", "MAINT", "UP 1/2", …), or an error when the socket
// does not answer or names no such server.
func (h *HAProxy) ServerStatus(n int) (string, error) {
	c, err := net.DialTimeout("unix", h.socket, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("show stat\n")); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	// CSV: "# pxname,svname,…"; the status is the column named status.
	lines := strings.Split(string(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# ") {
		return "", fmt.Errorf("haproxy stats: unexpected answer %q", out)
	}
	col := slices.Index(strings.Split(strings.TrimPrefix(lines[0], "# "), ","), "status")
	if col < 0 {
		return "", fmt.Errorf("haproxy stats: no status column in %q", lines[0])
	}
	name := fmt.Sprintf("r%d", n)
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) > col && f[0] == "replicas" && f[1] == name {
			return f[col], nil
		}
	}
	return "", fmt.Errorf("haproxy stats: no server %s in %q", name, out)
}

// WaitDown waits until HAProxy has marked server rN down (its health
// check failed), so that no request of the test is sent to it after it
// is gone; it fails t after 10 s.
func (h *HAProxy) WaitDown(t testing.TB, n int) {
	t.Helper()
	var status string
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if status, err = h.ServerStatus(n); err == nil && strings.HasPrefix(status, "DOWN") {
			return
		}
	}
	t.Fatalf("haproxy did not mark r%d down within 10 s: status %q, %v", n, status, err)
}
