package main

import (
	"crypto/elliptic"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/builtin"
)

// writeTestBundle writes a bundle folder whose rules module blocks tool
// "blocked" with reason, and whose test case expects expectReason.
func writeTestBundle(t *testing.T, dir, reason, expectReason string) string {
	return writeToolBundle(t, dir, "blocked", reason, expectReason)
}

// writeToolBundle is writeTestBundle blocking the tools of pattern (which
// must match "blocked").
func writeToolBundle(t testing.TB, dir, pattern, reason, expectReason string) string {
	t.Helper()
	rules, _ := builtin.Lookup("builtin:rules")
	files := map[string]string{
		"rules.wasm": string(rules.Wasm),
		"policy.json": `{"modules":[{"name":"rules","source":"rules.wasm",
 "config":{"default":"allow","rules":[{"tool":"` + pattern + `","decision":"block","reason":"` + reason + `"}]}}]}`,
		"tests/rules.jsonl": `{"name":"blocked is blocked","input":{"surface":"serve","tool":{"name":"blocked"}},"expect":{"decision":"block","reason":"` + expectReason + `"}}` + "\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeKeyPair writes an ECDSA P-256 PEM key pair, encrypted with
// password when it is not nil.
func writeKeyPair(t testing.TB, dir string, password []byte) (priv, pub string) {
	t.Helper()
	pf := cryptoutils.SkipPassword
	if password != nil {
		pf = cryptoutils.StaticPasswordFunc(password)
	}
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub = filepath.Join(dir, "k.key"), filepath.Join(dir, "k.pub")
	if err := os.WriteFile(priv, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pubPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

var digestRef = regexp.MustCompile(`oci://\S+@sha256:[0-9a-f]{64}`)

// TestPolicyBundleCommands: push, sign, verify and pull through a real
// registry; another key's verify exits 1 naming the reason.
func TestPolicyBundleCommands(t *testing.T) {
	reg := testkit.StartRegistry(t)
	dir := writeTestBundle(t, t.TempDir(), "no", "no")
	priv, pub := writeKeyPair(t, t.TempDir(), []byte("pw"))
	_, otherPub := writeKeyPair(t, t.TempDir(), nil)
	tag := "oci://" + reg.Host + "/team/policy:v1"

	out, code, err := runPolicyCLI(t, "policy", "push", dir, tag)
	if code != 0 {
		t.Fatalf("push: %d %v\n%s", code, err, out)
	}
	pinned := digestRef.FindString(out)
	if pinned == "" {
		t.Fatalf("push printed no digest reference:\n%s", out)
	}
	out, code, err = runPolicyCLI(t, "policy", "verify", tag, "--key", pub)
	if code != 1 || err == nil || !strings.Contains(err.Error(), "no signature (tag sha256-") {
		t.Fatalf("verify before signing: %d\n%s", code, out)
	}
	t.Setenv("COSIGN_PASSWORD", "pw")
	if out, code, err = runPolicyCLI(t, "policy", "sign", pinned, "--key", priv); code != 0 {
		t.Fatalf("sign: %d %v\n%s", code, err, out)
	}
	out, code, _ = runPolicyCLI(t, "policy", "verify", tag, "--key", otherPub, "--key", pub)
	if code != 0 || !strings.Contains(out, "signed by "+pub) {
		t.Fatalf("verify: %d\n%s", code, out)
	}
	out, code, err = runPolicyCLI(t, "policy", "verify", tag, "--key", otherPub)
	if code != 1 || err == nil || !strings.Contains(err.Error(), "made by none of the trusted keys") {
		t.Fatalf("verify with another key: %d\n%s", code, out)
	}
	into := t.TempDir()
	if out, code, err = runPolicyCLI(t, "policy", "pull", tag, into, "--key", pub); code != 0 {
		t.Fatalf("pull: %d %v\n%s", code, err, out)
	}
	for _, f := range []string{"policy.json", "rules.wasm", "tests/rules.jsonl"} {
		want, _ := os.ReadFile(filepath.Join(dir, f))
		if got, err := os.ReadFile(filepath.Join(into, f)); err != nil || string(got) != string(want) {
			t.Errorf("pulled %s differs: %v", f, err)
		}
	}
}
