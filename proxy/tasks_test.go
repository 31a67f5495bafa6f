package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openclaw-go/openclaw/runtime"
)

// TestTaskIDSealed: a taskId the proxy hands out opens for the identity it
// was issued to, with a sealer sharing the key (a replica), and for no one
// else; an altered one, one sealed under another key, and a requestState
// sealed under the same key do not open as a taskId.
func TestTaskIDSealed(t *testing.T) {
	key := []byte(strings.Repeat("k", MinStateKeyBytes))
	s, _ := newStateSealer(key)
	replica, _ := newStateSealer(key)
	other, _ := newStateSealer(nil)
	ref := taskRef{Server: "jobs", Upstream: "task-7", Owner: "tokens-file\x00alice"}
	id := s.sealTask(ref)
	if got, ok := replica.openTask(id, ref.Owner); !ok || got != ref {
		t.Fatalf("the replica opened %q as %+v, %v; want %+v", id, got, ok, ref)
	}
	payload, sig, _ := strings.Cut(id, ".")
	state := s.seal(requestState{Method: "tools/call", Name: "x"})
	for name, tc := range map[string]struct{ id, owner string }{
		"another identity":    {id, "tokens-file\x00bob"},
		"no identity":         {id, ""},
		"altered":             {payload + "x." + sig, ref.Owner},
		"another key":         {other.sealTask(ref), ref.Owner},
		"the server's own id": {"task-7", ref.Owner},
		"a requestState":      {state, ""},
		"empty":               {"", ref.Owner},
	} {
		if got, ok := s.openTask(tc.id, tc.owner); ok {
			t.Errorf("%s: %q opened as %+v, want it refused", name, tc.id, got)
		}
	}
	if _, err := s.open(id, ref.Owner, "tools/call", "x", nil); err == nil {
		t.Error("a taskId opened as a requestState, want it refused")
	}
}

// TestTasksMethodsWithoutServer: in front of servers none of which offers
// the tasks extension, the proxy does not offer it and answers tasks/get
// -32601 (method not found), whatever the client declares.
func TestTasksMethodsWithoutServer(t *testing.T) {
	t.Parallel()
	client := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Extensions: map[string]any{runtime.TasksExtension: map[string]any{}}},
	})
	if err := mcp.AddSendingCustomMethod[*runtime.TaskParams, *runtime.TaskResult](client, "tasks/get"); err != nil {
		t.Fatal(err)
	}
	cs := openStack(t).connectClient(t, client)
	if ext := cs.InitializeResult().Capabilities.Extensions; ext[runtime.TasksExtension] != nil {
		t.Errorf("capabilities.extensions = %v, want no tasks extension", ext)
	}
	id, _ := json.Marshal("task-1")
	_, err := mcp.CallCustomMethod[*runtime.TaskParams, *runtime.TaskResult](context.Background(), cs, "tasks/get",
		&runtime.TaskParams{Fields: map[string]json.RawMessage{"taskId": id}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("tasks/get = %v, want -32601", err)
	}
}
