//go:build !linux

package exepages

// UseBasePages does nothing outside Linux, whose page cache is what maps
// an executable through 2 MiB folios.
func UseBasePages() (Result, error) { return Result{}, nil }
