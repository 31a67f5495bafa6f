//go:build !linux

package transport

import (
	"fmt"
	"runtime"
)

// ConfinementAvailable reports why this system cannot confine stdio
// servers: confinement uses Landlock, which only Linux has.
func ConfinementAvailable() error {
	return fmt.Errorf("%w: confinement uses Linux Landlock, and this is %s", ErrConfinementUnavailable, runtime.GOOS)
}
