package conformance

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// The two MCP protocol revisions the runtime must speak (issue 4).
const (
	serverRev20251125 = "2025-11-25"
	serverRev20260728 = "2026-07-28"
)

// TestServerProtocolRevisions connects the embedded runtime to real servers
// over stdio with each protocol revision and checks the negotiated version
// and a working tool call through the policies:
//
//   - the go-sdk fixture everything-server speaks both: offered 2026-07-28
//     (the runtime's default, the go-sdk's latest: server/discover), it
//     answers 2026-07-28; when server/discover is refused, the client falls
//     back to initialize with 2025-11-25;
//   - server-everything (Node SDK) knows 2025-11-25 at most: whatever the
//     runtime offers, the session runs on 2025-11-25.
//
// runtime.Options has no protocol version field: "refuse discover" answers
// the client's server/discover with method-not-found inside the transport,
// which is how the go-sdk client is led to initialize with 2025-11-25.
func TestServerProtocolRevisions(t *testing.T) {
	dir := os.Getenv("PEERS_DIR")
	if dir == "" {
		t.Skip("PEERS_DIR not set (server-everything and the go-sdk everything-server are needed)")
	}
	goFixture := filepath.Join(dir, "bin/everything-server")
	nodeScript := filepath.Join(dir, "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	for _, f := range []string{goFixture, nodeScript} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("peer missing: %v", err)
		}
	}
	goEntry := transport.ServerEntry{Command: goFixture}
	nodeEntry := transport.ServerEntry{Command: "node", Args: []string{nodeScript, "stdio"}}
	for _, tc := range []struct {
		name           string
		entry          transport.ServerEntry
		refuseDiscover bool
		offers         []string // versions the client offered, in order
		want           string   // negotiated protocolVersion
		tool, args     string
		text           string // in the call's text content
	}{
		{"go fixture, 2026-07-28", goEntry, false, []string{serverRev20260728}, serverRev20260728,
			"everything__test_simple_text", `{}`, "simple text"},
		{"go fixture, 2025-11-25", goEntry, true, []string{serverRev20260728, serverRev20251125}, serverRev20251125,
			"everything__test_simple_text", `{}`, "simple text"},
		{"server-everything, 2026-07-28 offered", nodeEntry, false, []string{serverRev20260728, serverRev20251125}, serverRev20251125,
			"everything__echo", `{"message":"hi revisions"}`, "hi revisions"},
		{"server-everything, 2025-11-25", nodeEntry, true, []string{serverRev20260728, serverRev20251125}, serverRev20251125,
			"everything__echo", `{"message":"hi revisions"}`, "hi revisions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			r, err := transport.Resolve("everything", tc.entry, &transport.Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			tap := &serverVersionTap{inner: r.Transport, refuseDiscover: tc.refuseDiscover}
			eng, err := engine.Load(ctx, &engine.Options{
				DefaultModules: []string{"builtin:rules", "builtin:sanitizer"},
				AuditLog:       filepath.Join(t.TempDir(), "audit.jsonl"),
				Logger:         quiet,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close(context.Background())
			sess, err := runtime.New([]runtime.Server{{Name: "everything", Transport: tap}},
				&runtime.Options{Enforcer: eng, Sanitizer: eng, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close(context.Background())
			if err := sess.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			if d := sess.Diagnostics(); len(d) > 0 {
				t.Fatalf("diagnostics: %v", d)
			}
			offers, negotiated := tap.versions()
			if negotiated != tc.want || !slices.Equal(offers, tc.offers) {
				t.Errorf("offered %q, negotiated %q; want offers %q, negotiated %q", offers, negotiated, tc.offers, tc.want)
			}
			res, err := sess.CallTool(ctx, tc.tool, []byte(tc.args))
			if err != nil {
				t.Fatalf("%s: %v", tc.tool, err)
			}
			var text strings.Builder
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text.WriteString(tc.Text)
				}
			}
			if res.IsError || !strings.Contains(strings.ToLower(text.String()), tc.text) {
				t.Errorf("%s = isError %v, text %q; want a result with %q", tc.tool, res.IsError, text.String(), tc.text)
			}
			t.Logf("offered %s, negotiated %s, %s answered %q", offers, negotiated, tc.tool, text.String())
		})
	}
}

// serverVersionTap wraps a client transport: it records the protocol
// version the client offers (initialize params, or the discover request's
// _meta) and the one the server answers (protocolVersion of a result), and
// can refuse server/discover itself with method-not-found.
type serverVersionTap struct {
	inner          mcp.Transport
	refuseDiscover bool

	mu       sync.Mutex
	offers   []string // every version offered, in order
	offered  string   // the last one
	answered string
}

func (v *serverVersionTap) versions() (offers []string, answered string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.offers), v.answered
}

// Connect connects the wrapped transport.
func (v *serverVersionTap) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := v.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	tc := &serverTapConn{tap: v, inner: c, local: make(chan jsonrpc.Message, 4), in: make(chan serverRead, 1), done: make(chan struct{})}
	// The reader goroutine is owned by the connection: it ends when the
	// wrapped connection's Read fails, which Close causes.
	go tc.pump()
	return tc, nil
}

type serverRead struct {
	msg jsonrpc.Message
	err error
}

type serverTapConn struct {
	tap   *serverVersionTap
	inner mcp.Connection
	local chan jsonrpc.Message // answers made here (refused discover)
	in    chan serverRead      // from inner
	done  chan struct{}        // closed by Close
	once  sync.Once
}

func (c *serverTapConn) pump() {
	for {
		msg, err := c.inner.Read(context.Background())
		select {
		case c.in <- serverRead{msg, err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *serverTapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.local:
		return m, nil
	default:
	}
	select {
	case m := <-c.local:
		return m, nil
	case r := <-c.in:
		if resp, ok := r.msg.(*jsonrpc.Response); ok && resp.Error == nil {
			// initialize answers protocolVersion; server/discover answers
			// supportedVersions, and the client keeps its offer when listed.
			var res struct {
				ProtocolVersion   string   `json:"protocolVersion"`
				SupportedVersions []string `json:"supportedVersions"`
			}
			if json.Unmarshal(resp.Result, &res) == nil {
				c.tap.mu.Lock()
				if res.ProtocolVersion != "" {
					c.tap.answered = res.ProtocolVersion
				} else if slices.Contains(res.SupportedVersions, c.tap.offered) {
					c.tap.answered = c.tap.offered
				}
				c.tap.mu.Unlock()
			}
		}
		return r.msg, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, io.EOF
	}
}

func (c *serverTapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && (req.Method == "initialize" || req.Method == "server/discover") {
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
			Meta            struct {
				ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(req.Params, &p)
		offered := p.ProtocolVersion
		if req.Method == "server/discover" {
			offered = p.Meta.ProtocolVersion
		}
		c.tap.mu.Lock()
		c.tap.offered = offered
		c.tap.offers = append(c.tap.offers, offered)
		c.tap.mu.Unlock()
		if req.Method == "server/discover" && c.tap.refuseDiscover {
			c.local <- &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}}
			return nil
		}
	}
	return c.inner.Write(ctx, msg)
}

func (c *serverTapConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.inner.Close()
}

func (c *serverTapConn) SessionID() string { return c.inner.SessionID() }
