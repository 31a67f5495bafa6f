package testkit

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	args []string    // "PORT" stands for port
	tls  *tls.Config // the client side, for StartRedisTLS

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
	if slices.Contains(args, "--tls-port") {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(args[slices.Index(args, "--tls-ca-cert-file")+1])
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("the test CA: %v", err)
		}
		r.tls = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	}
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

// StartRedisTLS starts a redis-server for t that speaks TLS only (its
// certificate, for 127.0.0.1 and localhost, signed by a CA made here),
// and returns it with the CA's PEM file, for clients to trust (Go's
// SSL_CERT_FILE). Its URL is then rediss://. Skips as [StartRedis] does.
func StartRedisTLS(t testing.TB) (r *Redis, caFile string) {
	t.Helper()
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestCerts(t, dir)
	r = StartRedis(t, "--tls-port", "PORT", "--port", "0", "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	return r, caFile
}

// Addr returns the server's HOST:PORT.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// URL returns redis://HOST:PORT/0, or rediss:// for [StartRedisTLS].
func (r *Redis) URL() string {
	if r.tls != nil {
		return "rediss://" + r.Addr() + "/0"
	}
	return "redis://" + r.Addr() + "/0"
}

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
	for _, a := range r.args {
		if a == "PORT" {
			a = strconv.Itoa(r.port)
		}
		cmd.Args = append(cmd.Args, a)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(r.Addr(), r.tls) {
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
func ping(addr string, tc *tls.Config) bool {
	d := &net.Dialer{Timeout: time.Second}
	var c net.Conn
	var err error
	if tc != nil {
		c, err = tls.DialWithDialer(d, "tcp", addr, tc)
	} else {
		c, err = d.Dial("tcp", addr)
	}
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

// writeTestCerts writes a CA and a server certificate it signs for
// 127.0.0.1 and localhost (ECDSA P-256, valid for a day) into dir.
func writeTestCerts(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "openclaw test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("redis.pem", "CERTIFICATE", leafDER), write("redis.key", "EC PRIVATE KEY", keyDER)
}
