package protocol

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

const fixtures = "../../testdata/openclaw/gateway-frames/"

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	return data
}

// The captured connect request of the real `openclaw mcp serve` must verify
// with our v3 string, at the challenge time it was signed for.
func TestVerifyCapturedConnect(t *testing.T) {
	t.Parallel()
	f, err := Decode(readFixture(t, "02-connect.req.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p ConnectParams
	if err := json.Unmarshal(f.Params, &p); err != nil {
		t.Fatal(err)
	}
	var ch Challenge
	cf, err := Decode(readFixture(t, "01-connect.challenge.event.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cf.Payload, &ch); err != nil {
		t.Fatal(err)
	}
	if got := VerifyConnect(&p, ch.Nonce, ch.TS+1000); got != "" {
		t.Fatalf("captured connect does not verify: %s", got)
	}
	if got := VerifyConnect(&p, "other-nonce", ch.TS); got != ReasonNonceMismatch {
		t.Fatalf("wrong nonce: got %q", got)
	}
	if got := VerifyConnect(&p, ch.Nonce, ch.TS+MaxSignatureSkewMs+1); got != ReasonSignatureStale {
		t.Fatalf("stale: got %q", got)
	}
	p.Scopes = []string{"operator.admin"}
	if got := VerifyConnect(&p, ch.Nonce, ch.TS); got != ReasonSignature {
		t.Fatalf("tampered scopes: got %q", got)
	}
}

func TestProveRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "device.json")
	id, err := LoadOrCreateDeviceIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateDeviceIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != id.ID {
		t.Fatalf("identity changed on reload: %s vs %s", again.ID, id.ID)
	}
	p := &ConnectParams{Client: ClientInfo{ID: "cli", Mode: "cli", Platform: "Linux", DeviceFamily: "Linux"},
		Role: RoleOperator, Scopes: []string{ScopeOperatorRead}, Auth: &Auth{Token: "tok"}}
	p.Device = again.Prove(SignedFields{ClientID: "cli", ClientMode: "cli", Role: RoleOperator,
		Scopes: p.Scopes, SignedAtMs: 1000, Token: "tok", Nonce: "n1", Platform: "Linux", DeviceFamily: "Linux"})
	if got := VerifyConnect(p, "n1", 1000); got != "" {
		t.Fatalf("own proof does not verify: %s", got)
	}
	p.Auth.Token = "other"
	if got := VerifyConnect(p, "n1", 1000); got != ReasonSignature {
		t.Fatalf("token not covered by signature: %q", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`not json`, `{"type":"res","ok":true}`, `{"type":"res","id":"1"}`,
		`{"type":"event"}`, `{"type":"event","event":"x","seq":-1}`, `{"type":"nope"}`, `[]`} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrMalformedFrame) {
			t.Errorf("Decode(%s) = %v, want ErrMalformedFrame", in, err)
		}
	}
	for _, name := range []string{"03-connect.res.hello-ok.json", "event-session.message.json", "error-res-exec.approval.resolve-unknown.json"} {
		if _, err := Decode(readFixture(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDeviceIdentityCreatedOnce: processes that create the identity at the
// same time (two MCP clients spawning `mcp serve` on first use) get the
// same one, and none fails.
func TestDeviceIdentityCreatedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "device-identity.json")
	const n = 16
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id, err := LoadOrCreateDeviceIdentity(path)
			if err == nil {
				ids[i] = id.ID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("creator %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("creator %d got identity %s, creator 0 %s", i, ids[i], ids[0])
		}
	}
	stored, err := LoadOrCreateDeviceIdentity(path)
	if err != nil || stored.ID != ids[0] {
		t.Fatalf("stored identity %v (%v), want %s", stored, err, ids[0])
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
