package bundle_test

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"

	"github.com/opencontainers/go-digest"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/builtin"
	"github.com/openclaw-go/openclaw/policies/bundle"
	"github.com/openclaw-go/openclaw/wasmhost"
)

// writeBundle writes a bundle folder: policy.json with one rules module
// (rules.wasm, builtin:rules's bytes) blocking tool "blocked" with reason,
// and tests/rules.jsonl expecting that reason.
func writeBundle(t *testing.T, reason, expectReason string) string {
	t.Helper()
	dir := t.TempDir()
	rules, _ := builtin.Lookup("builtin:rules")
	must(t, os.WriteFile(filepath.Join(dir, "rules.wasm"), rules.Wasm, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "policy.json"), []byte(`{"modules":[{"name":"rules","source":"rules.wasm",
 "config":{"default":"allow","rules":[{"tool":"blocked","decision":"block","reason":"`+reason+`"}]}}]}`), 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "tests"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "tests", "rules.jsonl"), []byte(
		`{"name":"blocked is blocked","input":{"surface":"serve","tool":{"name":"blocked"}},"expect":{"decision":"block","reason":"`+expectReason+`"}}
{"name":"others pass","input":{"surface":"serve","tool":{"name":"other"}},"expect":{"decision":"allow"}}
`), 0o600))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// keyPair writes an ECDSA P-256 key pair (PEM) and returns the paths.
func keyPair(t *testing.T, password []byte) (priv, pub string) {
	t.Helper()
	dir := t.TempDir()
	pf := cryptoutils.SkipPassword
	if password != nil {
		pf = cryptoutils.StaticPasswordFunc(password)
	}
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), pf)
	must(t, err)
	priv, pub = filepath.Join(dir, "k.key"), filepath.Join(dir, "k.pub")
	must(t, os.WriteFile(priv, privPEM, 0o600))
	must(t, os.WriteFile(pub, pubPEM, 0o600))
	return priv, pub
}

func pushSigned(t *testing.T, ctx context.Context, dir, ref, key string, seq int64) bundle.Ref {
	t.Helper()
	b, err := bundle.ReadDir(dir)
	must(t, err)
	r, err := bundle.ParseRef(ref)
	must(t, err)
	desc, err := bundle.Push(ctx, b, r, bundle.Remote{})
	must(t, err)
	r.Digest = desc.Digest
	if key != "" {
		signer, err := bundle.LoadPrivateKey(key, nil)
		must(t, err)
		must(t, bundle.Sign(ctx, r, desc.Digest, signer, seq, bundle.Remote{}))
	}
	return r
}

func TestPushPullSignVerify(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	privA, pubA := keyPair(t, nil)
	_, pubB := keyPair(t, nil)
	dir := writeBundle(t, "no", "no")
	ref := pushSigned(t, ctx, dir, "oci://"+reg.Host+"/team/policy:v1", privA, 1)

	tagged, _ := bundle.ParseRef("oci://" + reg.Host + "/team/policy:v1")
	p, err := bundle.Pull(ctx, tagged, bundle.Remote{})
	must(t, err)
	if p.Digest != ref.Digest || len(p.Bundle.Files) != 3 {
		t.Fatalf("pulled %s with %d files, want %s with 3", p.Digest, len(p.Bundle.Files), ref.Digest)
	}
	out := t.TempDir()
	must(t, p.Bundle.WriteDir(out))
	for _, f := range []string{"policy.json", "rules.wasm", "tests/rules.jsonl"} {
		want, _ := os.ReadFile(filepath.Join(dir, f))
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: pulled bytes differ (%v)", f, err)
		}
	}

	sigs, err := bundle.FetchSignatures(ctx, tagged, p.Digest, bundle.Remote{})
	must(t, err)
	keysA, _ := bundle.LoadPublicKeys([]string{pubA})
	keysB, _ := bundle.LoadPublicKeys([]string{pubB})
	keysBA, _ := bundle.LoadPublicKeys([]string{pubB, pubA})
	if v, err := bundle.VerifySignatures(tagged, p.Digest, sigs, keysA); err != nil || v.Sequence != 1 {
		t.Fatalf("verify with the signing key: %v %+v", err, v)
	}
	if _, err := bundle.VerifySignatures(tagged, p.Digest, sigs, keysB); err == nil || !strings.Contains(err.Error(), "none of the trusted keys") {
		t.Fatalf("verify with another key: %v, want refused by key", err)
	}
	if v, err := bundle.VerifySignatures(tagged, p.Digest, sigs, keysBA); err != nil || v.Key.Path != pubA {
		t.Fatalf("verify with two keys (rotation): %v", err)
	}

	// The bundle and its signature copied to another repository: the
	// signature names team/policy and is refused there.
	src, _ := remote.NewRepository(reg.Host + "/team/policy")
	dst, _ := remote.NewRepository(reg.Host + "/other/policy")
	src.PlainHTTP, dst.PlainHTTP = true, true
	for _, tag := range []string{"v1", bundle.SignatureTag(p.Digest)} {
		if _, err := oras.Copy(ctx, src, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
			t.Fatal(err)
		}
	}
	other, _ := bundle.ParseRef("oci://" + reg.Host + "/other/policy:v1")
	sigs, err = bundle.FetchSignatures(ctx, other, p.Digest, bundle.Remote{})
	must(t, err)
	if _, err := bundle.VerifySignatures(other, p.Digest, sigs, keysA); err == nil || !strings.Contains(err.Error(), "bound to its repository") {
		t.Fatalf("signature copied to another repository: %v, want refused", err)
	}
}

func TestEncryptedCosignKey(t *testing.T) {
	priv, pub := keyPair(t, []byte("s3cret"))
	data, _ := os.ReadFile(priv)
	if !strings.Contains(string(data), "ENCRYPTED SIGSTORE PRIVATE KEY") {
		t.Fatalf("not an encrypted key:\n%s", data)
	}
	if _, err := bundle.LoadPrivateKey(priv, func() ([]byte, error) { return []byte("wrong"), nil }); err == nil {
		t.Fatal("a wrong password decrypted the key")
	}
	s, err := bundle.LoadPrivateKey(priv, func() ([]byte, error) { return []byte("s3cret"), nil })
	must(t, err)
	k, err := bundle.LoadPublicKey(pub)
	must(t, err)
	r, _ := bundle.ParseRef("oci://127.0.0.1:1/x/y:t")
	d := "sha256:" + strings.Repeat("ab", 32)
	pl, err := bundle.Payload(r, digestOf(d), nil)
	must(t, err)
	sig, err := s.SignMessage(strings.NewReader(string(pl)))
	must(t, err)
	if _, err := bundle.VerifySignatures(r, digestOf(d), []bundle.Signature{{Payload: pl, Signature: sig}}, []bundle.TrustedKey{k}); err != nil {
		t.Fatal(err)
	}
}

func source(t *testing.T, reg *testkit.Registry, cache string, pub ...string) *bundle.Source {
	t.Helper()
	r, err := bundle.ParseRef("oci://" + reg.Host + "/team/policy:live")
	must(t, err)
	keys, err := bundle.LoadPublicKeys(pub)
	must(t, err)
	return &bundle.Source{Ref: r, Keys: keys, Cache: &bundle.Cache{Dir: cache}}
}

// accept fetches what the tag names now and commits it.
func accept(t *testing.T, ctx context.Context, s *bundle.Source) (*bundle.Accepted, error) {
	t.Helper()
	d, err := s.Resolve(ctx)
	must(t, err)
	a, err := s.Fetch(ctx, d)
	if err != nil {
		return nil, err
	}
	must(t, s.Cache.Commit(a))
	return a, nil
}

func reason(err error) string {
	var r *bundle.Refusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return "not a refusal: " + errString(err)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestSourceRefusesAndRollsBackNever(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	privA, pubA := keyPair(t, nil)
	privB, _ := keyPair(t, nil)
	live := "oci://" + reg.Host + "/team/policy:live"
	s := source(t, reg, t.TempDir(), pubA)

	v1 := pushSigned(t, ctx, writeBundle(t, "v1", "v1"), live, privA, 1)
	a, err := accept(t, ctx, s)
	if err != nil || a.Digest != v1.Digest {
		t.Fatalf("v1: %v", err)
	}

	// Unsigned, signed with another key, failing case: each refused.
	pushSigned(t, ctx, writeBundle(t, "v2", "v2"), live, "", 0)
	if _, err := accept(t, ctx, s); reason(err) != bundle.ReasonUnsigned {
		t.Errorf("unsigned: %v", err)
	}
	pushSigned(t, ctx, writeBundle(t, "v3", "v3"), live, privB, 5)
	if _, err := accept(t, ctx, s); reason(err) != bundle.ReasonBadSignature {
		t.Errorf("other key: %v", err)
	}
	pushSigned(t, ctx, writeBundle(t, "v4", "not v4"), live, privA, 6)
	if _, err := accept(t, ctx, s); reason(err) != bundle.ReasonTestFailed || !strings.Contains(err.Error(), `tests/rules.jsonl:1 "blocked is blocked"`) {
		t.Errorf("failing case: %v", err)
	}

	// A tampered layer in the registry's storage.
	v5 := pushSigned(t, ctx, writeBundle(t, "v5", "v5"), live, privA, 7)
	man, _ := bundle.Pull(ctx, v5, bundle.Remote{})
	pol := man.Parsed.Layers[0]
	orig, _ := os.ReadFile(reg.BlobPath(pol.Digest.String()))
	tampered := strings.Replace(string(orig), `"v5"`, `"v6"`, 1)
	must(t, os.WriteFile(reg.BlobPath(pol.Digest.String()), []byte(tampered), 0o600))
	if _, err := accept(t, ctx, s); reason(err) != bundle.ReasonDigestMismatch {
		t.Errorf("tampered layer: %v", err)
	}
	must(t, os.WriteFile(reg.BlobPath(pol.Digest.String()), orig, 0o600))
	if a, err := accept(t, ctx, s); err != nil || a.Digest != v5.Digest {
		t.Fatalf("v5: %v", err)
	}

	// The tag moved back to v1, validly signed (sequence 1 < 7): refused,
	// unless allowed; signed again with a newer sequence it is accepted.
	src, _ := remote.NewRepository(reg.Host + "/team/policy")
	src.PlainHTTP = true
	desc, err := src.Resolve(ctx, v1.Digest.String())
	must(t, err)
	must(t, src.Tag(ctx, desc, "live"))
	if _, err := accept(t, ctx, s); reason(err) != bundle.ReasonRollback {
		t.Errorf("rollback: %v", err)
	}
	signer, _ := bundle.LoadPrivateKey(privA, nil)
	must(t, bundle.Sign(ctx, v1, v1.Digest, signer, 8, bundle.Remote{}))
	if a, err := accept(t, ctx, s); err != nil || a.Digest != v1.Digest || a.Verified.Sequence != 8 {
		t.Fatalf("v1 signed again: %v", err)
	}
}

func TestCacheIsVerifiedOnLoad(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	privA, pubA := keyPair(t, nil)
	_, pubB := keyPair(t, nil)
	cache := t.TempDir()
	s := source(t, reg, cache, pubA)
	v1 := pushSigned(t, ctx, writeBundle(t, "v1", "v1"), "oci://"+reg.Host+"/team/policy:live", privA, 1)
	if _, err := accept(t, ctx, s); err != nil {
		t.Fatal(err)
	}
	reg.Stop()
	if _, err := s.Resolve(ctx); err == nil {
		t.Fatal("the registry still answers")
	}
	a, err := s.Cache.Load(s.Ref, s.Keys)
	if err != nil || a.Digest != v1.Digest {
		t.Fatalf("cache with the registry down: %v", err)
	}
	if _, err := s.Cache.Load(s.Ref, source(t, reg, cache, pubB).Keys); err == nil {
		t.Fatal("the cache verified with another key")
	}
	pf := filepath.Join(a.Dir, "policy.json")
	data, _ := os.ReadFile(pf)
	must(t, os.WriteFile(pf, []byte(strings.Replace(string(data), `"v1"`, `"v0"`, 1)), 0o600))
	if _, err := s.Cache.Load(s.Ref, s.Keys); !errors.Is(err, bundle.ErrDigestMismatch) {
		t.Fatalf("tampered cache: %v", err)
	}
}

func digestOf(s string) digest.Digest { return digest.Digest(s) }

// TestStageKeepsIdenticalFiles: staging a bundle the cache already holds
// keeps its files (another process may be loading them); a folder whose
// files differ is replaced.
func TestStageKeepsIdenticalFiles(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	priv, pub := keyPair(t, nil)
	s := source(t, reg, t.TempDir(), pub)
	pushSigned(t, ctx, writeBundle(t, "v1", "v1"), "oci://"+reg.Host+"/team/policy:live", priv, 1)
	d, err := s.Resolve(ctx)
	must(t, err)
	a, err := s.Fetch(ctx, d)
	must(t, err)
	before, err := os.Stat(a.PolicyFile)
	must(t, err)
	a2, err := s.Fetch(ctx, d)
	must(t, err)
	after, err := os.Stat(a2.PolicyFile)
	must(t, err)
	if !os.SameFile(before, after) {
		t.Error("staging the same bundle again replaced its files")
	}
	must(t, os.WriteFile(a.PolicyFile, []byte("{}"), 0o600))
	a3, err := s.Fetch(ctx, d)
	must(t, err)
	if data, _ := os.ReadFile(a3.PolicyFile); string(data) == "{}" {
		t.Error("a folder whose files differ was kept")
	}
}

// TestBundleNamesNoMachineFile: a bundle's policy file cannot name a file
// or endpoint of the machine that runs it. A decision_log in a bundle
// would read the machine's token_file (any path: absolute, or ../ out of
// the cache) and send it, with every decision, to the bundle's URL.
func TestBundleNamesNoMachineFile(t *testing.T) {
	for _, key := range []string{
		`"audit_log":"/tmp/x.jsonl"`,
		`"tool_pins":{"file":"/tmp/pins.json"}`,
		`"decision_log":{"url":"https://logs.example.net/v1","token_file":"/etc/hostname"}`,
		`"decision_log":{"url":"https://logs.example.net/v1","token_file":"../../../../../etc/hostname"}`,
		`"decision_log":{"url":"https://logs.example.net/v1"}`,
	} {
		dir := writeBundle(t, "no", "no")
		must(t, os.WriteFile(filepath.Join(dir, "policy.json"), []byte(`{`+key+`,"modules":[{"name":"rules","source":"rules.wasm"}]}`), 0o600))
		_, err := bundle.ReadDir(dir)
		if err == nil {
			t.Errorf("%s: the bundle was read", key)
			continue
		}
		name := strings.Split(strings.Trim(key, `"`), `"`)[0]
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: the error does not name %s: %v", key, name, err)
		}
	}
}

// TestSignatureTagIsBounded: whoever can write the signature tag cannot
// make every follower download and hold thousands of payloads: a tag of
// more than MaxSignatures layers is refused, naming the count, and the
// follower refuses the digest as bad_signature.
func TestSignatureTagIsBounded(t *testing.T) {
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	priv, pub := keyPair(t, nil)
	ref := pushSigned(t, ctx, writeBundle(t, "no", "no"), "oci://"+reg.Host+"/team/policy:v1", priv, 1)
	repo, _ := remote.NewRepository(reg.Host + "/team/policy")
	repo.PlainHTTP = true
	_, rc, err := repo.FetchReference(ctx, bundle.SignatureTag(ref.Digest))
	must(t, err)
	var m ocispec.Manifest
	must(t, json.NewDecoder(rc).Decode(&m))
	rc.Close()
	const n = 2000
	for len(m.Layers) < n {
		m.Layers = append(m.Layers, m.Layers[0])
	}
	data, _ := json.Marshal(m)
	must(t, repo.PushReference(ctx, content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, data), bytes.NewReader(data), bundle.SignatureTag(ref.Digest)))

	_, err = bundle.FetchSignatures(ctx, ref, ref.Digest, bundle.Remote{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(n)) {
		t.Fatalf("a signature tag of %d layers: %v, want refused naming the count", n, err)
	}
	keys, _ := bundle.LoadPublicKeys([]string{pub})
	src := &bundle.Source{Ref: ref, Keys: keys, Cache: &bundle.Cache{Dir: t.TempDir()}}
	var r *bundle.Refusal
	if _, err := src.Fetch(ctx, ref.Digest); !errors.As(err, &r) || r.Reason != bundle.ReasonBadSignature {
		t.Fatalf("Fetch: %v, want refused as %s", err, bundle.ReasonBadSignature)
	}
}

// TestParseRefRegistryIsAHost: the registry of a reference is a host name
// or IP with an optional port; ".." or "." (a path component, which the
// cache folder REGISTRY/REPOSITORY would climb out with) is refused,
// naming it.
func TestParseRefRegistryIsAHost(t *testing.T) {
	for _, s := range []string{"oci://../team/p:live", "oci://./team/p:live", "oci://a..b/team/p:live", "oci://-x.example/team/p:live", "oci://reg.example:0x50/team/p:live"} {
		if r, err := bundle.ParseRef(s); err == nil || !strings.Contains(err.Error(), "registry") {
			t.Errorf("ParseRef(%q) = %+v, %v; want refused naming the registry", s, r, err)
		}
	}
	for _, s := range []string{"oci://127.0.0.1:5000/team/p:live", "oci://localhost:5000/team/p:live", "oci://[::1]:5000/team/p:live", "oci://reg.example.com/team/p:live", "oci://my-reg1.example:443/pp:live"} {
		if _, err := bundle.ParseRef(s); err != nil {
			t.Errorf("ParseRef(%q): %v", s, err)
		}
	}
}

// TestParseRefRegistryWithoutDotOrPort: `localhost` (or any host without
// '.' or ':') before the first '/' is, to cosign and go-containerregistry,
// a Docker Hub repository's first component, not a registry; the
// reference is refused with the form to write instead.
func TestParseRefRegistryWithoutDotOrPort(t *testing.T) {
	for s, want := range map[string]string{
		"oci://localhost/team/p:live":                          "oci://localhost:80/team/p:live",
		"oci://myreg/team/p@sha256:" + strings.Repeat("a", 64): "oci://myreg:PORT/team/p",
	} {
		_, err := bundle.ParseRef(s)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Docker Hub") {
			t.Errorf("ParseRef(%q): %v; want refused saying to write %s", s, err, want)
		}
	}
	r, err := bundle.ParseRef("oci://localhost:80/team/p:live")
	if err != nil || r.Registry != "localhost:80" || !bundle.IsLoopback(r.Registry) {
		t.Errorf("ParseRef(oci://localhost:80/team/p:live) = %+v, %v; want the loopback registry localhost:80", r, err)
	}
}

// TestWriteDirStaysInside: `policy pull` into a folder that holds a
// symlink (policy.json, or a module's folder, pointing outside) does not
// write through it: the file outside is unchanged and the pull fails.
func TestWriteDirStaysInside(t *testing.T) {
	b, err := bundle.ReadDir(writeBundle(t, "no", "no"))
	must(t, err)
	outside := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(outside, []byte("ORIGINAL"), 0o600))
	for _, link := range []string{"policy.json", "tests"} {
		dir := t.TempDir()
		target := outside
		if link == "tests" {
			target = filepath.Dir(outside)
		}
		must(t, os.Symlink(target, filepath.Join(dir, link)))
		if err := b.WriteDir(dir); err == nil {
			t.Errorf("a symlink %s out of the folder: WriteDir wrote through it", link)
		}
		if data, _ := os.ReadFile(outside); string(data) != "ORIGINAL" {
			t.Fatalf("symlink %s: the file outside the folder was overwritten", link)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "rules.jsonl")); err == nil {
			t.Fatalf("symlink %s: a file was written outside the folder", link)
		}
	}
}

// TestIsLoopback: a host name is case-insensitive, so LOCALHOST:5000 is
// the loopback registry (plain HTTP) as localhost:5000 is.
func TestIsLoopback(t *testing.T) {
	for reg, want := range map[string]bool{"localhost:5000": true, "LOCALHOST:5000": true, "Localhost": true, "127.0.0.1:5000": true,
		"[::1]:5000": true, "localhost.example.com:5000": false, "10.0.0.1:5000": false} {
		if got := bundle.IsLoopback(reg); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", reg, got, want)
		}
	}
}

// TestRunCasesRunsTheVerifiedBytes: the cases run on the bundle's bytes;
// a policy file or module on disk rewritten after the bundle was read is
// refused, naming the sha256 pin mismatch, not tested.
func TestRunCasesRunsTheVerifiedBytes(t *testing.T) {
	for file, rewrite := range map[string]func([]byte) []byte{
		"policy.json": func(d []byte) []byte { return bytes.Replace(d, []byte(`"reason":"v1"`), []byte(`"reason":"v2"`), 1) },
		"rules.wasm":  func(d []byte) []byte { return append(d, 0x00, 0x05, 0x03, 'x', 'y', 'z', 0x00) },
	} {
		dir := writeBundle(t, "v1", "v1")
		b, err := bundle.ReadDir(dir)
		must(t, err)
		data, err := os.ReadFile(filepath.Join(dir, file))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, file), rewrite(data), 0o600))
		_, failed, err := bundle.RunCases(context.Background(), dir, b, wasmhost.Options{})
		if err == nil || !strings.Contains(err.Error(), "sha256 pin mismatch") {
			t.Errorf("%s rewritten: RunCases = %v, %v; want refused naming the sha256 pin mismatch", file, failed, err)
		}
	}
}
