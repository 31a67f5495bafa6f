package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// OCI image-spec v1.1 media types (https://github.com/opencontainers/image-spec).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// imageUser is the numeric user and group the image runs as: not root, and
// the "nonroot" id of distroless images, so volume permissions carry over.
const imageUser = 65532

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type ociIndex struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []ociDescriptor   `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type ociManifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        ociDescriptor     `json:"config"`
	Layers        []ociDescriptor   `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type ociImageConfig struct {
	Created      string         `json:"created"`
	Architecture string         `json:"architecture"`
	OS           string         `json:"os"`
	Config       ociRunConfig   `json:"config"`
	RootFS       ociRootFS      `json:"rootfs"`
	History      []ociHistoryEl `json:"history"`
}

type ociRunConfig struct {
	User       string            `json:"User"`
	Env        []string          `json:"Env"`
	Entrypoint []string          `json:"Entrypoint"`
	WorkingDir string            `json:"WorkingDir"`
	Labels     map[string]string `json:"Labels"`
}

type ociRootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type ociHistoryEl struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// imageBinary is one platform's binary for the image.
type imageBinary struct {
	GOARCH string
	Data   []byte
}

// ociLayout is an OCI image layout being written into a folder: the
// blobs/sha256 store, oci-layout and, at the end, index.json.
type ociLayout struct {
	dir string
}

func sha256Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// blob stores b under blobs/sha256 and returns its descriptor.
func (l *ociLayout) blob(mediaType string, b []byte) (ociDescriptor, error) {
	d := sha256Digest(b)
	p := filepath.Join(l.dir, "blobs", "sha256", d[len("sha256:"):])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return ociDescriptor{}, err
	}
	return ociDescriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}, writeFile(p, b)
}

func (l *ociLayout) jsonBlob(mediaType string, v any) (ociDescriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ociDescriptor{}, err
	}
	return l.blob(mediaType, b)
}

// writeImage writes into dir (which must not exist) a multi-platform OCI
// image layout of openclaw-go, one linux image per binary: FROM scratch,
// one layer holding /openclaw (root-owned, 0755) and the empty home
// folder /home/nonroot of user 65532, run as 65532:65532 with /openclaw
// as its entrypoint. Every date is t (the commit time), so the same
// binaries give the same digests. The index tags it ref.
func writeImage(dir, version, commit, ref string, t time.Time, bins []imageBinary) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	l := &ociLayout{dir: dir}
	created := t.UTC().Format(time.RFC3339)
	labels := map[string]string{
		"org.opencontainers.image.title":    "openclaw-go",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": "MIT",
		"org.opencontainers.image.created":  created,
	}
	if commit != "" {
		labels["org.opencontainers.image.revision"] = commit
	}
	idx := ociIndex{SchemaVersion: 2, MediaType: mediaIndex}
	for _, b := range bins {
		var layer bytes.Buffer
		tarEntries := []entry{
			{Name: "openclaw", Mode: 0o755, Data: b.Data},
			{Name: "home", Dir: true, Mode: 0o755},
			{Name: "home/nonroot", Dir: true, Mode: 0o700, UID: imageUser, GID: imageUser},
		}
		var plain bytes.Buffer
		if err := writeTar(&plain, tarEntries, t); err != nil {
			return err
		}
		if err := writeTarGz(&layer, tarEntries, t); err != nil {
			return err
		}
		layerDesc, err := l.blob(mediaLayerGz, layer.Bytes())
		if err != nil {
			return err
		}
		cfg := ociImageConfig{
			Created: created, Architecture: b.GOARCH, OS: "linux",
			Config: ociRunConfig{
				User:       "65532:65532",
				Env:        []string{"HOME=/home/nonroot"},
				Entrypoint: []string{"/openclaw"},
				WorkingDir: "/home/nonroot",
				Labels:     labels,
			},
			RootFS:  ociRootFS{Type: "layers", DiffIDs: []string{sha256Digest(plain.Bytes())}},
			History: []ociHistoryEl{{Created: created, CreatedBy: "openclaw-go release: the openclaw binary, FROM scratch"}},
		}
		cfgDesc, err := l.jsonBlob(mediaConfig, cfg)
		if err != nil {
			return err
		}
		man := ociManifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cfgDesc, Layers: []ociDescriptor{layerDesc}, Annotations: labels}
		manDesc, err := l.jsonBlob(mediaManifest, man)
		if err != nil {
			return err
		}
		manDesc.Platform = &ociPlatform{Architecture: b.GOARCH, OS: "linux"}
		idx.Manifests = append(idx.Manifests, manDesc)
	}
	// A tool that reads one image from a layout (skopeo oci:DIR:REF)
	// finds it by the ref.name of the index's descriptor.
	idxDesc, err := l.jsonBlob(mediaIndex, idx)
	if err != nil {
		return err
	}
	idxDesc.Annotations = map[string]string{"org.opencontainers.image.ref.name": ref}
	top := ociIndex{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []ociDescriptor{idxDesc}}
	b, err := json.Marshal(top)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "index.json"), b); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`))
}
