package e2e

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// Failcase is how a server behaved when its Gateway could not be used
// (refused connection, wrong token), the scenario of
// testdata/openclaw/failcases/ and docs/protocol-facts.md, Failure and shutdown.
type Failcase struct {
	// InitializeAnswered and ListAnswered say whether initialize and the
	// conversations_list sent right after it got a response.
	InitializeAnswered, ListAnswered bool
	// Exited is false when the server still ran at the timeout (it was
	// then killed).
	Exited bool
	// Code is the exit code (-1 for a signal); ExitAfter is spawn → exit.
	Code      int
	ExitAfter time.Duration
	// ListResponse is the raw response line to conversations_list, if any.
	ListResponse string
	// Stderr is everything the server wrote to stderr.
	Stderr string
}

// RunFailcase spawns the server of opts, sends
// initialize, notifications/initialized and a conversations_list without
// waiting, and waits up to timeout for the server to exit on its own.
func RunFailcase(ctx context.Context, opts ServeOptions, timeout time.Duration) (*Failcase, error) {
	s, outR, err := spawn(opts)
	if err != nil {
		return nil, err
	}
	defer s.Kill()
	copied := make(chan struct{})
	go func() { // owner: RunFailcase; ends at the child's stdout EOF (Kill at the latest)
		io.Copy(io.Discard, s.Raw.reader(outR))
		close(copied)
	}()
	pv := opts.ProtocolVersion
	if pv == "" || pv == "latest" {
		pv = DefaultProtocolVersion
	}
	for _, m := range []map[string]any{
		{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": pv, "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "ocinterop-failcase", "version": "0.1.0"}}},
		{"jsonrpc": "2.0", "method": "notifications/initialized"},
		{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "conversations_list", "arguments": map[string]any{}}},
	} {
		b, _ := json.Marshal(m)
		// A server that already exited makes this fail; that is a result.
		s.Raw.writer(s.stdin).Write(append(b, '\n'))
	}
	fc := &Failcase{}
	select {
	case <-s.done:
		fc.Exited = true
		fc.ExitAfter = time.Since(s.Spawned)
		fc.Code = s.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.Kill()
	<-copied
	for _, l := range s.Raw.Lines() {
		if l.Out {
			continue
		}
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal([]byte(l.Text), &m)
		switch string(m.ID) {
		case "1":
			fc.InitializeAnswered = true
		case "2":
			fc.ListAnswered = true
			fc.ListResponse = l.Text
		}
	}
	fc.Stderr = s.Stderr()
	return fc, nil
}
