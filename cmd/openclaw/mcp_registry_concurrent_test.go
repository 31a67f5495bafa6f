package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openclaw-go/openclaw/config"
)

// TestRegistryConcurrentSet starts 20 `openclaw mcp set` processes at once
// on one config: every one says "Saved", all 20 entries are listed, and the
// five backups hold the five previous versions, each one entry short of the
// next newer one.
func TestRegistryConcurrentSet(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	const writers = 20
	type result struct {
		stdout, stderr string
		code           int
	}
	results := make([]result, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			var r result
			r.stdout, r.stderr, r.code = c.run(t, "mcp", "set", fmt.Sprintf("s%d", i), `{"command":"ls"}`)
			results[i] = r
		})
	}
	wg.Wait()
	for i, r := range results {
		want := fmt.Sprintf("Saved MCP server %q to %s.\n", fmt.Sprintf("s%d", i), c.configPath())
		if r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("writer %d: exit %d, stdout %q, stderr %q; want exit 0, %q", i, r.code, r.stdout, r.stderr, want)
		}
	}
	stdout, stderr, code := c.run(t, "mcp", "list")
	if n := strings.Count(stdout, "\n- "); code != 0 || n != writers {
		t.Fatalf("mcp list: exit %d, %d servers, want %d:\n%s%s", code, n, writers, stdout, stderr)
	}
	names := func(p string) []string {
		t.Helper()
		doc, err := config.LoadDocument(p)
		if err != nil {
			t.Fatal(err)
		}
		return doc.Servers().Keys()
	}
	newer := names(c.configPath())
	if got := names(c.configPath() + ".last-good"); !slices.Equal(got, newer) {
		t.Errorf("last-good holds %q, want %q", got, newer)
	}
	for i := range config.Backups {
		p := config.BackupPath(c.configPath(), i)
		got := names(p)
		if len(got) != writers-1-i {
			t.Errorf("%s holds %d servers %q, want %d", filepath.Base(p), len(got), got, writers-1-i)
		}
		for _, n := range got {
			if !slices.Contains(newer, n) {
				t.Errorf("%s holds %q, which the next newer version lacks", filepath.Base(p), n)
			}
		}
		newer = got
	}
}

// TestRegistryConcurrentUnset removes 10 of 12 entries with concurrent
// `openclaw mcp unset` processes: every one says "Removed", and exactly the
// other two entries are left.
func TestRegistryConcurrentUnset(t *testing.T) {
	t.Parallel()
	c := newRegistryCLI(t)
	for i := range 12 {
		if _, stderr, code := c.run(t, "mcp", "set", fmt.Sprintf("s%d", i), `{"command":"ls"}`); code != 0 {
			t.Fatalf("mcp set s%d: exit %d: %s", i, code, stderr)
		}
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			name := fmt.Sprintf("s%d", i)
			stdout, stderr, code := c.run(t, "mcp", "unset", name)
			if want := fmt.Sprintf("Removed MCP server %q from %s.\n", name, c.configPath()); code != 0 || stdout != want {
				t.Errorf("mcp unset %s: exit %d, stdout %q, stderr %q; want %q", name, code, stdout, stderr, want)
			}
		})
	}
	wg.Wait()
	stdout, stderr, code := c.run(t, "mcp", "list")
	if code != 0 || !strings.Contains(stdout, "\n- s10\n- s11\n\n") || strings.Count(stdout, "\n- ") != 2 {
		t.Fatalf("mcp list after the unsets: exit %d, want exactly s10 and s11:\n%s%s", code, stdout, stderr)
	}
}
