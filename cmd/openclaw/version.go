package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	openclaw "github.com/openclaw-go/openclaw"
)

// Stamped at build time, beside main.version, by the Makefile and the
// release builder with -ldflags "-X main.commit=… -X main.date=…"; empty in a
// plain `go build` or `go install`. date is the commit time in Unix seconds
// (SOURCE_DATE_EPOCH), never the time of the build, so that two builds of
// one commit are byte-identical.
var (
	commit string
	date   string
)

// buildVersion is the version to report, first of: stamped (the ldflags
// value of main.version); the module version `go install …@vX.Y.Z` records
// in the build info (not a checkout's "(devel)", nor the v0.0.0
// pseudo-version of an untagged commit); the VERSION file embedded in the
// module root. No leading "v".
func buildVersion(stamped string) string {
	if stamped != "" {
		return strings.TrimPrefix(stamped, "v")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := moduleVersion(bi.Main.Version); v != "" {
			return v
		}
	}
	return openclaw.Version()
}

// moduleVersion is a module version from the build info without its "v",
// or "" when it names no release: "(devel)", empty, or a pseudo-version
// based on no tag ("v0.0.0-20261201221155-c5d85edabcde").
func moduleVersion(v string) string {
	if v == "" || v == "(devel)" || strings.HasPrefix(v, "v0.0.0-") {
		return ""
	}
	return strings.TrimPrefix(v, "v")
}

// buildFacts are the facts `openclaw version` prints: commit and date only
// when the build recorded them (ldflags, or the go command's VCS stamp).
type buildFacts struct {
	Version, Commit, Date, Go, Platform string
	Modified                            bool
}

// currentBuild gathers the facts of the running binary.
func currentBuild() buildFacts {
	f := buildFacts{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if date != "" {
		if sec, err := strconv.ParseInt(date, 10, 64); err == nil {
			f.Date = time.Unix(sec, 0).UTC().Format(time.RFC3339)
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok && commit == "" {
		// The go command's own record of the tree it built, used only when
		// the build stamped no commit: a stamped commit's tree is not the
		// one the go command saw.
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				f.Commit = s.Value
			case "vcs.time":
				if f.Date == "" {
					f.Date = s.Value
				}
			case "vcs.modified":
				f.Modified = s.Value == "true"
			}
		}
	}
	return f
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date, Go version and platform of this binary",
		Long: `Version prints the release version of this binary and, when the build recorded them, the
commit it was built from and that commit's time (release builds stamp the commit time, not the
time of the build, so that they are reproducible), then the Go version and platform.
` + "`openclaw --version`" + ` prints the first line only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := currentBuild()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "openclaw-go %s\n", f.Version)
			if f.Commit != "" {
				mod := ""
				if f.Modified {
					mod = " (modified)"
				}
				fmt.Fprintf(w, "commit:   %s%s\n", f.Commit, mod)
			}
			if f.Date != "" {
				fmt.Fprintf(w, "date:     %s\n", f.Date)
			}
			fmt.Fprintf(w, "go:       %s\n", f.Go)
			fmt.Fprintf(w, "platform: %s\n", f.Platform)
			return nil
		},
	}
}
