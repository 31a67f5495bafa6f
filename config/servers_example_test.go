package config_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/openclaw-go/openclaw/config"
)

// Add a server to openclaw.json as `openclaw mcp set` does: the rest of the
// file is kept, the entry is normalized and validated, the file is written
// with backups.
func ExampleDocument_SetServer() {
	dir, _ := os.MkdirTemp("", "openclaw-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "openclaw.json")
	os.WriteFile(path, []byte(`{gateway: {port: 18789}, // JSON5
}`), 0o600)

	doc, err := config.LoadDocument(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	entry, _ := config.ParseOrdered([]byte(`{"url":"https://mcp.example.com/mcp","type":"http"}`))
	if err := doc.SetServer("docs", entry.(*config.Object)); err != nil {
		fmt.Println(err)
		return
	}
	if err := doc.Save(); err != nil {
		fmt.Println(err)
		return
	}
	data, _ := os.ReadFile(path)
	fmt.Print(string(data))

	bad, _ := config.ParseOrdered([]byte(`{"transport":"stdio"}`))
	fmt.Println(doc.SetServer("bad", bad.(*config.Object)))
	// Output:
	// {
	//   "gateway": {
	//     "port": 18789
	//   },
	//   "mcp": {
	//     "servers": {
	//       "docs": {
	//         "url": "https://mcp.example.com/mcp",
	//         "transport": "streamable-http"
	//       }
	//     }
	//   }
	// }
	// mcp.servers.bad.transport: "stdio" transport requires a non-empty command
}

// How `openclaw mcp status` shows a server: transport and launch string,
// secrets redacted.
func ExampleResolveServer() {
	entry, _ := config.ParseOrdered([]byte(`{"command":"npx","args":["-y","server","--api-key","sk-live"],"env":{"NODE_OPTIONS":"--inspect"}}`))
	r, _ := config.ResolveServer("tools", entry.(*config.Object))
	fmt.Println(r.Transport, "|", r.Description, "| blocked env:", r.BlockedEnv)
	remote, _ := config.ParseOrdered([]byte(`{"url":"https://user:pw@mcp.example.com/mcp?token=abc&x=1"}`))
	r, _ = config.ResolveServer("remote", remote.(*config.Object))
	fmt.Println(r.Transport, "|", r.Description)
	// Output:
	// stdio | npx -y server --api-key *** | blocked env: [NODE_OPTIONS]
	// sse | https://***:***@mcp.example.com/mcp?token=***&x=1
}
