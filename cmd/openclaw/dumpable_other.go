//go:build !linux

package main

// hideFromSameUser does nothing outside Linux (see dumpable_linux.go).
func hideFromSameUser() {}
