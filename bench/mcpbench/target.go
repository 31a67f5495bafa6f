package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport kinds of a target.
const (
	kindStdio      = "stdio"      // a child process on stdin/stdout, one per session
	kindStreamable = "streamable" // MCP streamable HTTP (2025-03-26 and later)
	kindSSE        = "sse"        // legacy HTTP+SSE (2024-11-05)
)

// target is one MCP server to measure.
type target struct {
	// Label names the target in the output.
	Label string
	// Kind is kindStdio, kindStreamable or kindSSE.
	Kind string
	// URL is the endpoint of an HTTP target.
	URL string
	// Command is the argv of a stdio target.
	Command []string
}

// String is the target as given on the command line, without the label.
func (t target) String() string {
	switch t.Kind {
	case kindStdio:
		return "stdio:" + strings.Join(t.Command, " ")
	case kindSSE:
		return "sse:" + t.URL
	default:
		return t.URL
	}
}

var labelRE = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)

// parseTarget reads a -target value: [LABEL=]SPEC where SPEC is
// "stdio:COMMAND ARGS…" (split on white space), "sse:URL", "streamable:URL" or a
// bare http(s) URL (streamable HTTP). Without a label the SPEC is the label.
func parseTarget(s string) (target, error) {
	var t target
	spec := s
	if label, rest, ok := strings.Cut(s, "="); ok && labelRE.MatchString(label) {
		t.Label, spec = label, rest
	}
	switch {
	case strings.HasPrefix(spec, "stdio:"):
		t.Kind = kindStdio
		t.Command = strings.Fields(strings.TrimPrefix(spec, "stdio:"))
		if len(t.Command) == 0 {
			return target{}, fmt.Errorf("target %q: stdio: without a command", s)
		}
	case strings.HasPrefix(spec, "sse:"):
		t.Kind, t.URL = kindSSE, strings.TrimPrefix(spec, "sse:")
	case strings.HasPrefix(spec, "streamable:"):
		t.Kind, t.URL = kindStreamable, strings.TrimPrefix(spec, "streamable:")
	case strings.HasPrefix(spec, "http://"), strings.HasPrefix(spec, "https://"):
		t.Kind, t.URL = kindStreamable, spec
	default:
		return target{}, fmt.Errorf("target %q: want stdio:CMD, sse:URL, streamable:URL or an http(s) URL", s)
	}
	if t.Kind != kindStdio && !strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
		return target{}, fmt.Errorf("target %q: %q is not an http(s) URL", s, t.URL)
	}
	if t.Label == "" {
		t.Label = spec
	}
	return t, nil
}

// transport returns a fresh client transport for one session of t. HTTP
// sessions get their own http.Client and connection pool, as separate
// clients would, and send header with every request. A stdio child's stderr
// goes to stderr.
func (t target) transport(header http.Header, stderr io.Writer) mcp.Transport {
	switch t.Kind {
	case kindStdio:
		cmd := exec.Command(t.Command[0], t.Command[1:]...)
		cmd.Stderr = stderr
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case kindSSE:
		return &mcp.SSEClientTransport{Endpoint: t.URL, HTTPClient: httpClient(header)}
	default:
		return &mcp.StreamableClientTransport{Endpoint: t.URL, HTTPClient: httpClient(header), MaxRetries: -1}
	}
}

// httpClient is a client with a connection pool of its own that adds header
// to every request.
func httpClient(header http.Header) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{Transport: headerTransport{base: base, header: header}}
}

// headerTransport adds fixed headers (the bearer token) to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

// RoundTrip sends req with the fixed headers added to a copy of it.
func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.header) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range h.header {
			req.Header[k] = vs
		}
	}
	return h.base.RoundTrip(req)
}

// connect opens one session of t.
func connect(ctx context.Context, client *mcp.Client, t target, header http.Header, stderr io.Writer, protocol string) (*mcp.ClientSession, error) {
	cs, err := client.Connect(ctx, t.transport(header, stderr), &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", t.Label, err)
	}
	return cs, nil
}
