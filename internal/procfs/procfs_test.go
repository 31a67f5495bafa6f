package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
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
