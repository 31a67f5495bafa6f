package bundle

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
)

// cosign's tag-based signature layout (docs/policy-bundles.md).
const (
	// MediaTypeSimpleSigning is the layer of one signature: the simple
	// signing payload (JSON) that the signature covers.
	MediaTypeSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
	// AnnotationSignature holds the base64 signature of the payload on
	// its layer.
	AnnotationSignature = "dev.cosignproject.cosign/signature"
	// AnnotationSequence is the optional payload annotation that orders a
	// repository's signatures: a decimal integer, higher is newer
	// (`openclaw policy sign` writes the signing time in Unix
	// milliseconds; `cosign sign -a dev.openclaw.policy.sequence=N` sets
	// one). A tag moved to a digest whose signature is not newer than the
	// accepted one is a rollback.
	AnnotationSequence = "dev.openclaw.policy.sequence"
)

// MaxSignatures bounds the layers of a signature tag: each is a payload
// fetched and verified against every trusted key, so whoever can write the
// tag could otherwise make every follower download thousands.
const MaxSignatures = 64

// SignatureTag is the tag of d's signatures: "sha256-<hex>.sig".
func SignatureTag(d digest.Digest) string {
	return string(d.Algorithm()) + "-" + d.Encoded() + ".sig"
}

// TrustedKey is a public key signatures are verified against.
type TrustedKey struct {
	// Path is the key file; Fingerprint the sha256 of its DER form (hex),
	// which names it in messages.
	Path        string
	Fingerprint string
	verifier    signature.Verifier
}

// LoadPublicKey reads a PEM public key (ECDSA P-256 as cosign writes
// cosign.pub; RSA and Ed25519 too).
func LoadPublicKey(path string) (TrustedKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return TrustedKey{}, fmt.Errorf("public key: %w", err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(data)
	if err != nil {
		return TrustedKey{}, fmt.Errorf("public key %s: %w", path, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return TrustedKey{}, fmt.Errorf("public key %s: %w", path, err)
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return TrustedKey{}, fmt.Errorf("public key %s: %w", path, err)
	}
	sum := sha256.Sum256(der)
	return TrustedKey{Path: path, Fingerprint: hex.EncodeToString(sum[:]), verifier: v}, nil
}

// LoadPublicKeys loads every key of paths; at least one is required.
func LoadPublicKeys(paths []string) ([]TrustedKey, error) {
	if len(paths) == 0 {
		return nil, errors.New("no public key: give --key FILE.pub (repeatable)")
	}
	keys := make([]TrustedKey, 0, len(paths))
	for _, p := range paths {
		k, err := LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// LoadPrivateKey reads a PEM private key: an unencrypted PKCS#8, EC or
// PKCS#1 key, or cosign's encrypted key (ENCRYPTED SIGSTORE/COSIGN
// PRIVATE KEY), decrypted with password.
func LoadPrivateKey(path string, password func() ([]byte, error)) (signature.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	pf := cryptoutils.PassFunc(func(bool) ([]byte, error) { return password() })
	if password == nil {
		pf = cryptoutils.SkipPassword
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(data, pf)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	s, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return s, nil
}

// Payload builds the simple signing payload cosign signs for d in ref's
// repository, with the optional annotations.
func Payload(ref Ref, d digest.Digest, annotations map[string]any) ([]byte, error) {
	p := payload.SimpleContainerImage{
		Critical: payload.Critical{
			Identity: payload.Identity{DockerReference: ref.identity()},
			Image:    payload.Image{DockerManifestDigest: d.String()},
			Type:     payload.CosignSignatureType,
		},
		Optional: annotations,
	}
	return json.Marshal(p)
}

// Sign signs the manifest digest d of ref's repository with signer and
// adds the signature to the tag SignatureTag(d), keeping the signatures
// already there; seq is written as [AnnotationSequence].
func Sign(ctx context.Context, ref Ref, d digest.Digest, signer signature.Signer, seq int64, o Remote) error {
	repo, err := o.repository(ref)
	if err != nil {
		return err
	}
	if _, err := repo.Resolve(ctx, d.String()); err != nil {
		return fmt.Errorf("%s@%s: %w", ref.Name(), d, err)
	}
	pl, err := Payload(ref, d, map[string]any{AnnotationSequence: strconv.FormatInt(seq, 10)})
	if err != nil {
		return err
	}
	sig, err := signer.SignMessage(bytes.NewReader(pl))
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	var layers []ocispec.Descriptor
	if old, err := fetchSignatureManifest(ctx, ref, d, o); err == nil {
		layers = old.Layers
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	l := content.NewDescriptorFromBytes(MediaTypeSimpleSigning, pl)
	l.Annotations = map[string]string{AnnotationSignature: base64.StdEncoding.EncodeToString(sig)}
	if err := pushBlob(ctx, repo, l, pl); err != nil {
		return fmt.Errorf("signature payload: %w", err)
	}
	layers = append(layers, l)
	// The config is an image config whose rootfs lists the layers (the
	// payloads are uncompressed, so each diff ID is its digest), as
	// cosign writes it.
	type history struct {
		Created string `json:"created"`
	}
	cfg := struct {
		Architecture string         `json:"architecture"`
		Created      string         `json:"created"`
		History      []history      `json:"history"`
		OS           string         `json:"os"`
		RootFS       ocispec.RootFS `json:"rootfs"`
		Config       struct{}       `json:"config"`
	}{Created: "0001-01-01T00:00:00Z", RootFS: ocispec.RootFS{Type: "layers"}}
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.Digest)
		cfg.History = append(cfg.History, history{Created: "0001-01-01T00:00:00Z"})
	}
	cfgData, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, cfgData)
	if err := pushBlob(ctx, repo, cfgDesc, cfgData); err != nil {
		return fmt.Errorf("signature config: %w", err)
	}
	man := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: cfgDesc, Layers: layers}
	man.SchemaVersion = 2
	manData, err := json.Marshal(man)
	if err != nil {
		return err
	}
	md := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, manData)
	if err := repo.PushReference(ctx, md, bytes.NewReader(manData), SignatureTag(d)); err != nil {
		return fmt.Errorf("signature manifest: %w", err)
	}
	return nil
}

// Signature is one signature of a signature manifest: the payload and
// the signature bytes.
type Signature struct {
	Payload   []byte `json:"payload"`
	Signature []byte `json:"signature"`
}

// fetchSignatureManifest reads the manifest tagged SignatureTag(d).
func fetchSignatureManifest(ctx context.Context, ref Ref, d digest.Digest, o Remote) (*ocispec.Manifest, error) {
	repo, err := o.repository(ref)
	if err != nil {
		return nil, err
	}
	desc, rc, err := repo.FetchReference(ctx, SignatureTag(d))
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, fmt.Errorf("%s: no signature (tag %s): %w", ref.Name(), SignatureTag(d), ErrNotFound)
		}
		return nil, fmt.Errorf("%s: signature tag %s: %w", ref.Name(), SignatureTag(d), err)
	}
	defer rc.Close()
	if desc.Size > MaxManifestSize {
		return nil, fmt.Errorf("%s: signature manifest of %d bytes", ref.Name(), desc.Size)
	}
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("%s: signature manifest: %w", ref.Name(), err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: signature manifest: %w", ref.Name(), err)
	}
	return &m, nil
}

// FetchSignatures returns the signatures stored for d in ref's
// repository (cosign's tag layout); ErrNotFound (wrapped) when there are
// none, ErrInvalid (wrapped) when the tag holds more than MaxSignatures
// layers.
func FetchSignatures(ctx context.Context, ref Ref, d digest.Digest, o Remote) ([]Signature, error) {
	m, err := fetchSignatureManifest(ctx, ref, d, o)
	if err != nil {
		return nil, err
	}
	repo, err := o.repository(ref)
	if err != nil {
		return nil, err
	}
	if len(m.Layers) > MaxSignatures {
		return nil, fmt.Errorf("%s: the signature tag %s holds %d layers, more than %d: %w", ref.Name(), SignatureTag(d), len(m.Layers), MaxSignatures, ErrInvalid)
	}
	var sigs []Signature
	for _, l := range m.Layers {
		if l.MediaType != MediaTypeSimpleSigning || l.Size > 1<<20 {
			continue
		}
		b64, ok := l.Annotations[AnnotationSignature]
		if !ok {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		pl, err := content.FetchAll(ctx, repo.Blobs(), l)
		if err != nil {
			return nil, fmt.Errorf("%s: signature payload %s: %w", ref.Name(), l.Digest, err)
		}
		sigs = append(sigs, Signature{Payload: pl, Signature: sig})
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%s: the signature tag %s holds no signature: %w", ref.Name(), SignatureTag(d), ErrNotFound)
	}
	return sigs, nil
}

// Verified is the signature that made a digest trusted.
type Verified struct {
	// Key is the trusted key that verified it.
	Key TrustedKey
	// Sequence is its AnnotationSequence, 0 when it has none.
	Sequence int64
	// Signature is the payload and signature.
	Signature Signature
}

// VerifySignatures returns the newest (highest sequence) of sigs that a
// key of keys verifies and whose payload binds digest d in ref's
// repository. The error says why each signature was refused.
func VerifySignatures(ref Ref, d digest.Digest, sigs []Signature, keys []TrustedKey) (*Verified, error) {
	var best *Verified
	var why []string
	for i, s := range sigs {
		var key *TrustedKey
		for k := range keys {
			if keys[k].verifier.VerifySignature(bytes.NewReader(s.Signature), bytes.NewReader(s.Payload)) == nil {
				key = &keys[k]
				break
			}
		}
		if key == nil {
			why = append(why, fmt.Sprintf("signature %d: made by none of the trusted keys", i+1))
			continue
		}
		seq, err := checkPayload(ref, d, s.Payload)
		if err != nil {
			why = append(why, fmt.Sprintf("signature %d (key %s): %v", i+1, key.Path, err))
			continue
		}
		if best == nil || seq > best.Sequence {
			best = &Verified{Key: *key, Sequence: seq, Signature: s}
		}
	}
	if best == nil {
		if len(why) == 0 {
			why = append(why, "no signature")
		}
		return nil, fmt.Errorf("%s@%s: no valid signature: %s", ref.Name(), d, strings.Join(why, "; "))
	}
	return best, nil
}

// checkPayload checks a verified payload: cosign's type, the digest d and
// ref's repository; it returns the sequence annotation (0 if absent).
func checkPayload(ref Ref, d digest.Digest, data []byte) (int64, error) {
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(data, &p); err != nil {
		return 0, fmt.Errorf("payload: %w", err)
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return 0, fmt.Errorf("payload type %q, want %q", p.Critical.Type, payload.CosignSignatureType)
	}
	if p.Critical.Image.DockerManifestDigest != d.String() {
		return 0, fmt.Errorf("signs digest %s, not %s", p.Critical.Image.DockerManifestDigest, d)
	}
	if !sameRepository(ref, p.Critical.Identity.DockerReference) {
		return 0, fmt.Errorf("signs repository %s, not %s (a signature is bound to its repository)", p.Critical.Identity.DockerReference, ref.identity())
	}
	var seq int64
	if v, ok := p.Optional[AnnotationSequence]; ok {
		s, ok := v.(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || n < 0 {
			return 0, fmt.Errorf("annotation %s is %v, not a decimal integer ≥ 0", AnnotationSequence, v)
		}
		seq = n
	}
	return seq, nil
}
