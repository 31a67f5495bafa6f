// Command misbehave is an MCP server that misbehaves on purpose, for the
// transport tests. Over stdio it can print junk on stdout, write long and
// secret-bearing lines on stderr, hang, exit in the middle of a call and
// start grandchildren (one of them in a new session). With -http it serves
// streamable HTTP and answers 404 for a session after -expire-after calls.
// With -raw it writes broken frames: trailing data, lines over the size cap,
// a cut-off line, junk lines (raw.go). Its files tool tries to read and
// write the paths it is given.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type stdoutCloser struct{ io.Writer }

func (stdoutCloser) Close() error { return nil }

func main() {
	sleeper := flag.Bool("sleeper", false, "be a grandchild: ignore SIGTERM and sleep forever")
	banner := flag.Bool("banner", false, "print junk lines on stdout before serving")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM and stdin EOF")
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	expireAfter := flag.Int("expire-after", 0, "with -http: answer 404 for a session after this many tools/call requests in it")
	raw := flag.Bool("raw", false, "serve stdio with a hand-written loop whose answers break the framing (raw.go)")
	flag.Parse()

	if *raw {
		serveRaw()
		return
	}

	if *sleeper {
		signal.Ignore(syscall.SIGTERM)
		select {}
	}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Fprintln(os.Stderr, "misbehave starting, secret="+os.Getenv("MISBEHAVE_SECRET"))
	fmt.Fprintln(os.Stderr, strings.Repeat("x", 20000))

	out := &lockedWriter{w: os.Stdout}
	server := mcp.NewServer(&mcp.Implementation{Name: "misbehave", Version: "1"}, nil)
	addTools(server, out)

	if *httpAddr != "" {
		serveHTTP(server, *httpAddr, *expireAfter)
		return
	}
	if *banner {
		fmt.Fprintln(out, "Server starting...")
		fmt.Fprintln(out, `{"hello":1}`)
		fmt.Fprintln(out, "")
	}
	err := server.Run(context.Background(), &mcp.IOTransport{Reader: os.Stdin, Writer: stdoutCloser{out}})
	if *ignoreTerm {
		select {} // hang after stdin EOF
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "misbehave:", err)
		os.Exit(1)
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func addTools(server *mcp.Server, out *lockedWriter) {
	obj := map[string]any{"type": "object"}
	server.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"text": map[string]any{"type": "string"}, "size": map[string]any{"type": "integer"}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Text string `json:"text"`
				Size int    `json:"size"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &a)
			if a.Size > 0 {
				return text(strings.Repeat("y", a.Size)), nil
			}
			return text("echo:" + a.Text), nil
		})
	server.AddTool(&mcp.Tool{Name: "noise", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(out, "debug: handling noise")
			fmt.Fprintln(out, `{"jsonrpc":"1.0","id":99}`)
			return text("noisy"), nil
		})
	server.AddTool(&mcp.Tool{Name: "hang", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {}
		})
	server.AddTool(&mcp.Tool{Name: "exit", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	// files reads each path of "read" and appends a line to each of
	// "write", and reports "ok" or the error per path: a hostile server
	// looking for the user's secrets.
	server.AddTool(&mcp.Tool{Name: "files", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct {
				Read  []string `json:"read"`
				Write []string `json:"write"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &a)
			res := map[string]string{}
			report := func(op, p string, err error) {
				if err != nil {
					res[op+" "+p] = err.Error()
				} else {
					res[op+" "+p] = "ok"
				}
			}
			for _, p := range a.Read {
				_, err := os.ReadFile(p)
				report("read", p, err)
			}
			for _, p := range a.Write {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
				if err == nil {
					_, err = f.WriteString("written by a stdio server\n")
					f.Close()
				}
				report("write", p, err)
			}
			b, _ := json.Marshal(res)
			return text(string(b)), nil
		})
	server.AddTool(&mcp.Tool{Name: "env", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b, _ := json.Marshal(os.Environ())
			return text(string(b)), nil
		})
	server.AddTool(&mcp.Tool{Name: "spawn", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			pids := []int{os.Getpid()}
			for _, setsid := range []bool{false, true} {
				c := exec.Command(self, "-sleeper")
				c.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
				if err := c.Start(); err != nil {
					return nil, err
				}
				pids = append(pids, c.Process.Pid)
				go c.Wait()
			}
			b, _ := json.Marshal(pids)
			return text(string(b)), nil
		})
}

func serveHTTP(server *mcp.Server, addr string, expireAfter int) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var mu sync.Mutex
	calls := map[string]int{}
	expired := map[string]bool{}
	var sessions atomic.Int64
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		mu.Lock()
		if id != "" && expired[id] {
			mu.Unlock()
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPost && id != "" && expireAfter > 0 {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			if strings.Contains(string(body), `"tools/call"`) {
				calls[id]++
				if calls[id] > expireAfter {
					expired[id] = true
					mu.Unlock()
					http.Error(w, "session not found", http.StatusNotFound)
					return
				}
			}
		}
		if id == "" && r.Method == http.MethodPost {
			sessions.Add(1)
		}
		mu.Unlock()
		w.Header().Set("X-Sessions-Started", fmt.Sprint(sessions.Load()))
		if r.URL.Path == "/headers" {
			json.NewEncoder(w).Encode(r.Header)
			return
		}
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "misbehave:", err)
		os.Exit(1)
	}
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())
	_ = http.Serve(ln, wrapped)
}
