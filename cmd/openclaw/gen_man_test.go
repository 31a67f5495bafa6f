package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// gen-man writes one page per visible command, dated by SOURCE_DATE_EPOCH,
// and the same bytes every time; groff reads them without warnings.
func TestGenMan(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1764547200")
	gen := func(dir string) {
		t.Helper()
		root := newRootCmd()
		root.SetArgs([]string{"gen-man", dir})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := t.TempDir(), t.TempDir()
	gen(a)
	gen(b)

	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				walk(s)
			}
		}
	}
	walk(newRootCmd())
	slices.Sort(want)
	entries, err := os.ReadDir(a)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v\nwant %v", got, want)
	}
	for _, must := range []string{"openclaw-mcp-serve.1", "openclaw-version.1"} {
		if !slices.Contains(got, must) {
			t.Errorf("no page %s", must)
		}
	}
	if slices.Contains(got, "openclaw-gen-man.1") {
		t.Error("the hidden gen-man command has a page")
	}
	header := `.TH "OPENCLAW" "1" "Dec 2025" "openclaw-go ` + version + `" "openclaw-go manual"`
	for _, name := range got {
		pa, _ := os.ReadFile(filepath.Join(a, name))
		pb, _ := os.ReadFile(filepath.Join(b, name))
		if !bytes.Equal(pa, pb) {
			t.Errorf("%s differs between two runs", name)
		}
		if !bytes.Contains(pa, []byte(header)) {
			t.Errorf("%s lacks the header %s:\n%.300s", name, header, pa)
		}
	}
	root, _ := os.ReadFile(filepath.Join(a, "openclaw.1"))
	if !bytes.Contains(root, []byte(`\fB--version\fP`)) {
		t.Errorf("openclaw.1 does not list --version:\n%s", root)
	}

	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("groff not installed: pages not rendered")
		return
	}
	files, _ := filepath.Glob(filepath.Join(a, "*.1"))
	out, _ := exec.Command(groff, append([]string{"-k", "-man", "-Tutf8", "-ww", "-z"}, files...)...).CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !strings.Contains(line, "can't break line") {
			t.Errorf("groff: %s", line)
		}
	}
}
