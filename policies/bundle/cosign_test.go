package bundle_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/bundle"
)

// cosign runs the cosign v2 CLI offline: its home, TUF root and Docker
// config in temp folders, COSIGN_PASSWORD set.
func cosign(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, "tuf"), "DOCKER_CONFIG="+filepath.Join(dir, "docker"),
		"COSIGN_PASSWORD=pw", "COSIGN_YES=true", "SIGSTORE_NO_CACHE=true")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCosignInterop: cosign verifies a signature of `policy sign`, and
// we verify one that `cosign sign` made, with cosign's own key files
// (its encrypted cosign.key signs for us too).
func TestCosignInterop(t *testing.T) {
	bin := testkit.Peer(t, testkit.Cosign)
	ctx := context.Background()
	reg := testkit.StartRegistry(t)
	priv, pub := keyPair(t, nil)
	ours := pushSigned(t, ctx, writeBundle(t, "v1", "v1"), "oci://"+reg.Host+"/team/policy:v1", priv, 1)
	dir := t.TempDir()
	image := reg.Host + "/team/policy@" + ours.Digest.String()

	out, err := cosign(t, bin, dir, "verify", "--key", pub, "--insecure-ignore-tlog=true", "--allow-insecure-registry", "--allow-http-registry", image)
	if err != nil {
		t.Fatalf("cosign verify of our signature: %v\n%s", err, out)
	}
	if !strings.Contains(out, ours.Digest.String()) {
		t.Errorf("cosign verify printed no payload for %s:\n%s", ours.Digest, out)
	}
	_, otherPub := keyPair(t, nil)
	if out, err := cosign(t, bin, dir, "verify", "--key", otherPub, "--insecure-ignore-tlog=true", "--allow-insecure-registry", "--allow-http-registry", image); err == nil {
		t.Fatalf("cosign verified our signature with another key:\n%s", out)
	}

	if out, err := cosign(t, bin, dir, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	theirs := pushSigned(t, ctx, writeBundle(t, "v2", "v2"), "oci://"+reg.Host+"/team/policy:v2", "", 0)
	image = reg.Host + "/team/policy@" + theirs.Digest.String()
	out, err = cosign(t, bin, dir, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-insecure-registry", "--allow-http-registry",
		"-a", bundle.AnnotationSequence+"=5", image)
	if err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	sigs, err := bundle.FetchSignatures(ctx, theirs, theirs.Digest, bundle.Remote{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := bundle.LoadPublicKeys([]string{filepath.Join(dir, "cosign.pub")})
	if err != nil {
		t.Fatal(err)
	}
	v, err := bundle.VerifySignatures(theirs, theirs.Digest, sigs, keys)
	if err != nil || v.Sequence != 5 {
		t.Fatalf("our verify of cosign's signature: %v %+v", err, v)
	}
	// cosign's encrypted key signs with our tool; cosign verifies it.
	signer, err := bundle.LoadPrivateKey(filepath.Join(dir, "cosign.key"), func() ([]byte, error) { return []byte("pw"), nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := bundle.Sign(ctx, ours, ours.Digest, signer, 2, bundle.Remote{}); err != nil {
		t.Fatal(err)
	}
	image = reg.Host + "/team/policy@" + ours.Digest.String()
	if out, err := cosign(t, bin, dir, "verify", "--key", "cosign.pub", "--insecure-ignore-tlog=true", "--allow-insecure-registry", "--allow-http-registry", image); err != nil {
		t.Fatalf("cosign verify of our signature with cosign's key: %v\n%s", err, out)
	}
}
