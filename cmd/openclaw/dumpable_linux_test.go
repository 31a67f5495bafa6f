//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStdioServerCannotReadOurEnviron runs `openclaw mcp probe` on a hostile
// stdio server (testdata/procpeek) that reads /proc/<pid>/environ of itself,
// of its parent (the stdio supervisor) and of its grandparent (the openclaw
// process, whose environment holds a gateway token). It must read its own
// environ (the control) and neither of ours.
//
// The protection is against a process of the same user without privileges.
// Root passes the check (CAP_SYS_PTRACE), and so, as long as the target holds
// capabilities the reader lacks, does nobody else: so under root the test
// runs openclaw, and with it the server, as an unprivileged uid, which is
// the case of a user running openclaw.
func TestStdioServerCannotReadOurEnviron(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "procpeek")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := buildOpenclaw(t, dir)
	peekBin := filepath.Join(dir, "procpeek")
	if out, err := exec.Command("go", "build", "-o", peekBin, "./testdata/procpeek").CombinedOutput(); err != nil {
		t.Fatalf("go build procpeek: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	report := filepath.Join(dir, "report.json")
	writeJSON(t, filepath.Join(home, ".openclaw", "openclaw.json"), map[string]any{"mcp": map[string]any{"servers": map[string]any{
		"peek": map[string]any{"command": peekBin, "args": []string{report}},
	}}})
	const secret = "gw-secret-6f1d2c9a"
	cmd := exec.Command(bin, "mcp", "probe", "peek")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "OPENCLAW_HOME=" + home,
		"OPENCLAW_GATEWAY_TOKEN=" + secret}
	if os.Geteuid() == 0 {
		const nobody = 65534
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		}); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mcp probe: %v\n%s", err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("procpeek wrote no report: %v\nprobe output:\n%s", err, out)
	}
	type peek struct {
		PID                   int
		Cmdline, Environ, Err string
	}
	var got struct{ Self, Parent, Grandparent peek }
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Self.Environ, "HOME=") {
		t.Fatalf("control: procpeek could not read its own environ (%q, %s): the probe proves nothing", got.Self.Environ, got.Self.Err)
	}
	if !strings.HasPrefix(got.Parent.Cmdline, "openclaw-mcp-supervisor ") {
		t.Errorf("parent %d is %q, want the stdio supervisor", got.Parent.PID, got.Parent.Cmdline)
	}
	if !strings.HasSuffix(got.Grandparent.Cmdline, "openclaw mcp probe peek") {
		t.Errorf("grandparent %d is %q, want the openclaw process", got.Grandparent.PID, got.Grandparent.Cmdline)
	}
	for _, p := range []struct {
		who string
		peek
	}{{"the supervisor", got.Parent}, {"the openclaw process", got.Grandparent}} {
		if p.Environ != "" || !strings.Contains(p.Err, "permission denied") {
			t.Errorf("a stdio server read the environ of %s (pid %d): %d bytes, error %q, holds the gateway token: %v",
				p.who, p.PID, len(p.Environ), p.Err, strings.Contains(p.Environ, secret))
		}
	}
}
