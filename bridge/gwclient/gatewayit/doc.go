// Package gatewayit holds integration tests of package gwclient against the
// project's local Gateway (package gateway). It has no API; it is a package
// of its own so that a Gateway mid-change cannot break gwclient's own tests.
package gatewayit
