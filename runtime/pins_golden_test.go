package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/config"
	"github.com/openclaw-go/openclaw/policies"
)

// goldenTools are definitions with their digests as pins files hold them:
// a change of the canonical encoding or of the hash moves a digest and
// fails TestToolDigestGolden, since every pins file written before it
// would then report every tool as changed.
var goldenTools = []struct {
	tool   *mcp.Tool
	digest string
}{
	{&mcp.Tool{Name: "search", Description: "Search the docs.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
		"sha256:896aa19c0d891787f6a9f964ef5dbbde7fc840099a33a465678bc152df6fb7e0"},
	{&mcp.Tool{Name: "read_file", Title: "Read a file", Description: "Read a file of the workspace.",
		InputSchema:  json.RawMessage(` { "required" : ["path"], "type":"object", "properties":{"path":{"type":"string","maxLength":4096.0}} } `),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"size":{"type":"integer","minimum":0}}}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Read"}},
		"sha256:c9986345a6dfeca87ff7f8dc483e72657e09b29eba2dcfc354d3caaa2fa48d74"},
	{&mcp.Tool{Name: "naive_tool", Description: "Quotes \" and \\ and \u2028 and <tags> & é, emoji 🙂.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"\u00e9t\u00e9":{"type":"number","default":1E3},"a":{"enum":[1.50,-0,1e21,"\u0041"]}},"additionalProperties":false}`)},
		"sha256:0f57134c26173a3c86539c49146d54df9f955273d0027e52f2125a2843b54548"},
	{&mcp.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}, OutputSchema: json.RawMessage(`null`)},
		"sha256:50f729fba0aa51f78cf94c1ca23fd07f217375133d9c20b0764d808d56c61db9"},
}

// TestToolDigestGolden holds the tool digests to fixed values, both as
// ToolDigest computes them (`openclaw mcp trust`) and as the pin check of
// a catalog build does for the same tools listed by a server.
func TestToolDigestGolden(t *testing.T) {
	srv := newServer("golden", nil)
	pins := map[string]config.ToolPin{}
	for _, g := range goldenTools {
		digest, canonical, err := ToolDigest(g.tool)
		if err != nil {
			t.Fatalf("%s: %v", g.tool.Name, err)
		}
		if digest != g.digest {
			t.Errorf("ToolDigest(%s) = %s, want %s (canonical %s)", g.tool.Name, digest, g.digest, canonical)
		}
		pins[g.tool.Name] = config.ToolPin{Digest: g.digest, Definition: canonical}
		srv.AddTool(g.tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("ok"), nil })
	}
	s := open(t, []Server{inProcess(t, "golden", srv)}, &Options{})
	s.SetPins(&config.ToolPins{Servers: map[string]map[string]config.ToolPin{"golden": pins}}, config.PinBlock)
	for _, g := range goldenTools {
		tl := catalogTool(t, s, "golden__"+g.tool.Name)
		if tl == nil || tl.Pin == nil || tl.Pin.State != policies.PinTrusted || tl.Pin.Digest != g.digest || tl.Pin.Pinned != g.digest {
			t.Errorf("catalog tool %s: %+v, want trusted with digest %s", g.tool.Name, tl, g.digest)
		}
	}
}
