package engine_test

import (
	"time"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// hostNoCache are the sandbox options of tests: no on-disk cache, and
// deadlines long enough for a loaded machine under -race.
func hostNoCache() wasmhost.Options {
	return wasmhost.Options{CallTimeout: 10 * time.Second, InitTimeout: 10 * time.Second}
}
