package main

import (
	"debug/buildinfo"
	"encoding/json"
	"net/url"
	"time"
)

// CycloneDX 1.5 JSON (https://cyclonedx.org/docs/1.5/json/), the subset an
// SBOM of one Go binary needs: the binary, the Go standard library it was
// built with, and every module linked into it.
type cdxBOM struct {
	BOMFormat    string          `json:"bomFormat"`
	SpecVersion  string          `json:"specVersion"`
	Version      int             `json:"version"`
	Metadata     cdxMetadata     `json:"metadata"`
	Components   []cdxComponent  `json:"components"`
	Dependencies []cdxDependency `json:"dependencies"`
}

type cdxMetadata struct {
	Timestamp string       `json:"timestamp"`
	Component cdxComponent `json:"component"`
}

type cdxComponent struct {
	Type       string        `json:"type"`
	BOMRef     string        `json:"bom-ref"`
	Name       string        `json:"name"`
	Version    string        `json:"version"`
	PURL       string        `json:"purl"`
	Licenses   []cdxLicense  `json:"licenses,omitempty"`
	Hashes     []cdxHash     `json:"hashes,omitempty"`
	Properties []cdxProperty `json:"properties,omitempty"`
}

type cdxLicense struct {
	License struct {
		ID string `json:"id"`
	} `json:"license"`
}

type cdxHash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type cdxProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type cdxDependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// golangPURL is the package URL of a Go module version
// (pkg:golang/github.com/spf13/cobra@v1.10.2), with the platform as
// qualifiers when goos is set.
func golangPURL(module, version, goos, goarch string) string {
	p := "pkg:golang/" + module + "@" + url.PathEscape(version)
	if goos != "" {
		p += "?goarch=" + goarch + "&goos=" + goos
	}
	return p
}

// sbom returns the CycloneDX SBOM of the Go binary at bin, built from the
// main module at version for goos/goarch at commit time t; binSHA256 is
// the binary's SHA-256 in hex. The modules and the Go version come from
// the build info the go command embeds in the binary (what `go version -m`
// prints); a module's go.sum hash is kept as a property, not as a file hash.
func sbom(bin, version, goos, goarch, binSHA256 string, t time.Time) ([]byte, error) {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	mainRef := golangPURL(bi.Main.Path, "v"+version, goos, goarch)
	var mit cdxLicense
	mit.License.ID = "MIT"
	bom := cdxBOM{
		BOMFormat:   "CycloneDX",
		SpecVersion: "1.5",
		Version:     1,
		Metadata: cdxMetadata{
			Timestamp: t.UTC().Format(time.RFC3339),
			Component: cdxComponent{
				Type: "application", BOMRef: mainRef, Name: bi.Main.Path, Version: "v" + version, PURL: mainRef,
				Licenses: []cdxLicense{mit},
				Hashes:   []cdxHash{{Alg: "SHA-256", Content: binSHA256}},
			},
		},
	}
	std := golangPURL("stdlib", bi.GoVersion, "", "")
	bom.Components = append(bom.Components, cdxComponent{Type: "library", BOMRef: std, Name: "stdlib", Version: bi.GoVersion, PURL: std})
	deps := []string{std}
	for _, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		ref := golangPURL(m.Path, m.Version, "", "")
		c := cdxComponent{Type: "library", BOMRef: ref, Name: m.Path, Version: m.Version, PURL: ref}
		if m.Sum != "" {
			c.Properties = []cdxProperty{{Name: "go:module:sum", Value: m.Sum}}
		}
		bom.Components = append(bom.Components, c)
		deps = append(deps, ref)
	}
	bom.Dependencies = []cdxDependency{{Ref: mainRef, DependsOn: deps}}
	out, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
