package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var epoch = time.Unix(1764547200, 0)

// readTarGz returns the headers and contents of a .tar.gz.
func readTarGz(t *testing.T, b []byte) ([]*tar.Header, map[string][]byte, *gzip.Reader) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	hs, files := readTar(t, zr)
	return hs, files, zr
}

func readTar(t *testing.T, r io.Reader) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	tr := tar.NewReader(r)
	var hs []*tar.Header
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs, files
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		files[h.Name], _ = io.ReadAll(tr)
	}
}

// Entries given in any order make the same bytes: sorted members, one
// date, owner 0:0 without names, and a gzip header without name or time.
func TestTarGzReproducible(t *testing.T) {
	a := []entry{
		{Name: "d/openclaw", Mode: 0o755, Data: []byte("bin")},
		{Name: "d/LICENSE", Mode: 0o644, Data: []byte("MIT")},
		{Name: "d/man/man1/openclaw.1", Mode: 0o644, Data: []byte(".TH")},
	}
	b := []entry{a[2], a[0], a[1]}
	var ba, bb bytes.Buffer
	if err := writeTarGz(&ba, withParents(a), epoch); err != nil {
		t.Fatal(err)
	}
	if err := writeTarGz(&bb, withParents(b), epoch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ba.Bytes(), bb.Bytes()) {
		t.Fatal("the same entries in another order give other bytes")
	}
	hs, files, zr := readTarGz(t, ba.Bytes())
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q, time %v", zr.Name, zr.ModTime)
	}
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v, owner %d:%d %q:%q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
	want := "d/ d/LICENSE d/man/ d/man/man1/ d/man/man1/openclaw.1 d/openclaw"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("members %s\nwant    %s", got, want)
	}
	if string(files["d/openclaw"]) != "bin" {
		t.Errorf("d/openclaw holds %q", files["d/openclaw"])
	}
}

// ociBlob reads and verifies one blob of a layout: its size and digest
// match its descriptor, and its media type is the one expected.
func ociBlob(t *testing.T, dir string, d ociDescriptor, mediaType string) []byte {
	t.Helper()
	if d.MediaType != mediaType {
		t.Errorf("descriptor %s has media type %q, want %q", d.Digest, d.MediaType, mediaType)
	}
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: sha256 %x, size %d (descriptor %d)", d.Digest, sum, len(b), d.Size)
	}
	return b
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// The image layout is a valid OCI layout: every descriptor's digest, size
// and media type match its blob; one image per linux platform, FROM
// scratch with one layer holding the binary and the empty home folder,
// run as 65532; and skopeo, when installed, reads it.
func TestOCIImage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oci")
	bins := []imageBinary{{GOARCH: "amd64", Data: []byte("amd64 binary")}, {GOARCH: "arm64", Data: []byte("arm64 binary")}}
	if err := writeImage(dir, "1.2.3", "abc123", "openclaw-go:1.2.3", epoch, bins); err != nil {
		t.Fatal(err)
	}
	layoutFile, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	if err != nil {
		t.Fatal(err)
	}
	var layout struct{ ImageLayoutVersion string }
	decodeJSON(t, layoutFile, &layout)
	if layout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout: %s", layoutFile)
	}
	indexFile, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top ociIndex
	decodeJSON(t, indexFile, &top)
	if top.SchemaVersion != 2 || top.MediaType != mediaIndex || len(top.Manifests) != 1 {
		t.Fatalf("index.json: %s", indexFile)
	}
	if ref := top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != "openclaw-go:1.2.3" {
		t.Errorf("index.json names the image %q", ref)
	}
	var idx ociIndex
	decodeJSON(t, ociBlob(t, dir, top.Manifests[0], mediaIndex), &idx)
	if len(idx.Manifests) != len(bins) {
		t.Fatalf("%d images, want %d", len(idx.Manifests), len(bins))
	}
	for i, md := range idx.Manifests {
		var man ociManifest
		decodeJSON(t, ociBlob(t, dir, md, mediaManifest), &man)
		if man.SchemaVersion != 2 || len(man.Layers) != 1 {
			t.Fatalf("manifest %d: schema %d, %d layers", i, man.SchemaVersion, len(man.Layers))
		}
		var cfg ociImageConfig
		decodeJSON(t, ociBlob(t, dir, man.Config, mediaConfig), &cfg)
		if md.Platform == nil || md.Platform.OS != "linux" || md.Platform.Architecture != bins[i].GOARCH ||
			cfg.OS != "linux" || cfg.Architecture != bins[i].GOARCH {
			t.Errorf("image %d: platform %+v, config %s/%s", i, md.Platform, cfg.OS, cfg.Architecture)
		}
		if cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Entrypoint, " ") != "/openclaw" {
			t.Errorf("image %d runs %v as %q", i, cfg.Config.Entrypoint, cfg.Config.User)
		}
		if cfg.Created != "2025-12-01T00:00:00Z" || cfg.Config.Labels["org.opencontainers.image.revision"] != "abc123" {
			t.Errorf("image %d: created %s, labels %v", i, cfg.Created, cfg.Config.Labels)
		}
		layer := ociBlob(t, dir, man.Layers[0], mediaLayerGz)
		zr, err := gzip.NewReader(bytes.NewReader(layer))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != sha256Digest(plain) {
			t.Errorf("image %d: diff_ids %v, uncompressed layer %s", i, cfg.RootFS.DiffIDs, sha256Digest(plain))
		}
		hs, files := readTar(t, bytes.NewReader(plain))
		var members []string
		for _, h := range hs {
			members = append(members, fmt.Sprintf("%s:%d:%d", h.Name, h.Uid, h.Gid))
		}
		if got, want := strings.Join(members, " "), "home/:0:0 home/nonroot/:65532:65532 openclaw:0:0"; got != want {
			t.Errorf("image %d layer: %s, want %s", i, got, want)
		}
		if !bytes.Equal(files["openclaw"], bins[i].Data) {
			t.Errorf("image %d holds another binary", i)
		}
	}

	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		t.Log("skopeo not installed: layout checked by this test only")
		return
	}
	for _, arch := range []string{"amd64", "arm64"} {
		out, err := exec.Command(skopeo, "--override-os", "linux", "--override-arch", arch, "inspect", "--config", "oci:"+dir+":openclaw-go:1.2.3").CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo inspect %s: %v\n%s", arch, err, out)
		}
		var cfg ociImageConfig
		decodeJSON(t, out, &cfg)
		if cfg.Architecture != arch || cfg.Config.User != "65532:65532" {
			t.Errorf("skopeo reads %s: arch %s, user %q", arch, cfg.Architecture, cfg.Config.User)
		}
	}
}

// The SBOM of a Go binary is CycloneDX 1.5 naming the binary (with its
// hash and license), the Go standard library and every module linked in.
func TestSBOM(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := sbom(self, "1.2.3", "linux", "amd64", "00ff", epoch)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdxBOM
	decodeJSON(t, b, &bom)
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.5" || bom.Version != 1 {
		t.Errorf("bom header: %s %s %d", bom.BOMFormat, bom.SpecVersion, bom.Version)
	}
	m := bom.Metadata.Component
	if m.Type != "application" || m.PURL != "pkg:golang/github.com/openclaw-go/openclaw@v1.2.3?goarch=amd64&goos=linux" ||
		len(m.Licenses) != 1 || m.Licenses[0].License.ID != "MIT" || len(m.Hashes) != 1 || m.Hashes[0].Content != "00ff" {
		t.Errorf("bom component: %+v", m)
	}
	if bom.Metadata.Timestamp != "2025-12-01T00:00:00Z" {
		t.Errorf("bom timestamp %s", bom.Metadata.Timestamp)
	}
	refs := map[string]bool{}
	for _, c := range bom.Components {
		refs[c.BOMRef] = true
		if !strings.HasPrefix(c.PURL, "pkg:golang/"+c.Name+"@") || c.BOMRef != c.PURL {
			t.Errorf("component %s: purl %s, ref %s", c.Name, c.PURL, c.BOMRef)
		}
	}
	if len(bom.Components) == 0 || bom.Components[0].Name != "stdlib" || !strings.HasPrefix(bom.Components[0].Version, "go1.") {
		t.Errorf("first component %+v, want the Go standard library", bom.Components[0])
	}
	if len(bom.Dependencies) != 1 || bom.Dependencies[0].Ref != m.BOMRef || len(bom.Dependencies[0].DependsOn) != len(bom.Components) {
		t.Fatalf("dependencies %+v", bom.Dependencies)
	}
	for _, d := range bom.Dependencies[0].DependsOn {
		if !refs[d] {
			t.Errorf("dependsOn %s names no component", d)
		}
	}
}

// The nested Go modules carry the root LICENSE unchanged: a module's zip
// holds only its own folder.
func TestLicenseCopies(t *testing.T) {
	root, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range []string{"../guests/sdk/go", "../guests/examples/go"} {
		b, err := os.ReadFile(filepath.Join(mod, "LICENSE"))
		if err != nil || !bytes.Equal(b, root) {
			t.Errorf("%s/LICENSE differs from the root LICENSE (%v)", mod, err)
		}
	}
}
