package conformance

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/internal/testkit"
	"github.com/openclaw-go/openclaw/policies/engine"
	"github.com/openclaw-go/openclaw/runtime"
	"github.com/openclaw-go/openclaw/transport"
)

// The two MCP protocol revisions the runtime must speak.
const (
	serverRev20251125 = "2025-11-25"
	serverRev20260728 = "2026-07-28"
)

// TestServerProtocolRevisions connects the embedded runtime to real servers
// over stdio with each protocol revision (runtime.Options.ProtocolVersion)
// and checks what the client offered, the negotiated version, and a tool
// call through the policies:
//
//   - the go-sdk fixture everything-server speaks both revisions: offered
//     2026-07-28 (via server/discover; also the runtime's default) it runs
//     on 2026-07-28; offered 2025-11-25 (initialize) it runs on 2025-11-25;
//   - server-everything (Node SDK) knows 2025-11-25 at most: offered
//     2026-07-28, by default too, its server/discover fails and the client
//     falls back to initialize with 2025-11-25.
func TestServerProtocolRevisions(t *testing.T) {
	goFixture := testkit.Peer(t, testkit.GoEverythingServer)
	nodeScript := testkit.Peer(t, testkit.ServerEverything)
	testkit.Node(t)
	goEntry := config.ServerEntry{Command: goFixture}
	nodeEntry := config.ServerEntry{Command: "node", Args: []string{nodeScript, "stdio"}}
	const goTool, goArgs, goText = "everything__test_simple_text", `{}`, "simple text"
	const nodeTool, nodeArgs, nodeText = "everything__echo", `{"message":"hi revisions"}`, "hi revisions"
	for _, tc := range []struct {
		name       string
		entry      config.ServerEntry
		version    string   // runtime.Options.ProtocolVersion
		offers     []string // versions the client offered, in order
		want       string   // negotiated protocolVersion
		tool, args string
		text       string // in the call's text content
	}{
		{"go fixture, default", goEntry, "", []string{serverRev20260728}, serverRev20260728, goTool, goArgs, goText},
		{"go fixture, 2026-07-28", goEntry, serverRev20260728, []string{serverRev20260728}, serverRev20260728, goTool, goArgs, goText},
		{"go fixture, 2025-11-25", goEntry, serverRev20251125, []string{serverRev20251125}, serverRev20251125, goTool, goArgs, goText},
		{"server-everything, 2026-07-28", nodeEntry, serverRev20260728, []string{serverRev20260728, serverRev20251125}, serverRev20251125, nodeTool, nodeArgs, nodeText},
		{"server-everything, default", nodeEntry, "", []string{serverRev20260728, serverRev20251125}, serverRev20251125, nodeTool, nodeArgs, nodeText},
		{"server-everything, 2025-11-25", nodeEntry, serverRev20251125, []string{serverRev20251125}, serverRev20251125, nodeTool, nodeArgs, nodeText},
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
			tap := &serverVersionTap{inner: r.Transport}
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
				&runtime.Options{Enforcer: eng, Sanitizer: eng, Logger: quiet, ProtocolVersion: tc.version})
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

// serverVersionTap wraps a client transport and records the protocol
// versions the client offers (initialize's protocolVersion, or the
// server/discover request's _meta) and the one the server's answer settles.
type serverVersionTap struct {
	inner mcp.Transport

	mu       sync.Mutex
	offers   []string // every version offered, in order
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
	return &serverTapConn{Connection: c, tap: v}, nil
}

type serverTapConn struct {
	mcp.Connection
	tap *serverVersionTap
}

func (c *serverTapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
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
			} else if n := len(c.tap.offers); n > 0 && slices.Contains(res.SupportedVersions, c.tap.offers[n-1]) {
				c.tap.answered = c.tap.offers[n-1]
			}
			c.tap.mu.Unlock()
		}
	}
	return msg, err
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
		c.tap.offers = append(c.tap.offers, offered)
		c.tap.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}
