// Package testkit holds what the module's tests share: the lookup of the
// real MCP peers that `make peers` installs (the Node SDK, npm MCP servers,
// the official conformance suite, go-sdk's conformance fixtures) and of the
// repository's own files.
//
// A test that needs a peer calls [Peer] (or [Node]). When the peer is
// missing the test is skipped with one message that says how to install
// it, and under CI=true it fails instead: CI installs every peer, so a
// missing one there is a broken install, never a reason to pass.
//
//	script := testkit.Peer(t, testkit.ServerEverything)
//	cmd := exec.Command(testkit.Node(t), script, "stdio")
package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Paths of the installed peers, relative to [PeersDir].
const (
	// ServerEverything is @modelcontextprotocol/server-everything's entry
	// point (run it with node, argument "stdio", "sse" or "streamableHttp").
	ServerEverything = "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	// ServerFilesystem is @modelcontextprotocol/server-filesystem's entry point.
	ServerFilesystem = "npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
	// ServerMemory is @modelcontextprotocol/server-memory's entry point.
	ServerMemory = "npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
	// NodeSDK is the folder of the TypeScript SDK (@modelcontextprotocol/sdk).
	NodeSDK = "npm/node_modules/@modelcontextprotocol/sdk"
	// NPM is the npm project folder the Node peers are installed in (a
	// script that imports the SDK resolves it from here).
	NPM = "npm"
	// Conformance is the official conformance suite's CLI
	// (@modelcontextprotocol/conformance 0.1.16).
	Conformance = "npm/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	// ConformanceNext is the CLI of the conformance suite's 0.2 line
	// (@modelcontextprotocol/conformance 0.2.0-alpha.12), which knows the
	// MCP 2026-07-28 requirements (`--requirements 2026-07-28`). It is
	// installed in its own npm project beside [NPM].
	ConformanceNext = "conformance-next/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	// GoEverythingServer is go-sdk's conformance everything-server (stdio
	// by default).
	GoEverythingServer = "bin/everything-server"
	// GoEverythingClient is go-sdk's conformance everything-client.
	GoEverythingClient = "bin/everything-client"
	// Cosign is sigstore's cosign v2 CLI, built from its Go module
	// (Debian has none).
	Cosign = "bin/cosign"
)

// RepoRoot returns the repository's root folder: the nearest parent of the
// working directory (a package folder, under go test) that holds go.mod. It
// returns "" when there is none.
func RepoRoot() string {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				if _, err := os.Stat(filepath.Join(dir, "internal", "testkit")); err == nil {
					root = dir
					return
				}
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				return
			}
			dir = parent
		}
	})
	return root
}

var (
	rootOnce sync.Once
	root     string
)

// PeersDir returns the absolute folder the peers are installed in:
// $PEERS_DIR when set, else .peers at the repository root (where
// `make peers` puts them).
func PeersDir() string {
	dir := os.Getenv("PEERS_DIR")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), ".peers")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	return abs
}

// Peer returns the absolute path of rel (one of the constants above) under
// [PeersDir], or skips the test when it is missing (fails under CI=true).
func Peer(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(PeersDir(), rel)
	if _, err := os.Stat(p); err != nil {
		Missing(t, rel+" under "+PeersDir())
	}
	return p
}

// Node returns the path of the node executable, or skips the test when
// there is none (fails under CI=true).
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node on PATH")
	}
	return node
}

// Missing skips the test because what it needs is not installed, with the
// one message every such skip gives; under CI=true it fails the test.
func Missing(t testing.TB, what string) {
	t.Helper()
	msg := "MCP test peer missing: " + what + " (install the peers with `make peers`, or point PEERS_DIR at them)"
	if InCI() {
		t.Fatal(msg + "; CI installs every peer, so this is a failure")
	}
	t.Skip(msg)
}

// InCI reports whether the tests run in CI (CI set to anything but "" or
// "false"), where a missing peer or fixture fails instead of skipping.
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false"
}

// InspectorCLI is @modelcontextprotocol/inspector-cli's entry point; it
// reads ../package.json from its working directory, so run it from
// PeersDir()/npm/node_modules.
const InspectorCLI = "npm/node_modules/@modelcontextprotocol/inspector-cli/build/index.js"

// ConformanceArgs returns the node arguments that run the conformance
// suite's CLI ([Conformance]), or skips the test when node or the suite is
// missing (fails under CI=true). On node older than 22, which lacks the
// fs.globSync the CLI imports (only its tier-check command calls it), the
// arguments load test/peers/node20-globsync-hook.mjs, which gives the CLI a
// globSync that throws.
func ConformanceArgs(t testing.TB) []string {
	t.Helper()
	return conformanceArgs(t, Conformance)
}

// ConformanceNextArgs is [ConformanceArgs] for the 0.2 line of the suite
// ([ConformanceNext]).
func ConformanceNextArgs(t testing.TB) []string {
	t.Helper()
	return conformanceArgs(t, ConformanceNext)
}

func conformanceArgs(t testing.TB, rel string) []string {
	t.Helper()
	node := Node(t)
	cli := Peer(t, rel)
	out, err := exec.Command(node, "-p", "process.versions.node.split('.')[0]").Output()
	if err != nil {
		t.Fatalf("node -p: %v", err)
	}
	if major, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && major >= 22 {
		return []string{cli}
	}
	hook := filepath.Join(RepoRoot(), "test", "peers", "node20-globsync-hook.mjs")
	if _, err := os.Stat(hook); err != nil {
		t.Fatalf("the conformance CLI needs %s on node < 22: %v", hook, err)
	}
	return []string{"--import", hook, cli}
}
