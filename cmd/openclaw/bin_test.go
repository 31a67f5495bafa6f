package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// builtBin builds the openclaw binary once for the package's tests, into
// a temporary folder that TestMain removes.
var builtBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "openclaw-test-bin-")
	if err != nil {
		return "", err
	}
	builtDir = dir
	bin := filepath.Join(dir, "openclaw")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// builtDir is the folder of builtBin, "" until it is built; TestMain
// reads it after every test has returned.
var builtDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// testBinary returns the openclaw binary the tests run (built once).
func testBinary(t testing.TB) string {
	t.Helper()
	bin, err := builtBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// buildOpenclaw puts a copy of the test binary into dir and returns its
// path: for a test that changes the binary's owner, or wants it beside its
// own files.
func buildOpenclaw(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.Open(testBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "openclaw")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}
