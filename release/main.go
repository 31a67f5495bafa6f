// Command release builds the release files of openclaw-go into one folder,
// without network access and reproducibly: the same source, version,
// commit and commit time give byte-identical files on any machine with
// the same Go toolchain.
//
//	go run ./release [-out dist] [-version 0.1.0] [-commit HASH] [-date EPOCH]
//
// For each of linux and darwin on amd64 and arm64 it writes
// openclaw-go_VERSION_OS_ARCH.tar.gz (the binary, LICENSE, README.md, the
// man pages and the bash, zsh and fish completions) and
// openclaw-go_VERSION_OS_ARCH.cdx.json (a CycloneDX SBOM of the binary);
// then openclaw-go_VERSION_oci.tar, an OCI image layout (an oci-archive,
// its image named openclaw-go:VERSION)
// of the linux binaries FROM scratch; then SHA256SUMS over all of them.
//
// The version defaults to the VERSION file, the commit to `git rev-parse
// HEAD` (none outside a git checkout), the date to SOURCE_DATE_EPOCH or
// else the commit time. Binaries are built with CGO_ENABLED=0, -trimpath,
// -buildvcs=false and fixed GOAMD64/GOARM64 levels; every archive member
// is dated with the commit time and owned by 0:0. Run from the module root.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// platforms are the release targets, GOOS/GOARCH.
var platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

type options struct {
	out, version, commit string
	date                 time.Time
}

func main() {
	var o options
	var epoch string
	flag.StringVar(&o.out, "out", "dist", "folder to write the release files into (replaced)")
	flag.StringVar(&o.version, "version", "", "release version without \"v\" (default: the VERSION file)")
	flag.StringVar(&o.commit, "commit", "", "commit hash to stamp (default: git rev-parse HEAD, if any)")
	flag.StringVar(&epoch, "date", "", "commit time in Unix seconds (default: SOURCE_DATE_EPOCH, else git's commit time)")
	flag.Parse()
	if err := resolve(&o, epoch); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(2)
	}
	if err := build(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// resolve fills the defaults of o from the VERSION file, git and
// SOURCE_DATE_EPOCH.
func resolve(o *options, epoch string) error {
	if o.version == "" {
		b, err := os.ReadFile("VERSION")
		if err != nil {
			return fmt.Errorf("no -version and no VERSION file (run from the module root): %w", err)
		}
		o.version = strings.TrimSpace(string(b))
	}
	o.version = strings.TrimPrefix(o.version, "v")
	if o.version == "" || strings.ContainsAny(o.version, "/ \t\n") {
		return fmt.Errorf("version %q is not a version", o.version)
	}
	if o.commit == "" {
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			o.commit = strings.TrimSpace(string(out))
		}
	}
	if epoch == "" {
		epoch = os.Getenv("SOURCE_DATE_EPOCH")
	}
	if epoch == "" {
		out, err := exec.Command("git", "log", "-1", "--format=%ct").Output()
		if err != nil {
			return fmt.Errorf("no -date, no SOURCE_DATE_EPOCH and no git commit time: %w", err)
		}
		epoch = strings.TrimSpace(string(out))
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("date %q is not a number of Unix seconds", epoch)
	}
	o.date = time.Unix(sec, 0).UTC()
	return nil
}

// build writes every release file into o.out.
func build(o options) error {
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	work := filepath.Join(o.out, ".work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	bins := map[string]string{}
	for _, p := range platforms {
		bin, err := goBuild(o, p, filepath.Join(work, strings.ReplaceAll(p, "/", "_")))
		if err != nil {
			return err
		}
		bins[p] = bin
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	hostBin, ok := bins[host]
	if !ok {
		var err error
		if hostBin, err = goBuild(o, host, filepath.Join(work, "host")); err != nil {
			return err
		}
	}
	docs, err := generatedDocs(o, hostBin, filepath.Join(work, "docs"))
	if err != nil {
		return err
	}
	common, err := readFiles("LICENSE", "README.md")
	if err != nil {
		return err
	}
	var image []imageBinary
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		base := fmt.Sprintf("openclaw-go_%s_%s_%s", o.version, goos, goarch)
		data, err := os.ReadFile(bins[p])
		if err != nil {
			return err
		}
		entries := []entry{{Name: base + "/openclaw", Mode: 0o755, Data: data}}
		for _, f := range append(slices.Clone(common), docs...) {
			f.Name = base + "/" + f.Name
			entries = append(entries, f)
		}
		var buf bytes.Buffer
		if err := writeTarGz(&buf, withParents(entries), o.date); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(o.out, base+".tar.gz"), buf.Bytes()); err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		bom, err := sbom(bins[p], o.version, goos, goarch, hex.EncodeToString(sum[:]), o.date)
		if err != nil {
			return fmt.Errorf("SBOM of %s: %w", p, err)
		}
		if err := writeFile(filepath.Join(o.out, base+".cdx.json"), bom); err != nil {
			return err
		}
		if goos == "linux" {
			image = append(image, imageBinary{GOARCH: goarch, Data: data})
		}
	}
	layout := filepath.Join(work, "oci")
	if err := writeImage(layout, o.version, o.commit, "openclaw-go:"+o.version, o.date, image); err != nil {
		return fmt.Errorf("OCI image: %w", err)
	}
	layoutEntries, err := treeEntries(layout)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, layoutEntries, o.date); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.out, fmt.Sprintf("openclaw-go_%s_oci.tar", o.version)), buf.Bytes()); err != nil {
		return err
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	return writeChecksums(o.out)
}

// goBuild builds cmd/openclaw for platform ("linux/amd64") into dir and
// returns the binary's path. The environment fixes what would otherwise
// vary the bytes between machines: cgo off, the baseline instruction sets.
func goBuild(o options, platform, dir string) (string, error) {
	goos, goarch, _ := strings.Cut(platform, "/")
	bin := filepath.Join(dir, "openclaw")
	ld := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.date=%d", o.version, o.commit, o.date.Unix())
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ld, "-o", bin, "./cmd/openclaw")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOAMD64=v1", "GOARM64=v8.0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "release: building %s\n", platform)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build for %s: %w", platform, err)
	}
	return bin, nil
}

// generatedDocs runs the host binary for the man pages (man/man1/*.1) and
// the shell completions (completions/openclaw.bash, _openclaw, openclaw.fish).
func generatedDocs(o options, hostBin, dir string) ([]entry, error) {
	man := filepath.Join(dir, "man", "man1")
	gen := exec.Command(hostBin, "gen-man", man)
	gen.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", o.date.Unix()))
	if out, err := gen.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gen-man: %v: %s", err, out)
	}
	pages, err := filepath.Glob(filepath.Join(man, "*.1"))
	if err != nil {
		return nil, err
	}
	var entries []entry
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{Name: "man/man1/" + filepath.Base(p), Mode: 0o644, Data: b})
	}
	for shell, name := range map[string]string{"bash": "openclaw.bash", "zsh": "_openclaw", "fish": "openclaw.fish"} {
		out, err := exec.Command(hostBin, "completion", shell).Output()
		if err != nil {
			return nil, fmt.Errorf("completion %s: %w", shell, err)
		}
		entries = append(entries, entry{Name: "completions/" + name, Mode: 0o644, Data: out})
	}
	return entries, nil
}

// readFiles reads files of the module root as archive entries (mode 0644).
func readFiles(names ...string) ([]entry, error) {
	var entries []entry
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{Name: n, Mode: 0o644, Data: b})
	}
	return entries, nil
}

// treeEntries returns the files and folders below dir as archive entries
// named relative to dir, files 0644 and folders 0755.
func treeEntries(dir string) ([]entry, error) {
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			entries = append(entries, entry{Name: rel, Dir: true, Mode: 0o755})
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		entries = append(entries, entry{Name: rel, Mode: 0o644, Data: b})
		return nil
	})
	return entries, err
}

// writeChecksums writes dir/SHA256SUMS in the format of sha256sum (so
// `sha256sum -c SHA256SUMS` verifies it): one "HEX  NAME" line per file of
// dir, sorted by name.
func writeChecksums(dir string) error {
	files, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, f := range files {
		if f.IsDir() || f.Name() == "SHA256SUMS" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), f.Name())
	}
	return writeFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()))
}
