package transport

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Confinement asks that a stdio server run confined (Landlock, on Linux):
// the files and folders in Protect are out of its reach, while the rest of
// the system stays readable and its working folder, HOME, the temporary
// folders and the folders its args name stay writable. See
// docs/threat-model.md for the rules and their limits.
type Confinement struct {
	// Protect lists files and folders the server may not read, write,
	// execute, list, create beneath, rename or remove. A relative path is
	// taken from our working folder; a path that does not exist yet is
	// protected should it appear, provided its parent folder exists.
	Protect []string
}

// ErrConfinementUnavailable is wrapped by the errors of
// [ConfinementAvailable] and of a confined Connect when this system cannot
// confine a server: not Linux, a kernel without Landlock, or Landlock
// disabled. A server is never started unconfined in its place.
var ErrConfinementUnavailable = errors.New("stdio confinement unavailable")

// protectList returns Protect as clean absolute paths.
func (c *Confinement) protectList() ([]string, error) {
	out := make([]string, 0, len(c.Protect))
	for _, p := range c.Protect {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("confinement: protected path %q: %w", p, err)
		}
		out = append(out, abs)
	}
	return out, nil
}
