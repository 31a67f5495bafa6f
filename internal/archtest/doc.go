// Package archtest holds no code; its test enforces the package boundaries
// of DESIGN.md §2 with `go list`: which packages may import what, directly
// or indirectly.
package archtest
