//go:build !unix

package transport

// openclaw-go runs on Linux and macOS (README, "Requirements"): supervising
// stdio MCP servers needs Unix process groups and signals. This reference to
// an undefined name makes a build for another GOOS (windows) fail with an
// error that says so, before the errors of the Unix-only code.
var _ = openclaw_go_builds_on_Linux_and_macOS_only_see_README_Requirements
