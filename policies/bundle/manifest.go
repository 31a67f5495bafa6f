package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The media types of a policy bundle (docs/policy-bundles.md).
const (
	// ArtifactType is the manifest's artifactType.
	ArtifactType = "application/vnd.openclaw.policy.bundle.v1"
	// MediaTypePolicyFile is the layer of the policy file (policy.json).
	MediaTypePolicyFile = "application/vnd.openclaw.policy.file.v1+json"
	// MediaTypeModule is a layer holding a .wasm module (policy ABI or
	// OPA-compiled Rego).
	MediaTypeModule = "application/vnd.openclaw.policy.module.v1+wasm"
	// MediaTypeCases is a layer holding `openclaw policy test` cases
	// (JSON Lines) for one module: tests/NAME.jsonl.
	MediaTypeCases = "application/vnd.openclaw.policy.cases.v1+jsonl"
)

// PolicyFileName is the policy file's path in a bundle.
const PolicyFileName = "policy.json"

// CasesDir is the folder of a bundle's test cases: CasesDir/NAME.jsonl
// tests the module named NAME.
const CasesDir = "tests"

// Limits of what a manifest may describe.
const (
	// MaxManifestSize bounds a manifest, in bytes.
	MaxManifestSize = 1 << 20
	// MaxLayerSize bounds one layer, in bytes.
	MaxLayerSize = 64 << 20
	// MaxBundleSize bounds the sum of the layers, in bytes.
	MaxBundleSize = 256 << 20
	// MaxLayers bounds the number of layers.
	MaxLayers = 256
)

// Manifest is a parsed, validated bundle manifest.
type Manifest struct {
	// Layers are the bundle's files in manifest order, each with its
	// path (the layer's org.opencontainers.image.title), media type,
	// digest and size.
	Layers []ocispec.Descriptor
	// Annotations are the manifest's annotations.
	Annotations map[string]string
}

// ParseManifest parses and validates a bundle manifest: an OCI image
// manifest (schemaVersion 2) of artifactType [ArtifactType] whose layers
// each have a known bundle media type, a sha256 digest, a size within the
// limits and a title that is a clean relative path of the bundle's
// layout; exactly one is policy.json. Errors name the offending layer.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("bundle manifest: %d bytes, more than %d", len(data), MaxManifestSize)
	}
	var m ocispec.Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("bundle manifest: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("bundle manifest: data after the JSON object")
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("bundle manifest: schemaVersion %d, want 2", m.SchemaVersion)
	}
	if m.MediaType != ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("bundle manifest: mediaType %q, want %s", m.MediaType, ocispec.MediaTypeImageManifest)
	}
	if m.ArtifactType != ArtifactType {
		return nil, fmt.Errorf("bundle manifest: artifactType %q, want %s (not a policy bundle)", m.ArtifactType, ArtifactType)
	}
	if len(m.Layers) == 0 || len(m.Layers) > MaxLayers {
		return nil, fmt.Errorf("bundle manifest: %d layers (1 to %d)", len(m.Layers), MaxLayers)
	}
	seen := map[string]bool{}
	var total int64
	policies := 0
	for i, l := range m.Layers {
		title := l.Annotations[ocispec.AnnotationTitle]
		where := fmt.Sprintf("bundle manifest: layers[%d] (%q)", i, title)
		if err := l.Digest.Validate(); err != nil || l.Digest.Algorithm() != digest.SHA256 {
			return nil, fmt.Errorf("%s: digest %q is not sha256:<64 hex>", where, l.Digest)
		}
		if l.Size < 0 || l.Size > MaxLayerSize {
			return nil, fmt.Errorf("%s: size %d (0 to %d)", where, l.Size, MaxLayerSize)
		}
		if total += l.Size; total > MaxBundleSize {
			return nil, fmt.Errorf("%s: the layers add up to more than %d bytes", where, MaxBundleSize)
		}
		if err := checkPath(title, l.MediaType); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if seen[title] {
			return nil, fmt.Errorf("%s: a second layer with this title", where)
		}
		seen[title] = true
		if l.MediaType == MediaTypePolicyFile {
			policies++
		}
	}
	if policies != 1 {
		return nil, fmt.Errorf("bundle manifest: %d policy file layers, want 1 (%s)", policies, PolicyFileName)
	}
	return &Manifest{Layers: m.Layers, Annotations: m.Annotations}, nil
}

// checkPath checks that p is a path of the bundle layout for media type
// mt: policy.json, a NAME.wasm module (in folders allowed), or
// tests/NAME.jsonl cases; components are letters, digits, '.', '_', '-'.
func checkPath(p, mt string) error {
	if p == "" {
		return fmt.Errorf("no %s annotation", ocispec.AnnotationTitle)
	}
	if len(p) > 255 || path.Clean(p) != p || path.IsAbs(p) {
		return fmt.Errorf("title %q is not a clean relative path", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." || c == "" {
			return fmt.Errorf("title %q is not a clean relative path", p)
		}
		for _, r := range c {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				return fmt.Errorf("title %q: %q is not a letter, digit, '.', '_' or '-'", p, r)
			}
		}
	}
	switch mt {
	case MediaTypePolicyFile:
		if p != PolicyFileName {
			return fmt.Errorf("the policy file layer must be titled %s", PolicyFileName)
		}
	case MediaTypeModule:
		if !strings.HasSuffix(p, ".wasm") || strings.HasPrefix(p, CasesDir+"/") {
			return fmt.Errorf("a module layer must be a .wasm path outside %s/", CasesDir)
		}
	case MediaTypeCases:
		if dir, file := path.Split(p); dir != CasesDir+"/" || !strings.HasSuffix(file, ".jsonl") || file == ".jsonl" {
			return fmt.Errorf("a cases layer must be %s/NAME.jsonl", CasesDir)
		}
	default:
		return fmt.Errorf("media type %q is not one of a policy bundle (%s, %s, %s)", mt, MediaTypePolicyFile, MediaTypeModule, MediaTypeCases)
	}
	return nil
}
