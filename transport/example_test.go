package transport_test

import (
	"errors"
	"fmt"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/transport"
)

func ExampleResolve() {
	entries := []struct {
		name  string
		entry config.ServerEntry
	}{
		{"files", config.ServerEntry{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"}, URL: "https://ignored.example/mcp"}},
		{"remote", config.ServerEntry{URL: "https://user:pw@mcp.example.com/mcp?token=abc&x=1", Type: "http"}},
		{"legacy", config.ServerEntry{URL: "https://mcp.example.com/sse"}},
		{"evil", config.ServerEntry{Command: "node", Env: map[string]any{"NODE_OPTIONS": "--require /tmp/x.js"}}},
		{"ws", config.ServerEntry{URL: "wss://mcp.example.com/"}},
	}
	for _, e := range entries {
		r, err := transport.Resolve(e.name, e.entry, nil)
		var blocked *transport.BlockedEnvError
		switch {
		case errors.As(err, &blocked):
			fmt.Printf("%s: not started, blocked env %q\n", e.name, blocked.Keys)
		case errors.Is(err, transport.ErrUnusable):
			fmt.Printf("%s: skipped\n", e.name)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Printf("%s: %s %s\n", r.Name, r.Kind, r.Launch)
		}
	}
	// Output:
	// files: stdio npx -y @modelcontextprotocol/server-filesystem /srv
	// remote: streamable-http https://***:***@mcp.example.com/mcp?token=***&x=1
	// legacy: sse https://mcp.example.com/sse
	// evil: not started, blocked env ["NODE_OPTIONS"]
	// ws: skipped
}
