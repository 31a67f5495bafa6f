package bundle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Remote says how to reach a registry.
type Remote struct {
	// PlainHTTP speaks HTTP instead of HTTPS. nil means HTTP for a
	// loopback registry ([IsLoopback]) and HTTPS otherwise.
	PlainHTTP *bool
	// Timeout bounds each request; 0 means 30 s.
	Timeout time.Duration
}

// repository opens ref's repository, with the credentials of the Docker
// config (~/.docker/config.json, $DOCKER_CONFIG) when there are any.
func (o Remote) repository(ref Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(ref.Name())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	repo.PlainHTTP = IsLoopback(ref.Registry)
	if o.PlainHTTP != nil {
		repo.PlainHTTP = *o.PlainHTTP
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	client := &auth.Client{
		Client: &http.Client{Transport: retry.NewTransport(http.DefaultTransport), Timeout: timeout},
		Cache:  auth.NewCache(),
	}
	client.SetUserAgent("openclaw-go")
	if store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{}); err == nil {
		client.Credential = credentials.Credential(store)
	}
	repo.Client = client
	// Debian's registry 2.8 has no referrers API; the signature layout is
	// cosign's tags, so the referrers capability is never probed.
	_ = repo.SetReferrersCapability(false)
	return repo, nil
}

// Push uploads the bundle's files as layers, then the manifest (an OCI
// image manifest of artifactType [ArtifactType], empty config), tags it
// with ref's tag and returns the manifest's descriptor.
func Push(ctx context.Context, b *Bundle, ref Ref, o Remote) (ocispec.Descriptor, error) {
	if err := b.Validate(); err != nil {
		return ocispec.Descriptor{}, err
	}
	if ref.Tag == "" {
		return ocispec.Descriptor{}, fmt.Errorf("%s: push needs a tag", ref)
	}
	repo, err := o.repository(ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layers := make([]ocispec.Descriptor, len(b.Files))
	for i, f := range b.Files {
		d := content.NewDescriptorFromBytes(f.MediaType, f.Data)
		d.Annotations = map[string]string{ocispec.AnnotationTitle: f.Path}
		if err := pushBlob(ctx, repo, d, f.Data); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("%s: %s: %w", ref, f.Path, err)
		}
		layers[i] = d
	}
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ArtifactType, oras.PackManifestOptions{Layers: layers})
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%s: manifest: %w", ref, err)
	}
	if err := repo.Tag(ctx, desc, ref.Tag); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%s: tag: %w", ref, err)
	}
	return desc, nil
}

func pushBlob(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, data []byte) error {
	if ok, err := repo.Exists(ctx, d); err == nil && ok {
		return nil
	}
	err := repo.Push(ctx, d, bytes.NewReader(data))
	if errors.Is(err, errdef.ErrAlreadyExists) {
		return nil
	}
	return err
}

// Resolve returns the descriptor ref's tag (or digest) names now: a
// HEAD request, what a poll for a new digest costs.
func Resolve(ctx context.Context, ref Ref, o Remote) (ocispec.Descriptor, error) {
	repo, err := o.repository(ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc, err := repo.Resolve(ctx, ref.reference())
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, ErrNotFound)
		}
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, err)
	}
	if ref.Digest != "" && desc.Digest != ref.Digest {
		return ocispec.Descriptor{}, fmt.Errorf("%s: the registry names %s", ref, desc.Digest)
	}
	return desc, nil
}

// Pulled is a bundle fetched from a registry, its layers checked against
// their digests.
type Pulled struct {
	// Digest is the manifest's digest; Manifest its bytes.
	Digest   digest.Digest
	Manifest []byte
	// Parsed is the validated manifest.
	Parsed *Manifest
	Bundle *Bundle
}

// Pull fetches the manifest ref names (the tag's current one, or the
// digest), checks it (ParseManifest), fetches every layer checking its
// size and sha256 digest, and checks the bundle's consistency.
func Pull(ctx context.Context, ref Ref, o Remote) (*Pulled, error) {
	repo, err := o.repository(ref)
	if err != nil {
		return nil, err
	}
	desc, err := Resolve(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	if desc.Size > MaxManifestSize {
		return nil, fmt.Errorf("%s: manifest of %d bytes, more than %d", ref, desc.Size, MaxManifestSize)
	}
	data, err := content.FetchAll(ctx, repo.Manifests(), desc)
	if err != nil {
		return nil, fmt.Errorf("%s: manifest %s: %w", ref, desc.Digest, err)
	}
	return fetchLayers(ref, desc.Digest, data, func(d ocispec.Descriptor) ([]byte, error) {
		return content.FetchAll(ctx, repo.Blobs(), d)
	})
}

// fetchLayers parses the manifest data (whose digest is d), reads each
// layer with fetch and checks it against the layer's digest and size.
func fetchLayers(ref Ref, d digest.Digest, data []byte, fetch func(ocispec.Descriptor) ([]byte, error)) (*Pulled, error) {
	if got := digest.FromBytes(data); got != d {
		return nil, fmt.Errorf("%s: manifest %w: the bytes hash to %s, not %s", ref, ErrDigestMismatch, got, d)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", ref, ErrInvalid, err)
	}
	b := &Bundle{}
	for _, l := range m.Layers {
		title := l.Annotations[ocispec.AnnotationTitle]
		blob, err := fetch(l)
		if err != nil {
			if errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) {
				err = fmt.Errorf("%w: %v", ErrDigestMismatch, err)
			}
			return nil, fmt.Errorf("%s: layer %s (%s): %w", ref, title, l.Digest, err)
		}
		if int64(len(blob)) != l.Size {
			return nil, fmt.Errorf("%s: layer %s: %w: %d bytes, the manifest says %d", ref, title, ErrDigestMismatch, len(blob), l.Size)
		}
		if got := digest.FromBytes(blob); got != l.Digest {
			return nil, fmt.Errorf("%s: layer %s: %w: the bytes hash to %s, the manifest says %s", ref, title, ErrDigestMismatch, got, l.Digest)
		}
		f := File{Path: title, MediaType: l.MediaType, Data: blob}
		if f.MediaType == MediaTypePolicyFile {
			b.Files = append([]File{f}, b.Files...)
		} else {
			b.Files = append(b.Files, f)
		}
	}
	if err := b.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", ref, ErrInvalid, err)
	}
	return &Pulled{Digest: d, Manifest: data, Parsed: m, Bundle: b}, nil
}
