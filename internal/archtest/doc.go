// Package archtest holds no code; its test enforces the package boundaries
// with `go list`: which packages may import what, directly
// or indirectly.
package archtest
