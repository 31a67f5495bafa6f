package engine_test

import (
	"time"

	"github.com/openclaw-go/openclaw/wasmhost"
)

// testHost are the sandbox options of tests: deadlines long enough for a
// loaded machine under -race.
func testHost() wasmhost.Options {
	return wasmhost.Options{CallTimeout: 10 * time.Second, InitTimeout: 10 * time.Second}
}
