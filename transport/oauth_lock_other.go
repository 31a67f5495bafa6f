//go:build !unix || aix || solaris || illumos

package transport

import "context"

// lockPath does not lock here (no flock): processes sharing a token store
// may refresh the same token at once; this process still refreshes once.
func lockPath(context.Context, string) (unlock func(), err error) { return func() {}, nil }
