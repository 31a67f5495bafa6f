package runtime

import (
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/transport"
)

func TestDiffServers(t *testing.T) {
	t.Parallel()
	yes := true
	stdio := func(name string, args ...string) Server {
		return Server{Name: name, Entry: transport.ServerEntry{Command: "srv", Args: args, Env: map[string]any{"A": "1"}}}
	}
	web := Server{Name: "web", Entry: transport.ServerEntry{URL: "https://h/mcp", Transport: "streamable-http", SSLVerify: &yes}}
	ct, _ := mcp.NewInMemoryTransports()
	ct2, _ := mcp.NewInMemoryTransports()
	with := func(s Server, f func(*Server)) Server { f(&s); return s }

	tests := []struct {
		name      string
		old, next []Server
		want      ServerChanges
		text      string
	}{
		{
			name: "same",
			old:  []Server{stdio("a"), web},
			next: []Server{stdio("a"), with(web, func(s *Server) { v := true; s.Entry.SSLVerify = &v })},
			want: ServerChanges{Unchanged: []string{"a", "web"}},
			text: "0 added, 0 removed, 0 changed, 2 unchanged",
		},
		{
			name: "added, removed, changed",
			old:  []Server{stdio("a"), stdio("gone"), web},
			next: []Server{stdio("a", "--new"), web, stdio("b")},
			want: ServerChanges{Added: []string{"b"}, Removed: []string{"gone"}, Changed: []string{"a"}, Unchanged: []string{"web"}},
			text: "1 added (b), 1 removed (gone), 1 changed (a), 1 unchanged",
		},
		{
			name: "every field that matters",
			old: []Server{stdio("env"), stdio("off"), stdio("par"), stdio("blk"), stdio("tf"),
				{Name: "mem", Transport: ct}, {Name: "mem2", Transport: ct}},
			next: []Server{
				with(stdio("env"), func(s *Server) { s.Entry.Env = map[string]any{"A": "2"} }),
				with(stdio("off"), func(s *Server) { s.Disabled = true }),
				with(stdio("par"), func(s *Server) { s.SupportsParallelToolCalls = true }),
				with(stdio("blk"), func(s *Server) { s.BlockedEnv = []string{"NODE_OPTIONS"} }),
				with(stdio("tf"), func(s *Server) { s.ToolFilter = &config.ToolFilter{Include: []string{"x"}} }),
				{Name: "mem", Transport: ct}, {Name: "mem2", Transport: ct2},
			},
			want: ServerChanges{Changed: []string{"env", "off", "par", "blk", "tf", "mem2"}, Unchanged: []string{"mem"}},
		},
		{
			name: "reordered",
			old:  []Server{stdio("a"), stdio("b")},
			next: []Server{stdio("b"), stdio("a")},
			want: ServerChanges{Unchanged: []string{"b", "a"}, Reordered: true},
			text: "0 added, 0 removed, 0 changed, 2 unchanged, reordered",
		},
		{
			name: "from nothing",
			next: []Server{web},
			want: ServerChanges{Added: []string{"web"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := DiffServers(tc.old, tc.next)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DiffServers = %+v, want %+v", got, tc.want)
			}
			if tc.text != "" && got.String() != tc.text {
				t.Errorf("String() = %q, want %q", got.String(), tc.text)
			}
			wantEmpty := len(tc.want.Added)+len(tc.want.Removed)+len(tc.want.Changed) == 0 && !tc.want.Reordered
			if got.Empty() != wantEmpty {
				t.Errorf("Empty() = %v, want %v", got.Empty(), wantEmpty)
			}
		})
	}
}
