package proxy

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/runtime"
)

// This file serves the MCP tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663) of the upstream servers that offer it: a task-augmented
// tools/call (a CreateTaskResult, after the same before_tool_call as any
// call), and tasks/get, tasks/update and tasks/cancel relayed to the server
// that created the task. The client sees the proxy's own taskId, sealed
// like a requestState (the proxy's key, shared by replicas): it names the
// server and the server's taskId, and is bound to the identity that
// created the task.

// CodeHeaderMismatch is the JSON-RPC error code of a request whose Mcp-Name
// (or Mcp-Method) header disagrees with its body (SEP-2243, HTTP 400).
const CodeHeaderMismatch = -32020

// taskRef is what the proxy's taskId holds.
type taskRef struct {
	// Server is the raw name of the server that created the task.
	Server string `json:"s"`
	// Upstream is the server's own taskId.
	Upstream string `json:"t"`
	// Owner is the identity that created it (stateOwner), "" for none:
	// only the same identity reaches it.
	Owner string `json:"o,omitempty"`
}

// taskDomain separates a taskId's HMAC from a requestState's, so that
// neither passes for the other.
const taskDomain = "openclaw-go task\x00"

// sealTask returns ref as a taskId: base64url(JSON) "." base64url(HMAC).
// A task does not expire here: its server keeps it for its ttlMs.
func (s *stateSealer) sealTask(ref taskRef) string {
	raw, _ := json.Marshal(ref) // strings always encode
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(taskDomain+payload))
}

// openTask returns what id holds when this proxy (or a replica sharing its
// key) issued it to owner; ok is false otherwise, as for an unknown task.
func (s *stateSealer) openTask(id, owner string) (ref taskRef, ok bool) {
	payload, sig, found := strings.Cut(id, ".")
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if !found || err != nil || !hmac.Equal(mac, s.mac(taskDomain+payload)) {
		return taskRef{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(raw, &ref) != nil || ref.Server == "" || ref.Owner != owner {
		return taskRef{}, false
	}
	return ref, true
}

// errUnknownTask is the answer for a taskId the caller may not reach: one
// this proxy did not issue, or issued to another identity (which it does
// not tell apart from unknown: -32602, as the extension answers an unknown
// taskId).
func errUnknownTask(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("proxy: unknown task %q", id)}
}

// taskID returns params.taskId, "" when absent or not a string.
func taskID(p *runtime.TaskParams) string {
	var id string
	if p == nil || json.Unmarshal(p.Fields["taskId"], &id) != nil {
		return ""
	}
	return id
}

// withTaskID returns fields (a tasks method's params or result) with its
// taskId member, when it has one, set to id: the client's become the
// server's, and back.
func withTaskID(fields map[string]json.RawMessage, id string) map[string]json.RawMessage {
	if _, has := fields["taskId"]; !has {
		return fields
	}
	out := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	out["taskId"], _ = json.Marshal(id)
	return out
}

// serveTasks registers tasks/get, tasks/update and tasks/cancel on the
// proxy's server; taskMiddleware answers them -32601 (method not found)
// while no connected server offers the extension.
func (p *Proxy) serveTasks() error {
	for _, method := range runtime.TaskMethods {
		err := mcp.AddReceivingCustomMethod(p.server, method, func(ctx context.Context, _ *mcp.ServerSession, params *runtime.TaskParams) (*runtime.TaskResult, error) {
			return p.relayTask(ctx, method, params)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// taskMiddleware gives the client of a task-augmented tools/call the
// proxy's taskId (also when the server that created the task connected
// after the proxy was made, and so is not in its capabilities), and checks
// a tasks method before relayTask: a server must offer the extension
// (else -32601), the client must declare it (else -32021, the extension's
// rule), and the caller's identity and capabilities go with the request.
func (p *Proxy) taskMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			res, err := next(ctx, method, req)
			cr, ok := res.(*mcp.CallToolResult)
			if err != nil || !ok {
				return res, err
			}
			task, ok := runtime.TaskCreated(cr)
			if !ok {
				return res, nil
			}
			created := &runtime.TaskResult{}
			if err := json.Unmarshal(task.Result, created); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "proxy: the server's CreateTaskResult: " + err.Error()}
			}
			var upstream string
			_ = json.Unmarshal(created.Fields["taskId"], &upstream)
			owner := stateOwner(identityFromExtra(req.GetExtra()))
			created.Fields = withTaskID(created.Fields, p.states.sealTask(taskRef{Server: task.Server, Upstream: upstream, Owner: owner}))
			created.Meta = nil // the proxy's own (go-sdk's serverInfo)
			return created, nil
		case "tasks/get", "tasks/update", "tasks/cancel":
			if p.sess.Capabilities().Extensions[runtime.TasksExtension] == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q not found: no server offers the %s extension", method, runtime.TasksExtension)}
			}
			caps := requestCapabilities(req)
			if caps.Extensions[runtime.TasksExtension] == nil {
				data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{
					"extensions": map[string]any{runtime.TasksExtension: map[string]any{}}}})
				return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
					Message: fmt.Sprintf("proxy: %s needs the %s extension, which the client did not declare", method, runtime.TasksExtension)}
			}
			ctx = runtime.WithIdentity(ctx, identityFromExtra(req.GetExtra()))
			ctx = runtime.WithClientCapabilities(ctx, caps)
		}
		return next(ctx, method, req)
	}
}

// requestCapabilities returns the capabilities the client of req declared
// (on 2026-07-28 in the request's _meta, else at initialize), never nil.
func requestCapabilities(req mcp.Request) *mcp.ClientCapabilities {
	if cr, ok := req.(interface {
		ClientCapabilities() *mcp.ClientCapabilities
	}); ok {
		if caps := cr.ClientCapabilities(); caps != nil {
			return caps
		}
	}
	return &mcp.ClientCapabilities{}
}

// relayTask sends method with params to the server of the task params
// names, with the server's taskId, and answers with the server's result
// (its taskId the proxy's, its _meta the proxy's). The task must be the
// caller's (taskMiddleware put the identity in ctx).
func (p *Proxy) relayTask(ctx context.Context, method string, params *runtime.TaskParams) (*runtime.TaskResult, error) {
	id := taskID(params)
	ref, ok := p.states.openTask(id, stateOwner(runtime.IdentityFrom(ctx)))
	if !ok {
		p.sess.RecordTaskRefused(ctx, method, "unknown task")
		return nil, errUnknownTask(id)
	}
	res, err := p.sess.TaskRequest(ctx, ref.Server, method, &runtime.TaskParams{Fields: withTaskID(params.Fields, ref.Upstream)})
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, je // the server's answer: -32602 for a task it no longer has
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	res.Fields, res.Meta = withTaskID(res.Fields, id), nil
	return res, nil
}

// taskNameMismatch reports the tasks method among msgs whose Mcp-Name header
// (header, present) is not its params.taskId, the routing header SEP-2663
// gives those methods; go-sdk checks Mcp-Name only for the methods it
// knows.
func taskNameMismatch(r *http.Request, msgs []jsonrpc.Message) (jsonrpc.ID, string, bool) {
	name, present := r.Header["Mcp-Name"]
	if !present || len(msgs) != 1 {
		return jsonrpc.ID{}, "", false
	}
	req, ok := msgs[0].(*jsonrpc.Request)
	if !ok {
		return jsonrpc.ID{}, "", false
	}
	switch req.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return jsonrpc.ID{}, "", false
	}
	var params struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(req.Params, &params)
	if strings.TrimSpace(name[0]) == params.TaskID {
		return jsonrpc.ID{}, "", false
	}
	return req.ID, req.Method, true
}
