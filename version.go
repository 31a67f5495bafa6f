// Package openclaw holds the release version of openclaw-go: the VERSION
// file beside this one, embedded so that every build knows it, whether or
// not git tags travelled with the source. The binary is cmd/openclaw; the
// other packages are listed in the README's package map.
package openclaw

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the release version named in the VERSION file, without a
// leading "v" (for example "0.1.0"; a development line reads "0.2.0-dev").
func Version() string { return strings.TrimSpace(versionFile) }
