// Command cancelpeer is a stdio MCP server for the tests, with one tool,
// "hang", that runs until its call is cancelled. It writes into the folder
// named by its first argument: "started" when a call of hang begins, and
// one line per notifications/cancelled it reads (the request id), to
// "cancelled", as it reads it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recording is the server's stdio transport, noting the cancellations it
// reads.
type recording struct {
	mcp.Transport
	dir string
}

func (r recording) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return recordingConn{c, r.dir}, nil
}

type recordingConn struct {
	mcp.Connection
	dir string
}

func (c recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok && req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		_ = json.Unmarshal(req.Params, &p)
		f, ferr := os.OpenFile(filepath.Join(c.dir, "cancelled"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if ferr == nil {
			fmt.Fprintln(f, p.RequestID)
			_ = f.Close()
		}
	}
	return m, err
}

func main() {
	dir := os.Args[1]
	s := mcp.NewServer(&mcp.Implementation{Name: "cancelpeer", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "hang", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = os.WriteFile(filepath.Join(dir, "started"), nil, 0o600)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_ = s.Run(context.Background(), recording{&mcp.StdioTransport{}, dir})
}
