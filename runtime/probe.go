package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/openclaw-go/openclaw/internal/redact"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/transport"
)

// DefaultProbeConcurrency is how many servers [Probe] connects at once when
// ProbeOptions.Concurrency is 0: OpenClaw's `mcp doctor --probe` limit, so a
// large registry does not start every process at the same moment.
const DefaultProbeConcurrency = 4

// ProbeOptions configure [Probe]. The zero value and nil are valid.
type ProbeOptions struct {
	// Logger receives the transports' logs (stderr of stdio servers,
	// skipped output), tagged server=<name>. nil means slog.Default().
	Logger *slog.Logger
	// Transport configures how Server.Entry is resolved; its Logger
	// defaults to Logger. nil means the transport defaults.
	Transport *transport.Options
	// ClientInfo is sent in the MCP handshake; nil means
	// {Name: "openclaw-go", Version: "dev"}.
	ClientInfo *mcp.Implementation
	// Concurrency caps the servers connected at the same time; 0 means
	// DefaultProbeConcurrency.
	Concurrency int
	// Sanitizer, when set, names the probed tools in one batch over the
	// probed servers (in their order, as a catalog of just those servers
	// would be named) and the toolFilter then matches raw or exposed names,
	// as in a session. nil leaves Exposed empty and matches raw names only.
	Sanitizer policies.Sanitizer
}

// ProbeResult is what [Probe] learned about one server. Exactly one of Err
// and a successful listing holds: when Err is nil, the server answered the
// MCP handshake and every tools/list page.
type ProbeResult struct {
	// Server is the raw mcp.servers name.
	Server string
	// Kind is the resolved transport; empty for a Server.Transport of the
	// embedder's, or when resolution failed.
	Kind transport.Kind
	// Launch is the redacted command line or URL (`mcp status`).
	Launch string
	// Skipped is true for a disabled server: it was not connected, and
	// Err is nil.
	Skipped bool
	// Init is the server's initialize result (serverInfo, the negotiated
	// protocolVersion, capabilities, instructions); nil when the handshake
	// failed or the server was skipped.
	Init *mcp.InitializeResult
	// Tools are the server's tools that its toolFilter lets through, in the
	// server's order. Without ProbeOptions.Sanitizer, patterns are matched
	// against raw tool names only, so a pattern written for an exposed name
	// (`server__tool`) matches nothing.
	Tools []*mcp.Tool
	// Exposed holds the exposed name of each of Tools (same index) when
	// ProbeOptions.Sanitizer named them; nil otherwise.
	Exposed []string
	// Filtered is the count of tools the toolFilter hid.
	Filtered int
	// Elapsed is the wall time from the start of the connection to the end
	// of the listing (or to the failure); disconnecting is not counted.
	Elapsed time.Duration
	// Err is a *ServerError naming the step that failed ("resolve",
	// "connect", "tools/list"), secrets redacted.
	Err error

	all []*mcp.Tool // the whole listing, before the toolFilter
}

// Probe connects each enabled server once, bounded by its connection
// timeout, lists its tools following nextCursor with the catalog's caps and
// per-page timeout (docs/protocol-facts.md, Defaults and limits), and disconnects it (a stdio server and all it
// started are stopped). It runs no policy and names no catalog: it answers
// "does this server work, and what does it offer", for `openclaw mcp probe`,
// `add`, `configure --probe` and `doctor --probe`.
//
// Results are in the order of servers. Servers are probed concurrently, at
// most Concurrency at a time; a server's failure is reported in its result.
// When ctx ends, the servers not yet probed fail with ctx's error. The
// error is the Sanitizer's failure to name the tools (wrapping
// policies.ErrInvalidNames for an invalid answer): the results are then
// complete, without Exposed names, filtered on raw names.
func Probe(ctx context.Context, servers []Server, opts *ProbeOptions) ([]ProbeResult, error) {
	var o ProbeOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ClientInfo == nil {
		o.ClientInfo = &mcp.Implementation{Name: "openclaw-go", Version: "dev"}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultProbeConcurrency
	}
	out := make([]ProbeResult, len(servers))
	slots := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	for i := range servers {
		out[i].Server = servers[i].Name
		if servers[i].Disabled {
			out[i].Skipped = true
			continue
		}
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				out[i].Err = &ServerError{Server: servers[i].Name, Op: "connect", Err: ctx.Err()}
				return
			}
			defer func() { <-slots }()
			out[i] = probeOne(ctx, &servers[i], &o)
		})
	}
	wg.Wait()
	for i := range out {
		out[i].Tools, out[i].Filtered = nil, 0
		for _, t := range out[i].all {
			if allowed(servers[i].ToolFilter, t.Name, t.Name) {
				out[i].Tools = append(out[i].Tools, t)
			} else {
				out[i].Filtered++
			}
		}
	}
	if o.Sanitizer == nil {
		return out, nil
	}
	return out, nameProbed(ctx, o.Sanitizer, servers, out)
}

// nameProbed names the probed tools in one sanitize_tool_names batch and
// filters them again on raw or exposed names.
func nameProbed(ctx context.Context, san policies.Sanitizer, servers []Server, out []ProbeResult) error {
	req := &policies.SanitizeRequest{Servers: make([]policies.SanitizeServer, len(out))}
	for i := range out {
		names := make([]string, len(out[i].all))
		for j, t := range out[i].all {
			names[j] = t.Name
		}
		req.Servers[i] = policies.SanitizeServer{Name: out[i].Server, Tools: names}
	}
	res, err := san.SanitizeToolNames(ctx, req)
	if err == nil {
		err = policies.ValidateSanitized("sanitize_tool_names", req, res)
	}
	if err != nil {
		return fmt.Errorf("runtime: naming the probed tools: %w", err)
	}
	for i := range out {
		out[i].Tools, out[i].Exposed, out[i].Filtered = nil, nil, 0
		for j, t := range out[i].all {
			name := res.Servers[i].Tools[j].Name
			switch {
			case name == "": // rejected by the sanitizer: never exposed
			case allowed(servers[i].ToolFilter, t.Name, name):
				out[i].Tools = append(out[i].Tools, t)
				out[i].Exposed = append(out[i].Exposed, name)
				continue
			}
			out[i].Filtered++
		}
	}
	return nil
}

// probeOne probes one server; see [Probe].
func probeOne(ctx context.Context, sv *Server, o *ProbeOptions) (r ProbeResult) {
	r.Server = sv.Name
	start := time.Now()
	var red *redact.Redactor
	fail := func(op string, err error) ProbeResult {
		r.Elapsed = time.Since(start)
		r.Err = &ServerError{Server: sv.Name, Op: op, Err: redactErr(red, err)}
		return r
	}
	if len(sv.BlockedEnv) > 0 {
		keys := slices.Clone(sv.BlockedEnv)
		slices.Sort(keys)
		return fail("resolve", &transport.BlockedEnvError{Server: sv.Name, Keys: keys})
	}
	if err := CheckProtocolVersion(sv.Entry.ProtocolVersion); err != nil {
		return fail("resolve", fmt.Errorf("mcp.servers.%s.protocolVersion: %w", sv.Name, err))
	}
	tr := sv.Transport
	if tr == nil {
		topts := transport.Options{}
		if o.Transport != nil {
			topts = *o.Transport
		}
		if topts.Logger == nil {
			topts.Logger = o.Logger
		}
		res, err := transport.Resolve(sv.Name, sv.Entry, &topts)
		if err != nil {
			return fail("resolve", err)
		}
		tr, r.Kind, r.Launch, red = res.Transport, res.Kind, res.Launch, res.Redactor
	}
	client := mcp.NewClient(o.ClientInfo, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	timeout := sv.connectTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cs, err := client.Connect(cctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: cmp.Or(sv.Entry.ProtocolVersion, DefaultProtocolVersion)})
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within the connection timeout (%v): %w", timeout, err)
		}
		return fail("connect", err)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			o.Logger.Debug("closing the probed MCP server", "server", sv.Name, "err", err)
		}
	}()
	r.Init = cs.InitializeResult()
	var caps *mcp.ServerCapabilities
	if r.Init != nil {
		caps = r.Init.Capabilities
	}
	tools, dropped, err := listTools(ctx, cs, caps, sv.listTimeout())
	for _, why := range dropped {
		o.Logger.Warn("MCP server lists a tool definition no client can use: it is left out", "server", sv.Name, "tool", why)
	}
	if err != nil {
		return fail("tools/list", err)
	}
	r.all = tools
	r.Elapsed = time.Since(start) // closing is not the server's answer time
	return r
}
