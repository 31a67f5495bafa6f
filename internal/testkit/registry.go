package testkit

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// DockerRegistry is Debian's CNCF distribution registry (package
// docker-registry, distribution 2.8), which has no OCI referrers API.
const DockerRegistry = "/usr/bin/docker-registry"

// Registry is a docker-registry started by [StartRegistry]: plain HTTP on
// a loopback port, storage in a temp folder.
type Registry struct {
	// Host is "127.0.0.1:PORT", what an oci:// reference names.
	Host string
	// Storage is the registry's filesystem storage root folder.
	Storage string
	t       testing.TB
	cfg     string
	log     string
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited
}

// StartRegistry starts a docker-registry for the test on a free loopback
// port, with its storage in t.TempDir(), and stops it at cleanup. A
// missing docker-registry skips the test (fails under CI=true).
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	if _, err := os.Stat(DockerRegistry); err != nil {
		Missing(t, "docker-registry (apt-get install docker-registry)")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	cfg := filepath.Join(dir, "config.yml")
	yml := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "storage"), host)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Registry{Host: host, Storage: filepath.Join(dir, "storage"), t: t, cfg: cfg, log: filepath.Join(dir, "registry.log")}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Start starts the registry again after [Registry.Stop] (same port, same
// storage) and waits until it answers /v2/.
func (r *Registry) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(DockerRegistry, "serve", r.cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		r.t.Fatalf("docker-registry: %v", err)
	}
	logf.Close()
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() { exited <- cmd.Wait(); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			r.t.Fatalf("docker-registry exited: %v\n%s", err, r.Log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			r.t.Fatalf("docker-registry did not answer on %s\n%s", r.Host, r.Log())
		}
	}
	r.cmd, r.done = cmd, done
}

// Stop kills the registry (its storage stays); Start brings it back.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
}

// Log returns what the registry printed.
func (r *Registry) Log() string {
	data, _ := os.ReadFile(r.log)
	return strings.TrimSpace(string(data))
}

// BlobPath is where the registry stores the blob of digest d
// ("sha256:HEX"), for a test that tampers with it.
func (r *Registry) BlobPath(d string) string {
	hex := strings.TrimPrefix(d, "sha256:")
	return filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}
