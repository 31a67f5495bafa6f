package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// RawClient is a minimal newline-delimited JSON-RPC client on a [Serve]'s
// stdio, the Go twin of peers/openclaw-real/serve-client.mjs. It adds as
// little as possible to a round trip (no schema handling, no session
// bookkeeping), so per-call figures measured with it are the server's and
// the pipes', not the client library's. Calls are sequential: it is not safe
// for concurrent use.
type RawClient struct {
	s      *Serve
	lines  chan []byte   // server lines, closed at stdout EOF
	stop   chan struct{} // closed by Close: the reader stops delivering
	once   sync.Once
	nextID int64
}

// Close stops the client's reader goroutine, which otherwise ends at the
// server's stdout EOF. Call it once the server is ended or no longer read.
func (c *RawClient) Close() {
	c.once.Do(func() { close(c.stop) })
}

// StartRaw spawns the server of opts and answers the MCP handshake with
// protocol [DefaultProtocolVersion] (or opts.ProtocolVersion) through a
// [RawClient]. The Serve has no go-sdk Session; end it with
// [Serve.CloseStdin] or [Serve.Kill].
func StartRaw(ctx context.Context, opts ServeOptions) (*Serve, *RawClient, error) {
	s, outR, err := spawn(opts)
	if err != nil {
		return nil, nil, err
	}
	c := &RawClient{s: s, lines: make(chan []byte, 16), stop: make(chan struct{})}
	go c.read(outR) // owner: c; ends at the child's stdout EOF or at Close
	pv := opts.ProtocolVersion
	if pv == "" || pv == "latest" {
		pv = DefaultProtocolVersion
	}
	if _, err := c.Call(ctx, "initialize", map[string]any{
		"protocolVersion": pv, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "ocinterop-raw", "version": "0.1.0"},
	}); err != nil {
		s.Kill()
		c.Close()
		return nil, nil, fmt.Errorf("e2e: raw handshake with %q: %w", opts.Command[0], err)
	}
	s.Initialized = time.Since(s.Spawned)
	if err := c.Notify("notifications/initialized", nil); err != nil {
		s.Kill()
		c.Close()
		return nil, nil, err
	}
	return s, c, nil
}

func (c *RawClient) read(f *os.File) {
	defer close(c.lines)
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			select {
			case c.lines <- line:
			case <-c.stop:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Notify writes one notification.
func (c *RawClient) Notify(method string, params any) error {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	return c.write(msg)
}

func (c *RawClient) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := c.s.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("e2e: writing to the server: %w", err)
	}
	return nil
}

// Call sends one request and returns its response line, skipping
// notifications and other messages. A JSON-RPC error response is returned
// as a line too; only transport failures and ctx's end are errors.
func (c *RawClient) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.nextID++
	id := c.nextID
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if err := c.write(msg); err != nil {
		return nil, err
	}
	want := strconv.FormatInt(id, 10)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return nil, fmt.Errorf("e2e: server closed stdout before answering %s", method)
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &m) == nil && m.Method == "" && string(m.ID) == want {
				return line, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("e2e: waiting for the %s response: %w", method, ctx.Err())
		}
	}
}

// CallTool calls a tool and fails unless the response is a result without
// isError.
func (c *RawClient) CallTool(ctx context.Context, name string, args map[string]any) error {
	line, err := c.Call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return err
	}
	var r struct {
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return fmt.Errorf("e2e: %s: %w", name, err)
	}
	switch {
	case r.Error != nil:
		return fmt.Errorf("e2e: %s: JSON-RPC error %q", name, r.Error.Message)
	case r.Result == nil || r.Result.IsError:
		return fmt.Errorf("e2e: %s: error result %.300s", name, line)
	}
	return nil
}
