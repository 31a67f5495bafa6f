package testkit

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
// sent after a replica died is refused and retried. %s is the
// frontend's address, %s the server lines.
const HAProxyConfig = `global
  maxconn 512
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

// StartHAProxy runs Debian's haproxy in front of backends (HOST:PORT
// each) with [HAProxyConfig] on a free loopback port, and returns its
// address; the test's cleanup stops it. It skips t when haproxy is not on
// PATH (fails under CI=true, which installs it).
func StartHAProxy(t testing.TB, backends []string) string {
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
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(HAProxyConfig, addr, servers.String())), 0o600); err != nil {
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
			return addr
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
