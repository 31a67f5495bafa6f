// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance) against openclaw-go, with no code of
// its own outside the tests: in client mode the suite serves MCP (and OAuth)
// to the program in ./client, built on the embedded runtime and the
// transport package; in server mode it calls `openclaw mcp proxy` fronting
// the go-sdk everything-server, and every check that passes against the
// fixture directly must pass through the proxy. Known failures are listed
// with their reasons and asserted, so a fix forces an update. The tests skip
// when the suite or node is missing (PEERS_DIR); results are recorded in
// docs/conformance.md.
package conformance
