package main

import (
	"debug/buildinfo"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	openclaw "github.com/openclaw-go/openclaw"
)

// A binary built without ldflags (go build, go install from a checkout)
// reports the VERSION file, or the module version the go command recorded
// from a tag; `--version` and `version` agree on it.
func TestVersionUnstamped(t *testing.T) {
	c := newRegistryCLI(t)
	bi, err := buildinfo.ReadFile(c.bin)
	if err != nil {
		t.Fatal(err)
	}
	want := "openclaw-go " + openclaw.Version()
	if v := moduleVersion(bi.Main.Version); v != "" {
		want = "openclaw-go " + v
	}
	out, _, code := c.run(t, "--version")
	if code != 0 || strings.TrimSpace(out) != want {
		t.Fatalf("--version: exit %d, %q; want %q", code, out, want)
	}
	out, errOut, code := c.run(t, "version")
	if code != 0 {
		t.Fatalf("version: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != want {
		t.Errorf("version's first line %q, want %q", lines[0], want)
	}
	if !strings.Contains(out, "\ngo:       go1.") || !strings.Contains(out, "\nplatform: ") {
		t.Errorf("version names no Go version or platform:\n%s", out)
	}
}

// A stamped build reports the stamped version (without "v"), the commit and
// the commit time in UTC.
func TestVersionStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "openclaw")
	ld := "-X main.version=v1.2.3 -X main.commit=0123456789abcdef0123456789abcdef01234567 -X main.date=1764547200"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"openclaw-go 1.2.3\n",
		"commit:   0123456789abcdef0123456789abcdef01234567\n",
		"date:     2025-12-01T00:00:00Z\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

func TestModuleVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v0.1.0":                               "0.1.0",
		"v1.2.3-rc.1":                          "1.2.3-rc.1",
		"(devel)":                              "",
		"":                                     "",
		"v0.0.0-20261201221155-c5d85edabcde":   "",
		"v0.1.1-0.20261201221155-c5d85edabcde": "0.1.1-0.20261201221155-c5d85edabcde",
	} {
		if got := moduleVersion(in); got != want {
			t.Errorf("moduleVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
