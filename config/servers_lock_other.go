//go:build !unix || aix || solaris || illumos

package config

import (
	"context"
	"os"
)

// lockExcludes reports whether [Lock] keeps other lockers out here.
const lockExcludes = false

// lockFile excludes nothing where flock(2) is not available; see [Lock].
func lockFile(ctx context.Context, _ *os.File) error { return ctx.Err() }
