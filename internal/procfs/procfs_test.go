package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// A child and its own child are found below us, with their parents.
func TestDescendants(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var grandchild int
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	for _, c := range buf[:n] {
		if c >= '0' && c <= '9' {
			grandchild = grandchild*10 + int(c-'0')
		}
	}
	t.Cleanup(func() {
		if p, err := os.FindProcess(grandchild); err == nil {
			_ = p.Kill()
		}
	})
	got := Descendants(os.Getpid())
	if !slices.Contains(got, cmd.Process.Pid) || !slices.Contains(got, grandchild) {
		t.Fatalf("Descendants = %v, want %d and %d among them", got, cmd.Process.Pid, grandchild)
	}
	if p, ok := Parent(grandchild); !ok || p != cmd.Process.Pid {
		t.Errorf("Parent(%d) = %d, %v; want %d", grandchild, p, ok, cmd.Process.Pid)
	}
}

// A child started with a marker in its environment is found by it, alive;
// once it has exited and been reaped it is neither.
func TestWithEnvAndAlive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	marker := "PROCFS_TEST_MARKER=" + strconv.Itoa(os.Getpid())
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if got := WithEnv(marker); !slices.Equal(got, []int{pid}) {
		t.Fatalf("WithEnv(%q) = %v, want [%d]", marker, got, pid)
	}
	if got := WithEnv(marker + "x"); len(got) != 0 {
		t.Errorf("WithEnv matched a longer entry: %v", got)
	}
	if !Alive(pid) {
		t.Fatalf("Alive(%d) = false for a running child", pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if Alive(pid) {
		t.Errorf("Alive(%d) = true after the child was reaped", pid)
	}
	if got := WithEnv(marker); len(got) != 0 {
		t.Errorf("WithEnv(%q) = %v after the child was reaped", marker, got)
	}
}

// A child that exited but is not reaped yet (a zombie) is not alive.
func TestAliveZombie(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	pid := cmd.Process.Pid
	for {
		f, ok := stat(pid)
		if !ok {
			t.Fatalf("no /proc/%d/stat before the child was reaped", pid)
		}
		if f[0] == "Z" {
			break
		}
		runtime.Gosched()
	}
	if Alive(pid) {
		t.Errorf("Alive(%d) = true for a zombie", pid)
	}
}

// ParseStatus reads VmRSS and Name, and leaves out what the file lacks.
func TestParseStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		rss  int64
		name string
	}{
		{"Name:\topenclaw-mcp\nUmask:\t0022\nVmRSS:\t  372224 kB\nThreads: 11\n", 372224, "openclaw-mcp"},
		{"Name:\tkworker/0:1\nState:\tI (idle)\n", 0, "kworker/0:1"},
		{"", 0, ""},
	}
	for _, tc := range tests {
		rss, name := ParseStatus(tc.in)
		if rss != tc.rss || name != tc.name {
			t.Errorf("ParseStatus(%q) = %d, %q; want %d, %q", tc.in, rss, name, tc.rss, tc.name)
		}
	}
}

// Status reads this process's own file for pid 0 and fails for a process
// that does not exist.
func TestStatus(t *testing.T) {
	t.Parallel()
	if rss, name, ok := Status(0); !ok || rss <= 0 || name == "" {
		t.Errorf("Status(0) = %d, %q, %v; want this process's", rss, name, ok)
	}
	if _, _, ok := Status(1 << 30); ok {
		t.Error("Status of a PID that does not exist: ok")
	}
}
