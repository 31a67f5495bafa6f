package engine_test

import "github.com/openclaw-go/openclaw/wasmhost"

func hostNoCache() wasmhost.Options { return wasmhost.Options{NoCache: true} }
