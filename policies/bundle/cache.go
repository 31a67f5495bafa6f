package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Pins are the sha256 digests (hex) of the bundle's files as verified,
// by their path under Dir: what engine.Options.Pins takes, so that the
// engine loads exactly the verified bytes.
func (a *Accepted) Pins() map[string]string { return a.Bundle.Pins(a.Dir) }

// Cache keeps the bundles a process accepted, one folder per repository:
//
//	DIR/REGISTRY/REPOSITORY/state.json          the accepted digest and sequence
//	DIR/REGISTRY/REPOSITORY/sha256-HEX/manifest.json
//	DIR/REGISTRY/REPOSITORY/sha256-HEX/signature.json
//	DIR/REGISTRY/REPOSITORY/sha256-HEX/files/…   the bundle's files
//
// Nothing read from it is trusted: [Cache.Load] checks the manifest
// against its digest, every file against its layer and the signature
// against the trusted keys, each time.
type Cache struct {
	// Dir is the cache's root folder.
	Dir string
}

// State is what a repository's state.json records: the bundle accepted
// last, for the rollback check and for a start with the registry down.
type State struct {
	// Tag is the tag it was pulled by.
	Tag string `json:"tag,omitempty"`
	// Digest is its manifest digest and Sequence its signature's
	// AnnotationSequence.
	Digest   digest.Digest `json:"digest"`
	Sequence int64         `json:"sequence"`
	// Key is the fingerprint of the key that verified it.
	Key        string    `json:"key"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// Accepted is a bundle verified and written to a folder: what a process
// runs.
type Accepted struct {
	Ref    Ref
	Digest digest.Digest
	// Dir holds the bundle's files; its policy.json is PolicyFile.
	Dir        string
	PolicyFile string
	Bundle     *Bundle
	Verified   *Verified
}

func (c *Cache) repoDir(ref Ref) string {
	return filepath.Join(c.Dir, ref.Registry, filepath.FromSlash(ref.Repository))
}

func (c *Cache) digestDir(ref Ref, d digest.Digest) string {
	return filepath.Join(c.repoDir(ref), SignatureTag(d)[:len(SignatureTag(d))-len(".sig")])
}

// State returns the repository's accepted state; ok is false when none
// was recorded.
func (c *Cache) State(ref Ref) (st State, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(c.repoDir(ref), "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("bundle cache: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, false, fmt.Errorf("bundle cache %s: state.json: %w", c.repoDir(ref), err)
	}
	if st.Digest.Validate() != nil {
		return State{}, false, fmt.Errorf("bundle cache %s: state.json: bad digest %q", c.repoDir(ref), st.Digest)
	}
	return st, true, nil
}

// Stage writes a pulled bundle and its signature to the cache (its
// digest's folder) and returns it as Accepted; the state is unchanged
// until [Cache.Commit]. A folder already holding exactly these files (an
// earlier stage, or another process on this machine following the same
// bundle, which may be loading from it) is kept and only its signature
// replaced; any other is replaced whole.
func (c *Cache) Stage(ref Ref, p *Pulled, v *Verified) (*Accepted, error) {
	final := c.digestDir(ref, p.Digest)
	files := filepath.Join(final, "files")
	accepted := &Accepted{Ref: ref, Digest: p.Digest, Dir: files, PolicyFile: filepath.Join(files, PolicyFileName), Bundle: p.Bundle, Verified: v}
	sig, err := json.Marshal(v.Signature)
	if err != nil {
		return nil, err
	}
	if c.holds(final, p) {
		if err := writeFileAtomic(filepath.Join(final, "signature.json"), sig); err != nil {
			return nil, fmt.Errorf("bundle cache: %w", err)
		}
		return accepted, nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), ".stage-")
	if err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "manifest.json"), p.Manifest, 0o600); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "signature.json"), sig, 0o600); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	if err := p.Bundle.WriteDir(filepath.Join(tmp, "files")); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	if err := os.RemoveAll(final); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	return accepted, nil
}

// holds reports whether dir holds p's manifest and every file of its
// bundle, byte for byte.
func (c *Cache) holds(dir string, p *Pulled) bool {
	if m, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err != nil || !bytes.Equal(m, p.Manifest) {
		return false
	}
	for _, f := range p.Bundle.Files {
		data, err := os.ReadFile(filepath.Join(dir, "files", filepath.FromSlash(f.Path)))
		if err != nil || !bytes.Equal(data, f.Data) {
			return false
		}
	}
	return true
}

// writeFileAtomic replaces path by a rename, so a reader never sees half.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Commit records a as the repository's accepted bundle and removes the
// folders of the other digests.
func (c *Cache) Commit(a *Accepted) error {
	st := State{Tag: a.Ref.Tag, Digest: a.Digest, Sequence: a.Verified.Sequence, Key: a.Verified.Key.Fingerprint, AcceptedAt: time.Now().UTC()}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := c.repoDir(a.Ref)
	if err := writeFileAtomic(filepath.Join(dir, "state.json"), append(data, '\n')); err != nil {
		return fmt.Errorf("bundle cache: %w", err)
	}
	keep := filepath.Base(c.digestDir(a.Ref, a.Digest))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && e.Name() != keep && len(e.Name()) == len(keep) && e.Name()[:7] == "sha256-" {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// Discard removes a staged bundle that was not committed.
func (c *Cache) Discard(a *Accepted) {
	if st, ok, _ := c.State(a.Ref); ok && st.Digest == a.Digest {
		return
	}
	_ = os.RemoveAll(filepath.Dir(a.Dir))
}

// Load returns the repository's accepted bundle from the cache, verified
// again: the manifest against the recorded digest, each file against its
// layer's digest and size, the signature against keys and the binding to
// ref's repository. Errors say which check failed.
func (c *Cache) Load(ref Ref, keys []TrustedKey) (*Accepted, error) {
	st, ok, err := c.State(ref)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("bundle cache %s: no bundle of %s was accepted on this machine", c.Dir, ref.Name())
	}
	dir := c.digestDir(ref, st.Digest)
	man, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	files := filepath.Join(dir, "files")
	p, err := fetchLayers(ref, st.Digest, man, func(l ocispec.Descriptor) ([]byte, error) {
		fi, err := os.Lstat(filepath.Join(files, filepath.FromSlash(l.Annotations[ocispec.AnnotationTitle])))
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() || fi.Size() != l.Size {
			return nil, fmt.Errorf("not a regular file of %d bytes", l.Size)
		}
		return os.ReadFile(filepath.Join(files, filepath.FromSlash(l.Annotations[ocispec.AnnotationTitle])))
	})
	if err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	sigData, err := os.ReadFile(filepath.Join(dir, "signature.json"))
	if err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	var sig Signature
	if err := json.Unmarshal(sigData, &sig); err != nil {
		return nil, fmt.Errorf("bundle cache: signature.json: %w", err)
	}
	v, err := VerifySignatures(ref, st.Digest, []Signature{sig}, keys)
	if err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	return &Accepted{Ref: ref, Digest: st.Digest, Dir: files, PolicyFile: filepath.Join(files, PolicyFileName), Bundle: p.Bundle, Verified: v}, nil
}
