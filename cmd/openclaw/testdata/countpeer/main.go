// Command countpeer is a stdio MCP server for the tests that counts the
// calls it runs: its tools "count" and "danger" take {"id": string, "ms":
// number}, append "start <id> <ancestors>" to the file named by the first
// argument, wait ms milliseconds (or until the call is cancelled), append
// "ran <id> <ancestors>", and answer "counted <id>". <ancestors> are the
// process ids above it, comma-separated, nearest first (the proxy replica
// that started it is one of them). Several servers (one per replica) may
// append to one file: each line is one write of an O_APPEND file.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type countArgs struct {
	ID string `json:"id"`
	MS int    `json:"ms,omitempty"`
}

func main() {
	file := os.Args[1]
	ancestors := ancestry()
	note := func(event, id string) error {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = f.WriteString(event + " " + id + " " + ancestors + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "countpeer", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"ms":{"type":"integer"}},"required":["id"]}`)
	count := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a countArgs
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || a.ID == "" {
			return nil, fmt.Errorf("countpeer: want {\"id\": string}: %v", err)
		}
		if err := note("start", a.ID); err != nil {
			return nil, err
		}
		if a.MS > 0 {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err := note("ran", a.ID); err != nil {
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

// ancestry returns the ids of the processes above this one, nearest first,
// comma-separated, read from /proc (Linux); up to init.
func ancestry() string {
	var ids []string
	for pid := os.Getppid(); pid > 1 && len(ids) < 8; {
		ids = append(ids, strconv.Itoa(pid))
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			break
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 {
			break
		}
		pid, _ = strconv.Atoi(fields[1])
	}
	return strings.Join(ids, ",")
}
