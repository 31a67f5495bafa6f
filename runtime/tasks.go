package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/policies"
)

// This file relays the MCP tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663, on 2026-07-28) for a caller whose own client declared it (the
// proxy): a tools/call that a server answers with a CreateTaskResult, and
// tasks/get, tasks/update and tasks/cancel sent to the server that owns the
// task. go-sdk v1.8.0 knows neither: its CallToolResult has no task fields,
// so the CreateTaskResult is carried to the caller in the result's _meta
// (TaskCreated), read off the wire before go-sdk decodes it.

// TasksExtension is the tasks extension's key in capabilities.extensions
// and in a request's _meta client capabilities.
const TasksExtension = "io.modelcontextprotocol/tasks"

// taskMetaKey is the _meta key under which a tools/call result carries the
// server's CreateTaskResult to the caller ([TaskCreated]).
const taskMetaKey = "openclaw-go/createTaskResult"

// TaskMethods are the tasks extension's methods a caller relays with
// [Session.TaskRequest].
var TaskMethods = []string{"tasks/get", "tasks/update", "tasks/cancel"}

// CreatedTask is a task a server created in answer to a tools/call.
type CreatedTask struct {
	// Server is the raw name of the server that owns the task: its
	// tasks/get, tasks/update and tasks/cancel go there.
	Server string `json:"server"`
	// Result is the server's CreateTaskResult as it sent it (resultType
	// "task", taskId, status, createdAt, lastUpdatedAt, ttlMs, ...).
	Result json.RawMessage `json:"result"`
}

// TaskCreated returns the task res stands for, when the server answered the
// call with a CreateTaskResult; ok is false for any other result. A server
// creates tasks only for a call whose client capabilities
// ([WithClientCapabilities]) declare TasksExtension.
func TaskCreated(res *mcp.CallToolResult) (task *CreatedTask, ok bool) {
	if res == nil || res.Meta == nil {
		return nil, false
	}
	v, ok := res.Meta[taskMetaKey]
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	task = &CreatedTask{}
	if err := json.Unmarshal(raw, task); err != nil || task.Server == "" || len(task.Result) == 0 {
		return nil, false
	}
	return task, true
}

// declaresTasks reports whether the client capabilities in ctx
// (WithClientCapabilities) declare the tasks extension.
func declaresTasks(ctx context.Context) bool {
	caps, _ := ctx.Value(clientCapsKey{}).(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// taskFold returns the ListPage.Repair of a tools/call to server: a
// CreateTaskResult ("resultType":"task") becomes a result go-sdk decodes,
// empty but for the task in _meta (TaskCreated); any other result is kept.
func taskFold(server string) func(result []byte) []byte {
	return func(result []byte) []byte {
		if !bytes.Contains(result, []byte(`"task"`)) {
			return nil
		}
		var head struct {
			ResultType string `json:"resultType"`
		}
		if json.Unmarshal(result, &head) != nil || head.ResultType != "task" {
			return nil
		}
		folded, err := json.Marshal(map[string]any{
			"content": []any{},
			"_meta":   map[string]any{taskMetaKey: CreatedTask{Server: server, Result: json.RawMessage(result)}},
		})
		if err != nil {
			return nil
		}
		return folded
	}
}

// TaskParams are the params of a tasks method (go-sdk has no type for
// them), as JSON members: Fields holds every member but _meta, which is
// the embedded Meta.
type TaskParams struct {
	mcp.ParamsBase
	Fields map[string]json.RawMessage
}

// MarshalJSON writes Fields and _meta.
func (p *TaskParams) MarshalJSON() ([]byte, error) { return marshalFields(p.Fields, p.Meta) }

// UnmarshalJSON reads a JSON object into Fields and Meta.
func (p *TaskParams) UnmarshalJSON(b []byte) error { return unmarshalFields(b, &p.Fields, &p.Meta) }

// TaskResult is the result of a tasks method, as TaskParams are its params.
type TaskResult struct {
	mcp.ResultBase
	Fields map[string]json.RawMessage
}

// MarshalJSON writes Fields and _meta.
func (r *TaskResult) MarshalJSON() ([]byte, error) { return marshalFields(r.Fields, r.Meta) }

// UnmarshalJSON reads a JSON object into Fields and Meta.
func (r *TaskResult) UnmarshalJSON(b []byte) error { return unmarshalFields(b, &r.Fields, &r.Meta) }

// marshalFields writes fields, with meta as _meta when it has keys.
func marshalFields(fields map[string]json.RawMessage, meta mcp.Meta) ([]byte, error) {
	out := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		if k != "_meta" {
			out[k] = v
		}
	}
	if len(meta) > 0 {
		out["_meta"] = meta
	}
	return json.Marshal(out)
}

// unmarshalFields reads b, a JSON object, into fields (but _meta) and meta.
func unmarshalFields(b []byte, fields *map[string]json.RawMessage, meta *mcp.Meta) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	if all == nil {
		return fmt.Errorf("runtime: a tasks method's params or result must be a JSON object, not null")
	}
	*meta = nil
	if raw, ok := all["_meta"]; ok {
		if err := json.Unmarshal(raw, meta); err != nil {
			return fmt.Errorf("runtime: _meta: %w", err)
		}
		delete(all, "_meta")
	}
	*fields = all
	return nil
}

// TaskAuditHook is the Hook of the audit record of a tasks method
// (TaskRequest, or a caller's refusal: RecordTaskRefused).
const TaskAuditHook policies.Hook = "tasks"

// TaskModule names the relay of the tasks methods in audit records.
const TaskModule = "host:tasks"

// recordTask writes the audit record of method for server's task: who
// asked (ctx's identity, the session key), decision allow with the
// server's error, if any, or block with reason. Arguments never appear.
func (s *Session) recordTask(ctx context.Context, method, server, task string, decision policies.Decision, reason string, err error) {
	if s.opts.Audit == nil {
		return
	}
	r := policies.AuditRecord{Time: time.Now().UTC(), Hook: TaskAuditHook, Surface: s.surface(), SessionKey: s.opts.SessionKey,
		Caller: s.caller(ctx).Name, Server: server, Method: method, Task: task, Module: TaskModule, Mode: policies.Enforce,
		Decision: string(decision), Reason: reason}
	r.SetIdentity(IdentityFrom(ctx))
	if err != nil {
		r.Error = err.Error()
	}
	s.opts.Audit.Record(r)
}

// RecordTaskRefused writes the audit record of a tasks method the caller
// refused before TaskRequest (a taskId that is not the caller's to reach):
// decision block with reason, who asked from ctx, no server or task.
func (s *Session) RecordTaskRefused(ctx context.Context, method, reason string) {
	s.recordTask(ctx, method, "", "", policies.Block, reason, nil)
}

// TaskRequest sends method (one of TaskMethods) with params (the server's
// own taskId in its Fields; its Meta is not sent) to the server named
// server, the one that created the task ([CreatedTask.Server]), and
// returns the result as the server sent it. The request's _meta carries
// the client capabilities in ctx (WithClientCapabilities) and, on
// 2026-07-28, the protocol version. The error is a *ServerError (the
// server's JSON-RPC error answer unwrapped by errors.As), ErrNotConnected
// inside one, or ErrClosed.
// Each request, answered or not, writes an audit record (TaskAuditHook)
// naming who asked, the server, the method and the server's taskId.
func (s *Session) TaskRequest(ctx context.Context, server, method string, params *TaskParams) (res *TaskResult, err error) {
	var task string
	if params != nil {
		_ = json.Unmarshal(params.Fields["taskId"], &task)
	}
	defer func() {
		s.recordTask(ctx, method, server, task, policies.Allow, "", err)
		s.taskEnded(server, task, method, res, err)
	}()
	done, err := s.passUse(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	c := s.set.Load().byKey[server]
	if c == nil {
		return nil, &ServerError{Server: server, Op: method, Err: ErrNotConnected}
	}
	up := &TaskParams{Fields: params.Fields}
	if caps, ok := ctx.Value(clientCapsKey{}).(map[string]any); ok {
		up.Meta = mcp.Meta{mcp.MetaKeyClientCapabilities: caps}
	}
	release, err := c.holdFor(ctx, method)
	if err != nil {
		return nil, err
	}
	defer release()
	cs, _ := c.open()
	if cs == nil {
		return nil, &ServerError{Server: c.cfg.Name, Op: method, Err: ErrNotConnected}
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout())
	defer cancel()
	res, err = mcp.CallCustomMethod[*TaskParams, *TaskResult](rctx, cs, method, up)
	if err != nil {
		if cerr := s.closedErr(); cerr != nil {
			return nil, cerr
		}
		return nil, &ServerError{Server: c.cfg.Name, Op: method, Err: redactErr(c.red(), err)}
	}
	return res, nil
}

// taskKey names a task: the raw name of its server and the server's
// taskId.
type taskKey struct{ server, task string }

// taskSlot is the limiter slot (Options.Limiter) a task-augmented call
// holds while its task runs.
type taskSlot struct {
	release func()
	timer   *time.Timer
}

// terminalTask reports whether status is one a task does not leave.
func terminalTask(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// holdTaskSlot keeps release, the limiter slot of the call that created
// task, until the task ends: a tasks result with a terminal status, a
// tasks/cancel the server acknowledged, a -32602 (the server no longer
// has the task), the task's ttlMs (bound, when absent, the server's
// request timeout: what a synchronous call may hold a slot for), or
// Close. It returns false, keeping nothing, when the CreateTaskResult
// names no taskId or a terminal status already.
func (s *Session) holdTaskSlot(task *CreatedTask, bound time.Duration, release func()) bool {
	var created struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
		TTLMs  int64  `json:"ttlMs"`
	}
	if json.Unmarshal(task.Result, &created) != nil || created.TaskID == "" || terminalTask(created.Status) {
		return false
	}
	if created.TTLMs > 0 {
		bound = time.Duration(created.TTLMs) * time.Millisecond
	}
	key := taskKey{task.Server, created.TaskID}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return false
	}
	s.taskMu.Lock()
	defer s.taskMu.Unlock()
	if s.taskSlots == nil {
		s.taskSlots = map[taskKey]*taskSlot{}
	}
	if old := s.taskSlots[key]; old != nil { // a server reusing a taskId: the older task is gone
		old.timer.Stop()
		old.release()
	}
	s.taskSlots[key] = &taskSlot{release: release, timer: time.AfterFunc(bound, func() { s.releaseTaskSlot(key) })}
	return true
}

// releaseTaskSlot gives back the limiter slot of the task key names, if
// it holds one.
func (s *Session) releaseTaskSlot(key taskKey) {
	s.taskMu.Lock()
	slot := s.taskSlots[key]
	delete(s.taskSlots, key)
	s.taskMu.Unlock()
	if slot != nil {
		slot.timer.Stop()
		slot.release()
	}
}

// releaseTaskSlots gives back every slot tasks hold (Close).
func (s *Session) releaseTaskSlots() {
	s.taskMu.Lock()
	slots := s.taskSlots
	s.taskSlots = nil
	s.taskMu.Unlock()
	for _, slot := range slots {
		slot.timer.Stop()
		slot.release()
	}
}

// taskEnded gives back the slot of server's task when the answer to
// method shows it ended: a terminal status, a tasks/cancel the server
// acknowledged, or the server's -32602 (it no longer has the task).
func (s *Session) taskEnded(server, task, method string, res *TaskResult, err error) {
	if task == "" {
		return
	}
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
			s.releaseTaskSlot(taskKey{server, task})
		}
		return
	}
	var status string
	if res != nil {
		_ = json.Unmarshal(res.Fields["status"], &status)
	}
	if terminalTask(status) || method == "tasks/cancel" {
		s.releaseTaskSlot(taskKey{server, task})
	}
}

// addTaskMethods registers TaskMethods on client, for TaskRequest.
func addTaskMethods(client *mcp.Client) {
	for _, m := range TaskMethods {
		if err := mcp.AddSendingCustomMethod[*TaskParams, *TaskResult](client, m); err != nil {
			panic(err) // only a standard method's name fails, and these are not
		}
	}
}
