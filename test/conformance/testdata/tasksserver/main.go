// Command tasksserver is the MCP 2026-07-28 server that the conformance
// suite's tasks-* scenarios (0.2.0-alpha.12, the io.modelcontextprotocol/tasks
// extension, SEP-2663) need and go-sdk v1.8.0's everything-server lacks: the
// tools greet, slow_compute, failing_job, protocol_error_job, confirm_delete,
// multi_input and test_tool_with_task, task creation on tools/call for a
// client that declares the extension, and tasks/get, tasks/update and
// tasks/cancel. It is a test fixture: tasks live in memory, for this
// process.
//
// It speaks stdio by default, and streamable HTTP (stateless) on -http ADDR.
// go-sdk serves the protocol; the tasks surface, which go-sdk does not
// know, is a receiving middleware (CreateTaskResult in place of a
// tools/call result) and three custom methods.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// extension is the tasks extension's key in capabilities.extensions.
const extension = "io.modelcontextprotocol/tasks"

// ttl is every task's ttlMs; pollInterval its pollIntervalMs.
const (
	ttl          = 10 * time.Minute
	pollInterval = 200 * time.Millisecond
)

// taskTools are the tools that run as tasks for a client declaring the
// extension; required ones are refused (-32021) to a client that does not.
var taskTools = map[string]struct{ required bool }{
	"slow_compute":        {},
	"failing_job":         {required: true},
	"protocol_error_job":  {},
	"confirm_delete":      {},
	"multi_input":         {},
	"test_tool_with_task": {required: true},
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP (stateless) on this address instead of stdio")
	flag.Parse()
	s := newServer()
	if *addr == "" {
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	log.Fatal(http.ListenAndServe(*addr, taskNameHeader(h)))
}

// taskNameHeader refuses a tasks/get, tasks/update or tasks/cancel POST
// whose Mcp-Name header is not its params.taskId (SEP-2663's routing
// header; go-sdk checks Mcp-Name only for the methods it knows).
func taskNameHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, has := r.Header["Mcp-Name"]
		if r.Method != http.MethodPost || !has {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage
			Method string
			Params struct{ TaskID string }
		}
		_ = json.Unmarshal(body, &msg)
		switch msg.Method {
		case "tasks/get", "tasks/update", "tasks/cancel":
			if strings.TrimSpace(name[0]) != msg.Params.TaskID {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
					"error": map[string]any{"code": -32020, "message": "Mcp-Name does not match params.taskId"}})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tasksserver", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:      &mcp.ToolCapabilities{},
			Extensions: map[string]any{extension: map[string]any{}},
		},
	})
	obj := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
	}
	add := func(name string, schema json.RawMessage, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, h)
	}
	// The tools run synchronously for a client that did not declare the
	// extension (the middleware runs them as tasks otherwise).
	add("greet", obj(`"name":{"type":"string"}`), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Name string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return text("Hello, " + a.Name + "!"), nil
	})
	add("slow_compute", obj(`"seconds":{"type":"number"},"label":{"type":"string"}`), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := slowCompute(ctx, req.Params.Arguments)
		return res, err
	})
	add("test_tool_with_task", obj(""), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{RequestState: "round-1", InputRequests: mcp.InputRequestMap{
			"user_name": &mcp.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
		}}, nil
	})
	for _, name := range []string{"failing_job", "protocol_error_job", "multi_input"} {
		add(name, obj(""), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("%s runs as a task only", name)
		})
	}
	add("confirm_delete", obj(`"filename":{"type":"string"}`), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("confirm_delete runs as a task only")
	})
	st := &store{tasks: map[string]*task{}}
	s.AddReceivingMiddleware(st.middleware)
	must(mcp.AddReceivingCustomMethod(s, "tasks/get", func(_ context.Context, _ *mcp.ServerSession, p *taskParams) (*taskResult, error) {
		t, err := st.get(p.TaskID)
		if err != nil {
			return nil, err
		}
		return t.detailed(), nil
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/update", func(_ context.Context, _ *mcp.ServerSession, p *taskParams) (*ack, error) {
		t, err := st.get(p.TaskID)
		if err != nil {
			return nil, err
		}
		t.answer(p.InputResponses)
		return &ack{ResultType: "complete"}, nil
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/cancel", func(_ context.Context, _ *mcp.ServerSession, p *taskParams) (*ack, error) {
		t, err := st.get(p.TaskID)
		if err != nil {
			return nil, err
		}
		t.finish("cancelled", nil, nil)
		return &ack{ResultType: "complete"}, nil
	}))
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func slowCompute(ctx context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
	var a struct {
		Seconds float64
		Label   string
	}
	_ = json.Unmarshal(args, &a)
	select {
	case <-time.After(time.Duration(a.Seconds * float64(time.Second))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return text(fmt.Sprintf("computed %s after %gs", a.Label, a.Seconds)), nil
}

// declares reports whether the client of req declared the extension (on
// 2026-07-28 in the request's _meta, else at initialize).
func declares(req mcp.Request) bool {
	cr, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	})
	if !ok {
		return false
	}
	caps := cr.ClientCapabilities()
	return caps != nil && caps.Extensions[extension] != nil
}

// missingExtension is the -32021 error of a request that needs the extension.
func missingExtension() error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extension: map[string]any{}}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "this request needs the " + extension + " extension", Data: data}
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// ack is the result of tasks/update and tasks/cancel.
type ack struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskError is a failed task's JSON-RPC error.
type taskError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

// taskResult is a CreateTaskResult (ResultType "task") or a DetailedTask
// (tasks/get, "complete").
type taskResult struct {
	mcp.ResultBase
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	Result         *mcp.CallToolResult        `json:"result,omitempty"`
	Error          *taskError                 `json:"error,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

type store struct {
	mu    sync.Mutex
	next  atomic.Int64
	tasks map[string]*task
}

func (st *store) get(id string) (*task, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := st.tasks[id]; t != nil {
		return t, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %q", id)}
}

// middleware gates the tasks methods on the extension and runs the task
// tools as tasks for a client that declares it.
func (st *store) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tasks/get", "tasks/update", "tasks/cancel":
			if !declares(req) {
				return nil, missingExtension()
			}
		case "tools/call":
			cr, ok := req.(*mcp.CallToolRequest)
			if !ok || cr.Params == nil {
				break
			}
			tool, isTask := taskTools[cr.Params.Name]
			switch {
			case !isTask:
			case !declares(req) && tool.required:
				return nil, missingExtension()
			case !declares(req):
			case cr.Params.Name == "test_tool_with_task" && cr.Params.InputResponses["user_name"] == nil:
				// Round 1 gathers the name (SEP-2322, the tool handler);
				// round 2 runs the task.
			default:
				return st.start(cr.Params), nil
			}
		}
		return next(ctx, method, req)
	}
}

// task is one task and its run.
type task struct {
	id      string
	created time.Time
	cancel  context.CancelFunc

	mu      sync.Mutex
	status  string // working, input_required, completed, failed, cancelled
	updated time.Time
	result  *mcp.CallToolResult
	err     *taskError
	asks    map[string]json.RawMessage // pending input requests, by key
	answers map[string]json.RawMessage // answers not yet taken
	wake    chan struct{}              // closed and replaced on every answer
}

// start creates the task of the call p (durably: tasks/get finds it once
// this returns) and runs it.
func (st *store) start(p *mcp.CallToolParamsRaw) *taskResult {
	now := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{id: "task-" + strconv.FormatInt(st.next.Add(1), 10), created: now, updated: now, cancel: cancel,
		status: "working", asks: map[string]json.RawMessage{}, answers: map[string]json.RawMessage{}, wake: make(chan struct{})}
	st.mu.Lock()
	st.tasks[t.id] = t
	st.mu.Unlock()
	go t.run(ctx, p)
	res := t.detailed()
	res.ResultType = "task"
	return res
}

func (t *task) run(ctx context.Context, p *mcp.CallToolParamsRaw) {
	switch p.Name {
	case "slow_compute":
		res, err := slowCompute(ctx, p.Arguments)
		if err == nil {
			t.finish("completed", res, nil)
		}
	case "failing_job":
		select {
		case <-time.After(time.Second):
			t.finish("completed", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failing_job failed"}}}, nil)
		case <-ctx.Done():
		}
	case "protocol_error_job":
		t.finish("failed", nil, &taskError{Code: jsonrpc.CodeInternalError, Message: "protocol_error_job crashed"})
	case "confirm_delete":
		var a struct{ Filename string }
		_ = json.Unmarshal(p.Arguments, &a)
		got, ok := t.ask(ctx, map[string]string{"confirm": "Delete " + a.Filename + "?"})
		if ok {
			t.finish("completed", text(fmt.Sprintf("delete %s: %s", a.Filename, got["confirm"])), nil)
		}
	case "multi_input":
		got, ok := t.ask(ctx, map[string]string{"first": "First name?", "second": "Second name?"})
		if ok {
			t.finish("completed", text(fmt.Sprintf("got %s and %s", got["first"], got["second"])), nil)
		}
	case "test_tool_with_task":
		raw, _ := json.Marshal(p.InputResponses["user_name"])
		var answer struct {
			Content struct{ Name string }
		}
		_ = json.Unmarshal(raw, &answer)
		t.finish("completed", text("Hello, "+answer.Content.Name+"!"), nil)
	}
}

// ask parks the task in input_required with one elicitation per key, and
// returns the answers (as JSON) once every key has one; ok is false when
// the task was cancelled meanwhile.
func (t *task) ask(ctx context.Context, messages map[string]string) (map[string]string, bool) {
	t.mu.Lock()
	for key, msg := range messages {
		t.asks[key], _ = json.Marshal(map[string]any{"method": "elicitation/create", "params": map[string]any{
			"mode": "form", "message": msg, "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{
				"confirm": map[string]any{"type": "boolean"}, "name": map[string]any{"type": "string"}}}}})
	}
	t.status, t.updated = "input_required", time.Now()
	got := map[string]string{}
	for {
		for key, a := range t.answers {
			if _, asked := t.asks[key]; asked {
				delete(t.asks, key)
				got[key] = string(a)
			}
			delete(t.answers, key)
		}
		if len(t.asks) == 0 {
			t.status, t.updated = "working", time.Now()
			t.mu.Unlock()
			return got, true
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, false
		}
		t.mu.Lock()
	}
}

// answer delivers a tasks/update's responses; keys nobody asked for are
// dropped.
func (t *task) answer(responses map[string]json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, r := range responses {
		t.answers[key] = r
	}
	close(t.wake)
	t.wake = make(chan struct{})
}

// finish ends the task with status, unless it has ended already.
func (t *task) finish(status string, res *mcp.CallToolResult, err *taskError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.status {
	case "completed", "failed", "cancelled":
		return
	}
	t.status, t.result, t.err, t.updated, t.asks = status, res, err, time.Now(), map[string]json.RawMessage{}
	t.cancel()
}

// detailed is the task as tasks/get reports it.
func (t *task) detailed() *taskResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &taskResult{ResultType: "complete", TaskID: t.id, Status: t.status,
		CreatedAt: t.created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		TTLMs: ttl.Milliseconds(), PollIntervalMs: pollInterval.Milliseconds(), Result: t.result, Error: t.err}
	if t.status == "input_required" {
		r.InputRequests = map[string]json.RawMessage{}
		for k, v := range t.asks {
			r.InputRequests[k] = v
		}
	}
	return r
}
