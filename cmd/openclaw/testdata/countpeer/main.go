// Command countpeer is a stdio MCP server for the tests that counts the
// calls it runs: its tools "count" and "danger" take {"id": string, "ms":
// number}, wait ms milliseconds (or until the call is cancelled), append
// the id as one line to the file named by the first argument, and answer
// "counted <id>". Several servers (one per proxy replica) may append to
// one file: each line is one write of an O_APPEND file.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type countArgs struct {
	ID string `json:"id"`
	MS int    `json:"ms,omitempty"`
}

func main() {
	file := os.Args[1]
	s := mcp.NewServer(&mcp.Implementation{Name: "countpeer", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"ms":{"type":"integer"}},"required":["id"]}`)
	count := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a countArgs
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || a.ID == "" {
			return nil, fmt.Errorf("countpeer: want {\"id\": string}: %v", err)
		}
		if a.MS > 0 {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(a.ID + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted " + a.ID}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "count", InputSchema: schema}, count)
	s.AddTool(&mcp.Tool{Name: "danger", InputSchema: schema}, count)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
