package transport

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/openclaw-go/openclaw/internal/testkit"
)

// secretsLayout writes what a same-user server should not reach: an
// openclaw.json and an OAuth token under HOME/.openclaw, a gateway token
// file and a policy file with its module elsewhere; and notes.txt, a file
// of HOME that stays in reach; viaLink reads the config through a
// symbolic link in HOME.
type secretsLayout struct {
	home, config, oauthToken, tokenFile, policyDir, policy, module, notes, viaLink string
}

func newSecrets(t *testing.T) secretsLayout {
	t.Helper()
	home := t.TempDir()
	s := secretsLayout{
		home:       home,
		config:     filepath.Join(home, ".openclaw", "openclaw.json"),
		oauthToken: filepath.Join(home, ".openclaw", "state", "mcp-oauth", "github.json"),
		tokenFile:  filepath.Join(t.TempDir(), "gateway.token"),
		policyDir:  t.TempDir(),
		notes:      filepath.Join(home, "notes.txt"),
		viaLink:    filepath.Join(home, "cfg", "openclaw.json"),
	}
	s.policy = filepath.Join(s.policyDir, "policy.json")
	s.module = filepath.Join(s.policyDir, "guard.wasm")
	for path, body := range map[string]string{
		s.config:     `{"gateway":{"auth":{"token":"gw-secret"}}}`,
		s.oauthToken: `{"access_token":"oauth-secret"}`,
		s.tokenFile:  "gw-secret\n",
		s.policy:     `{"modules":[{"source":"guard.wasm","sha256":"` + strings.Repeat("a", 64) + `"}]}`,
		s.module:     "\x00asm",
		s.notes:      "notes\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(home, ".openclaw"), filepath.Join(home, "cfg")); err != nil {
		t.Fatal(err)
	}
	return s
}

// probeFiles runs the misbehave server (confined when c is set) with HOME
// at s.home and returns what its files tool could do: "read PATH" and
// "write PATH" mapped to "ok" or the error.
func probeFiles(t *testing.T, s secretsLayout, c *Confinement) map[string]string {
	t.Helper()
	log, _ := newLogger()
	tr := &StdioTransport{
		Server:  "hostile",
		Command: misbehaveBin,
		Env:     []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH")},
		Logger:  log,
		Confine: c,
	}
	cs := connect(t, tr, "")
	out := callText(t, cs, "files", map[string]any{
		"read":  []string{s.config, s.viaLink, s.oauthToken, s.tokenFile, s.policy, s.module, s.notes},
		"write": []string{s.policy, s.config, filepath.Join(s.policyDir, "evil.wasm"), s.notes},
	})
	var res map[string]string
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("files: %v in %q", err, out)
	}
	cs.Close()
	return res
}

// A confined server reads and writes none of the protected paths (the
// OpenClaw folder, a token file, the policy file's folder), and still
// reads and writes its HOME; the same server unconfined reaches them all.
// TestConfineGrantsOfAVanishedPath: a folder beside a protected path that
// is removed between the listing of the grants and the building of the
// ruleset (other processes' folders in /tmp come and go) does not stop the
// server from starting confined.
func TestConfineGrantsOfAVanishedPath(t *testing.T) {
	if err := ConfinementAvailable(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	protected := filepath.Join(dir, "secret")
	gone := filepath.Join(dir, "gone")
	for _, d := range []string{protected, gone} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	grants := confineGrants([]string{protected}, []string{"/bin/true"}, dir, dir, "")
	if !slices.ContainsFunc(grants, func(g grant) bool { return g.path == gone }) {
		t.Fatalf("no grant of %s beside the protected folder: %+v", gone, grants)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	fd, _, err := landlockConfig.NewRulesetFD(grantRules(grants)...)
	if err != nil {
		t.Fatalf("ruleset with a vanished grant: %v", err)
	}
	_ = syscall.Close(fd)
}

func TestConfinedServerCannotReachProtectedFiles(t *testing.T) {
	if err := ConfinementAvailable(); err != nil {
		t.Skip(err)
	}
	s := newSecrets(t)
	protect := &Confinement{Protect: []string{filepath.Join(s.home, ".openclaw"), s.tokenFile, s.policyDir}}
	before, _ := os.ReadFile(s.policy)

	got := probeFiles(t, s, protect)
	for _, p := range []string{s.config, s.viaLink, s.oauthToken, s.tokenFile, s.policy, s.module} {
		if r := got["read "+p]; !strings.Contains(r, "permission denied") {
			t.Errorf("confined: read %s: %q, want permission denied", p, r)
		}
	}
	for _, p := range []string{s.policy, s.config, filepath.Join(s.policyDir, "evil.wasm")} {
		if r := got["write "+p]; !strings.Contains(r, "permission denied") {
			t.Errorf("confined: write %s: %q, want permission denied", p, r)
		}
	}
	if got["read "+s.notes] != "ok" || got["write "+s.notes] != "ok" {
		t.Errorf("confined: HOME's notes.txt: read %q, write %q; want ok", got["read "+s.notes], got["write "+s.notes])
	}
	if after, _ := os.ReadFile(s.policy); string(after) != string(before) {
		t.Errorf("confined server changed the policy file: %q", after)
	}

	// The control: unconfined, the same server reaches every file.
	for k, r := range probeFiles(t, s, nil) {
		if r != "ok" {
			t.Errorf("unconfined: %s: %q, want ok", k, r)
		}
	}
}

// server-everything (node, from the npm peers) runs confined with HOME's
// .openclaw protected: its tools answer.
func TestConfinedServerEverythingRuns(t *testing.T) {
	if err := ConfinementAvailable(); err != nil {
		t.Skip(err)
	}
	script := testkit.Peer(t, testkit.ServerEverything)
	node := testkit.Node(t)
	s := newSecrets(t)
	log, _ := newLogger()
	tr := &StdioTransport{
		Server:  "everything",
		Command: node,
		Args:    []string{script},
		Env:     []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH")},
		Logger:  log,
		Confine: &Confinement{Protect: []string{filepath.Join(s.home, ".openclaw")}},
	}
	cs := connect(t, tr, "")
	if got := callText(t, cs, "echo", map[string]any{"message": "confined"}); !strings.Contains(got, "confined") {
		t.Fatalf("echo: %q", got)
	}
}

// A confined server cannot signal a process outside its Landlock domain
// (ABI 6 signal scope): kill -0 on the test process fails confined and
// succeeds unconfined.
func TestConfinedServerCannotSignalUs(t *testing.T) {
	if err := ConfinementAvailable(); err != nil {
		t.Skip(err)
	}
	if abi, _ := ll.LandlockGetABIVersion(); abi < 6 {
		t.Skipf("Landlock ABI %d has no signal scope", abi)
	}
	script := "if kill -0 " + strconv.Itoa(os.Getpid()) + "; then echo signal=sent >&2; else echo signal=refused >&2; fi"
	for _, tc := range []struct {
		confine *Confinement
		want    string
	}{{&Confinement{}, "signal=refused"}, {nil, "signal=sent"}} {
		log, buf := newLogger()
		tr := &StdioTransport{Server: "sig", Command: "/bin/sh", Args: []string{"-c", script},
			Env: []string{"PATH=/usr/bin:/bin"}, Logger: log, Confine: tc.confine}
		conn, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for err == nil { // until the script exits
			_, err = conn.Read(context.Background())
		}
		conn.Close() // waits for the stderr reader
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("confined=%v: want %s in the server's stderr, got %s", tc.confine != nil, tc.want, buf.String())
		}
	}
}
