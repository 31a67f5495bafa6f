package runtime

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies/policiestest"
)

// versionServer is an in-process server supporting the revisions given
// (nil: every one go-sdk knows) whose tool "rev" records the revision each
// call's session negotiated.
func versionServer(t *testing.T, name string, supported []string, seen *sync.Map) Server {
	t.Helper()
	srv := newServer(name, &mcp.ServerOptions{SupportedProtocolVersions: supported})
	mcp.AddTool(srv, &mcp.Tool{Name: "rev"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		seen.Store(name, req.Session.InitializeParams().ProtocolVersion)
		return textResult("ok"), nil, nil
	})
	return inProcess(t, name, srv)
}

// TestProtocolNegotiation: with no revision pinned a server that offers
// 2026-07-28 gets it (server/discover), one that does not falls back to
// 2025-11-25; Options.ProtocolVersion pins every server, an entry's
// protocolVersion pins its own server over it; the revision negotiated is
// in Status.
func TestProtocolNegotiation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opt       string // Options.ProtocolVersion
		entry     string // the entry's protocolVersion
		supported []string
		want      string // negotiated
		offered   string // what the server was asked for last
	}{
		{"default, newest offered", "", "", nil, "2026-07-28", "2026-07-28"},
		{"default, older server", "", "", []string{"2025-11-25", "2025-06-18"}, "2025-11-25", "2025-11-25"},
		{"default, oldest server", "", "", []string{"2025-03-26"}, "2025-03-26", "2025-11-25"},
		{"session pin", "2025-06-18", "", nil, "2025-06-18", "2025-06-18"},
		{"entry pin over session pin", "2025-06-18", "2025-11-25", nil, "2025-11-25", "2025-11-25"},
		{"entry pin newest", "2025-11-25", "2026-07-28", nil, "2026-07-28", "2026-07-28"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var seen sync.Map
			sv := versionServer(t, "up", tc.supported, &seen)
			sv.Entry.ProtocolVersion = tc.entry
			s := open(t, []Server{sv}, &Options{ProtocolVersion: tc.opt})
			if st := s.Status()[0]; st.ProtocolVersion != tc.want || st.Err != nil {
				t.Fatalf("Status: protocol %q (err %v), want %q", st.ProtocolVersion, st.Err, tc.want)
			}
			if _, err := s.CallTool(context.Background(), "up__rev", nil); err != nil {
				t.Fatal(err)
			}
			if got, _ := seen.Load("up"); got != tc.offered {
				t.Errorf("the server was offered %v, want %s", got, tc.offered)
			}
		})
	}
}

// TestProtocolVersionRefused: a revision that is not one is refused by New
// (Options) or, in one server's entry, becomes that server's diagnostic
// naming the key while the others connect.
func TestProtocolVersionRefused(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, &Options{Enforcer: &policiestest.Enforcer{}, Sanitizer: &policiestest.Sanitizer{}, ProtocolVersion: "2025-13-01"}); err == nil || !strings.Contains(err.Error(), `"2025-13-01"`) {
		t.Errorf("New with ProtocolVersion 2025-13-01: %v, want an error naming it", err)
	}
	var seen sync.Map
	bad := versionServer(t, "bad", nil, &seen)
	bad.Entry.ProtocolVersion = "latest"
	s := open(t, []Server{bad, versionServer(t, "good", nil, &seen)}, &Options{})
	d := s.Diagnostics()
	if len(d) != 1 || !strings.Contains(d[0].Error(), `mcp.servers.bad.protocolVersion: "latest" is not an MCP revision`) {
		t.Fatalf("diagnostics = %v, want one naming mcp.servers.bad.protocolVersion", d)
	}
	if got := toolNames(t, s); len(got) != 1 || got[0] != "good__rev" {
		t.Errorf("catalog = %v, want [good__rev]", got)
	}
}

// TestProbeProtocolVersion: a probe offers the newest revision, or the one
// the entry pins, and refuses a pin that is not a revision by name.
func TestProbeProtocolVersion(t *testing.T) {
	t.Parallel()
	var seen sync.Map
	latest := versionServer(t, "latest", nil, &seen)
	pinned := versionServer(t, "pinned", nil, &seen)
	pinned.Entry.ProtocolVersion = "2025-06-18"
	odd := versionServer(t, "odd", nil, &seen)
	odd.Entry.ProtocolVersion = "2025-13-01"
	res, err := Probe(context.Background(), []Server{latest, pinned, odd}, &ProbeOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"2026-07-28", "2025-06-18"} {
		if res[i].Err != nil || res[i].Init == nil || res[i].Init.ProtocolVersion != want {
			t.Errorf("%s: init %+v, err %v; want protocol %s", res[i].Server, res[i].Init, res[i].Err, want)
		}
	}
	if e := res[2].Err; e == nil || !strings.Contains(e.Error(), `mcp.servers.odd.protocolVersion: "2025-13-01"`) {
		t.Errorf("odd: %v, want a resolve error naming the key", e)
	}
}
