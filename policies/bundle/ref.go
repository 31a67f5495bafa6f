// Package bundle ships a policy set as one OCI artifact: the policy file,
// its .wasm modules and its `policy test` cases (docs/policy-bundles.md).
// It pushes and pulls bundles with oras-go, signs and verifies them in
// cosign's keyed, tag-based layout with sigstore's signature package,
// refuses a tag moved back to an older signed digest, and keeps a cache of
// verified bundles that is verified again on every load.
//
// What runs a bundle (the policy engine's swap) is the caller's: this
// package hands it a folder holding a verified bundle whose test cases
// passed.
package bundle

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/opencontainers/go-digest"

	"github.com/openclaw-go/openclaw/config"
)

// Scheme prefixes a bundle reference on the command line.
const Scheme = "oci://"

// Ref is a parsed oci://REGISTRY/REPOSITORY[:TAG][@DIGEST] reference.
type Ref struct {
	// Registry is the host[:port] of the registry.
	Registry string
	// Repository is the path inside the registry, e.g. "team/policy".
	Repository string
	// Tag is the tag, "" when the reference names only a digest.
	Tag string
	// Digest is the manifest digest, "" when the reference names only a
	// tag.
	Digest digest.Digest
}

// ParseRef parses s, which must start with "oci://" and name a tag, a
// digest or both; errors quote s.
func ParseRef(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Ref{}, fmt.Errorf("bundle reference %q: must start with %s (oci://REGISTRY/REPOSITORY:TAG)", s, Scheme)
	}
	var r Ref
	if before, after, ok := strings.Cut(rest, "@"); ok {
		d, err := digest.Parse(after)
		if err != nil || d.Algorithm() != digest.SHA256 {
			return Ref{}, fmt.Errorf("bundle reference %q: digest %q is not sha256:<64 hex>", s, after)
		}
		r.Digest, rest = d, before
	}
	slash := strings.IndexByte(rest, '/')
	if slash <= 0 {
		return Ref{}, fmt.Errorf("bundle reference %q: no repository (oci://REGISTRY/REPOSITORY:TAG)", s)
	}
	r.Registry, rest = rest[:slash], rest[slash+1:]
	if !validRegistry(r.Registry) {
		return Ref{}, fmt.Errorf("bundle reference %q: registry %q is not a host name or IP with an optional port", s, r.Registry)
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		r.Tag, rest = rest[i+1:], rest[:i]
		if r.Tag == "" {
			return Ref{}, fmt.Errorf("bundle reference %q: empty tag", s)
		}
	}
	r.Repository = rest
	if r.Tag == "" && r.Digest == "" {
		return Ref{}, fmt.Errorf("bundle reference %q: names neither a tag nor a digest (add :TAG or @sha256:…)", s)
	}
	if !strings.ContainsAny(r.Registry, ".:") {
		// go-containerregistry (so cosign, whose docker-reference the
		// signature carries) reads such a first component as part of a
		// Docker Hub repository.
		port := "PORT"
		if config.IsLoopbackHost(r.Registry) {
			port = "80"
		}
		rewritten := Scheme + r.Registry + ":" + port + "/" + r.Repository
		if r.Tag != "" {
			rewritten += ":" + r.Tag
		}
		return Ref{}, fmt.Errorf("bundle reference %q: %q has neither '.' nor ':', so cosign reads it as a Docker Hub repository, not a registry; name the port: %s", s, r.Registry, rewritten)
	}
	if _, err := name.NewRepository(r.Registry+"/"+r.Repository, name.StrictValidation); err != nil {
		return Ref{}, fmt.Errorf("bundle reference %q: %w", s, err)
	}
	if r.Tag != "" {
		if _, err := name.NewTag(r.Registry+"/"+r.Repository+":"+r.Tag, name.StrictValidation); err != nil {
			return Ref{}, fmt.Errorf("bundle reference %q: %w", s, err)
		}
	}
	return r, nil
}

// validRegistry reports whether registry is HOST or HOST:PORT, HOST an IP
// ([…] for IPv6) or a DNS name: letters, digits and '-' in labels that
// do not start or end with '-'. It is a folder name of the cache, so "."
// and ".." never pass.
func validRegistry(registry string) bool {
	host := registry
	if h, port, err := net.SplitHostPort(registry); err == nil {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return false
		}
		host = h
	} else if strings.HasPrefix(registry, "[") {
		host = strings.TrimSuffix(strings.TrimPrefix(registry, "["), "]")
	}
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// String is the reference in oci:// form.
func (r Ref) String() string {
	s := Scheme + r.Name()
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest.String()
	}
	return s
}

// Name is "REGISTRY/REPOSITORY", what oras-go's remote.NewRepository and
// a signature's docker-reference name.
func (r Ref) Name() string { return r.Registry + "/" + r.Repository }

// reference is the tag, or else the digest: what Resolve takes.
func (r Ref) reference() string {
	if r.Digest != "" {
		return r.Digest.String()
	}
	return r.Tag
}

// identity is the repository as go-containerregistry normalizes it
// (docker.io → index.docker.io, library/ added), the form cosign writes in
// critical.identity.docker-reference.
func (r Ref) identity() string {
	repo, err := name.NewRepository(r.Name())
	if err != nil {
		return r.Name()
	}
	return repo.Name()
}

// sameRepository reports whether a signature's docker-reference (a
// repository, perhaps with a tag or digest) names r's repository.
func sameRepository(r Ref, dockerReference string) bool {
	if ref, err := name.ParseReference(dockerReference); err == nil {
		return ref.Context().Name() == r.identity()
	}
	repo, err := name.NewRepository(dockerReference)
	return err == nil && repo.Name() == r.identity()
}

// IsLoopback reports whether the registry host is on this machine
// (localhost, 127.0.0.0/8, ::1): such a registry is spoken to in plain
// HTTP unless told otherwise (docs/RATIONALE.md "Why plain HTTP for a
// loopback registry by default?").
func IsLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	return config.IsLoopbackHost(host)
}

// ErrNotFound is returned (wrapped) when a tag, manifest or signature is
// not in the registry.
var ErrNotFound = errors.New("not found")

// ErrDigestMismatch is returned (wrapped) when a manifest or a layer does
// not hash to its digest or has another size.
var ErrDigestMismatch = errors.New("digest mismatch")

// ErrInvalid is returned (wrapped) when a manifest or its files are not a
// valid policy bundle.
var ErrInvalid = errors.New("not a valid policy bundle")
