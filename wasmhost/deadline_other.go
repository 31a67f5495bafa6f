//go:build !linux

package wasmhost

// systemClock is nil: without a thread CPU clock a [Deadline] is wall time.
var systemClock threadClock
