package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
)

// serveRaw is the -raw mode: a hand-written MCP server loop whose tools/call
// answers break the stdio framing on purpose, by tool name:
//
//	echo          answers "echo:<text>"
//	trailing      writes its answer with a trailing "}," and then the right answer "ok"
//	huge          answers with a text of <size> bytes
//	huge_late_id  answers with a text of <size> bytes and its id after the result, once a hold call waits
//	hold          never answers
//	partial       writes the start of its answer without a newline, then nothing
//	junk          writes <lines> lines that are not JSON, then answers "ok"
func serveRaw() {
	var mu sync.Mutex
	write := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.WriteString(s)
	}
	answer := func(id json.RawMessage, text string) string {
		t, _ := json.Marshal(text)
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%s}]}}`, id, t)
	}
	holding := make(chan struct{})
	var holdOnce sync.Once
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string `json:"name"`
				Arguments struct {
					Text  string `json:"text"`
					Size  int    `json:"size"`
					Lines int    `json:"lines"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil || req.Method == "" {
			continue
		}
		id, a := req.ID, req.Params.Arguments
		switch req.Method {
		case "initialize":
			write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"misbehave-raw","version":"1"}}}`+"\n", id))
			continue
		case "tools/list":
			var tools []string
			for _, n := range []string{"echo", "trailing", "huge", "huge_late_id", "hold", "partial", "junk"} {
				tools = append(tools, fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object"}}`, n))
			}
			write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s]}}`+"\n", id, strings.Join(tools, ",")))
			continue
		case "tools/call":
		default:
			write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", id))
			continue
		}
		switch req.Params.Name {
		case "echo":
			write(answer(id, "echo:"+a.Text) + "\n")
		case "trailing":
			write(answer(id, "trailing") + "},\n" + answer(id, "ok") + "\n")
		case "huge":
			write(answer(id, strings.Repeat("y", a.Size)) + "\n")
		case "huge_late_id":
			go func() {
				<-holding
				write(fmt.Sprintf(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"%s"}]},"id":%s}`+"\n", strings.Repeat("y", a.Size), id))
			}()
		case "hold":
			holdOnce.Do(func() { close(holding) })
		case "partial":
			full := answer(id, "partial")
			write(full[:len(full)/2])
		case "junk":
			var b strings.Builder
			for i := range a.Lines {
				fmt.Fprintf(&b, "junk line %d: not JSON\n", i)
			}
			write(b.String() + answer(id, "ok") + "\n")
		}
	}
}
