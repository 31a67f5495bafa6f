package transport

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// This file is the part of a stdio connection's shutdown that concerns the
// requests the server sent us (sampling/createMessage, elicitation/create,
// roots/list, ping): the MCP spec's stdio shutdown is "close the child's
// stdin, wait for it to exit, then SIGTERM, then SIGKILL", and a server
// that still waits on an answer from us may never exit on stdin EOF (the
// TypeScript SDK keeps a 60 s timer per request it sent), so Close would
// always wait the full TerminateDuration. Close therefore answers every
// such request still open with a JSON-RPC error just before it closes
// stdin, and when the server sends a request after that point (it can no
// longer be answered) it sends SIGTERM at once instead of waiting.

// closingAnswerCode and closingAnswerMessage make the JSON-RPC error with
// which Close answers the server's requests still open: -32603 (Internal
// error, JSON-RPC 2.0 §5.1), the standard code every MCP SDK maps to a
// failed request.
const (
	closingAnswerCode    = jsonrpc.CodeInternalError
	closingAnswerMessage = "client closed the connection before answering"
)

// closingWriteBudget bounds what Close spends on answering: waiting for a
// Write in progress to finish and writing the answers. A pipe that does
// not take a few hundred bytes within it belongs to a server that stopped
// reading, which will not read the answers either.
const closingWriteBudget = time.Second

// inbound tracks the requests the server sent us that are not answered
// yet. readStdout records them, Write forgets them when their response is
// written, and Close answers the rest and seals the set: a request read
// after the seal can never be answered and strands the server.
type inbound struct {
	mu       sync.Mutex
	open     map[jsonrpc.ID]struct{}
	sealed   bool
	method   string        // the first request read after the seal
	stranded chan struct{} // closed when a request is read after the seal
}

func newInbound() *inbound {
	return &inbound{open: map[jsonrpc.ID]struct{}{}, stranded: make(chan struct{})}
}

// received notes a message read from the server: a request with an ID
// waits for our answer; notifications/cancelled withdraws one (the server
// no longer waits for it, and the spec asks us not to answer it).
func (in *inbound) received(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case req.IsCall() && in.sealed:
		if in.method == "" {
			in.method = req.Method
			close(in.stranded)
		}
	case req.IsCall():
		in.open[req.ID] = struct{}{}
	default:
		if id, ok := CancelledID(req); ok {
			delete(in.open, id)
		}
	}
}

// CancelledID returns the request a notifications/cancelled withdraws; ok
// is false for any other message, or when its requestId is not an id.
func CancelledID(req *jsonrpc.Request) (jsonrpc.ID, bool) {
	if req.Method != "notifications/cancelled" {
		return jsonrpc.ID{}, false
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil && id.IsValid()
}

// answered forgets a request whose response was written.
func (in *inbound) answered(msg jsonrpc.Message) {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		in.mu.Lock()
		delete(in.open, resp.ID)
		in.mu.Unlock()
	}
}

// seal returns the requests still open and makes every later one stranded.
func (in *inbound) seal() []jsonrpc.ID {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sealed = true
	ids := make([]jsonrpc.ID, 0, len(in.open))
	for id := range in.open {
		ids = append(ids, id)
	}
	clear(in.open)
	return ids
}

// strandedBy reports the method of the first request read after the seal.
func (in *inbound) strandedBy() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.method
}

// closeStdin answers the requests the server still waits on with a
// JSON-RPC error, then closes its stdin. It takes writeMu so that no
// response of the session is written after the error for the same
// request, and nothing after stdin is closed. A Write stuck on a server
// that stopped reading holds writeMu: after closingWriteBudget stdin is
// closed without answers, which unblocks that Write.
func (c *stdioConn) closeStdin() {
	locked := make(chan struct{})
	go func() { // ends as soon as writeMu is free; closing stdin frees it
		c.writeMu.Lock()
		close(locked)
	}()
	budget := time.NewTimer(closingWriteBudget)
	defer budget.Stop()
	select {
	case <-locked:
		c.answerOpen(c.in.seal())
		c.stdin.Close()
	case <-budget.C:
		if ids := c.in.seal(); len(ids) > 0 {
			c.log.Warn("transport: server stopped reading its stdin; its requests are closed unanswered", "requests", len(ids))
		}
		c.stdin.Close()
		<-locked
	}
	c.writeMu.Unlock()
}

// answerOpen writes the closing error for each of ids, bounded by
// closingWriteBudget. Called with writeMu held.
func (c *stdioConn) answerOpen(ids []jsonrpc.ID) {
	if len(ids) == 0 {
		return
	}
	var buf []byte
	for _, id := range ids {
		data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: closingAnswerCode, Message: closingAnswerMessage}})
		if err != nil {
			continue // an ID we decoded always encodes; nothing better to do
		}
		buf = append(append(buf, data...), '\n')
	}
	_ = c.stdin.SetWriteDeadline(time.Now().Add(closingWriteBudget))
	n, err := c.stdin.Write(buf)
	if err != nil {
		c.log.Warn("transport: answering the server's open requests before closing its stdin",
			"requests", len(ids), "bytes_sent", n, "error", err.Error())
		return
	}
	c.log.Debug("transport: answered the server's open requests with an error before closing its stdin", "requests", len(ids))
}
