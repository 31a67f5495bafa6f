package runtime

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
	"github.com/openclaw-go/openclaw/policies/policiestest"
	"github.com/openclaw-go/openclaw/transport"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := newServer("alpha-impl", nil)
	for _, n := range []string{"echo", "add", "secret_dump"} {
		echoTool(srv, n)
	}
	alpha := inProcess(t, "alpha", srv)
	alpha.ToolFilter = &config.ToolFilter{Exclude: []string{"secret_*"}}

	// A stdio server that is not an MCP server: it exits at once.
	sh, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no `true` on PATH")
	}
	dead := Server{Name: "dead", Entry: config.ServerEntry{Command: sh, Args: []string{"--token", "s3cr3t-value"}}}
	blocked := Server{Name: "blocked", Entry: config.ServerEntry{Command: sh}, BlockedEnv: []string{"NODE_OPTIONS"}}
	off := Server{Name: "off", Disabled: true, Entry: config.ServerEntry{Command: sh}}

	res, err := Probe(context.Background(), []Server{alpha, dead, blocked, off}, &ProbeOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res); got != 4 {
		t.Fatalf("got %d results, want 4", got)
	}
	tests := []struct {
		name, server, op string
		tools            []string
		filtered         int
		skipped          bool
	}{
		{name: "filtered in-process server", server: "alpha", tools: []string{"echo", "add"}, filtered: 1},
		{name: "child that exits", server: "dead", op: "connect"},
		{name: "blocked env key", server: "blocked", op: "resolve"},
		{name: "disabled", server: "off", skipped: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := res[i]
			if r.Server != tc.server {
				t.Fatalf("result %d is %q, want %q (declaration order)", i, r.Server, tc.server)
			}
			if r.Skipped != tc.skipped {
				t.Errorf("Skipped = %v, want %v", r.Skipped, tc.skipped)
			}
			var se *ServerError
			switch {
			case tc.op == "" && r.Err != nil:
				t.Fatalf("Err = %v, want success", r.Err)
			case tc.op != "" && !errors.As(r.Err, &se):
				t.Fatalf("Err = %v, want a *ServerError", r.Err)
			case tc.op != "" && se.Op != tc.op:
				t.Errorf("Op = %q, want %q (%v)", se.Op, tc.op, r.Err)
			}
			if r.Err != nil && strings.Contains(r.Err.Error(), "s3cr3t-value") {
				t.Errorf("error leaks a secret argument: %v", r.Err)
			}
			if strings.Contains(r.Launch, "s3cr3t-value") {
				t.Errorf("launch leaks a secret argument: %s", r.Launch)
			}
			var names []string
			for _, tl := range r.Tools {
				names = append(names, tl.Name)
			}
			slices.Sort(names)
			want := slices.Clone(tc.tools)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("tools = %v, want %v", names, want)
			}
			if r.Filtered != tc.filtered {
				t.Errorf("Filtered = %d, want %d", r.Filtered, tc.filtered)
			}
			if tc.op == "" && !tc.skipped {
				if r.Init == nil || r.Init.ServerInfo == nil || r.Init.ServerInfo.Name != "alpha-impl" {
					t.Errorf("Init = %+v, want serverInfo alpha-impl", r.Init)
				}
				if r.Init != nil && r.Init.ProtocolVersion == "" {
					t.Error("no negotiated protocol version")
				}
				if r.Elapsed <= 0 {
					t.Errorf("Elapsed = %v, want > 0", r.Elapsed)
				}
			}
		})
	}
}

func TestProbeCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv := newServer("x", nil)
	echoTool(srv, "echo")
	res, _ := Probe(ctx, []Server{inProcess(t, "x", srv)}, &ProbeOptions{Logger: quietLogger()})
	if res[0].Err == nil || !errors.Is(res[0].Err, context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", res[0].Err)
	}
}

func TestProbeServerEverything(t *testing.T) {
	t.Parallel()
	script := everythingScript(t)
	sv := Server{Name: "everything", Entry: config.ServerEntry{Command: "node", Args: []string{script, "stdio"}}}
	all, err := Probe(context.Background(), []Server{sv}, &ProbeOptions{
		Logger:     quietLogger(),
		ClientInfo: &mcp.Implementation{Name: "probe-test", Version: "1"},
	})
	res := all[0]
	if err != nil || res.Err != nil {
		t.Fatalf("probe: %v, %v", err, res.Err)
	}
	if res.Kind != transport.KindStdio {
		t.Errorf("Kind = %q, want stdio", res.Kind)
	}
	if res.Init == nil || !strings.Contains(res.Init.ServerInfo.Name, "everything") {
		t.Errorf("serverInfo = %+v, want server-everything's", res.Init)
	}
	if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "echo" }) {
		t.Errorf("tools %d, no echo", len(res.Tools))
	}
	if res.Init.Capabilities == nil || res.Init.Capabilities.Resources == nil {
		t.Error("server-everything's resources capability is missing")
	}
}

func TestProbeNamed(t *testing.T) {
	t.Parallel()
	newAlpha := func() Server {
		srv := newServer("alpha-impl", nil)
		for _, n := range []string{"echo", "add", "bad name!"} {
			echoTool(srv, n)
		}
		sv := inProcess(t, "alpha", srv)
		// "alpha__add" is an exposed name: only a named probe can match it.
		sv.ToolFilter = &config.ToolFilter{Exclude: []string{"alpha__add"}}
		return sv
	}
	tests := []struct {
		name      string
		san       policies.Sanitizer
		tools     []string
		exposed   []string
		filtered  int
		wantError bool
	}{
		{name: "named", san: &policiestest.Sanitizer{}, tools: []string{"echo", "bad name!"}, exposed: []string{"alpha__echo", "alpha__bad-name-"}, filtered: 1},
		{name: "naming fails", san: &policiestest.Sanitizer{Err: &policies.SanitizeError{Module: "broken", Err: io.ErrUnexpectedEOF}}, tools: []string{"echo", "add", "bad name!"}, wantError: true},
		{name: "no sanitizer", tools: []string{"echo", "add", "bad name!"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := Probe(context.Background(), []Server{newAlpha()}, &ProbeOptions{Logger: quietLogger(), Sanitizer: tc.san})
			if (err != nil) != tc.wantError {
				t.Fatalf("err = %v, want error %v", err, tc.wantError)
			}
			r := res[0]
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			// Pair each raw name with its exposed name; the server decides
			// the listing order.
			var got, want []string
			for i, tl := range r.Tools {
				e := ""
				if r.Exposed != nil {
					e = r.Exposed[i]
				}
				got = append(got, tl.Name+"="+e)
			}
			for i, n := range tc.tools {
				e := ""
				if tc.exposed != nil {
					e = tc.exposed[i]
				}
				want = append(want, n+"="+e)
			}
			slices.Sort(got)
			slices.Sort(want)
			if r.Exposed != nil && len(r.Exposed) != len(r.Tools) {
				t.Fatalf("%d exposed names for %d tools", len(r.Exposed), len(r.Tools))
			}
			if !slices.Equal(got, want) || r.Filtered != tc.filtered {
				t.Errorf("tools %v filtered %d; want %v %d", got, r.Filtered, want, tc.filtered)
			}
		})
	}
}
