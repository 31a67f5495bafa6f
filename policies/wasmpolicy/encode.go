package wasmpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/openclaw-go/openclaw/internal/jsonw"
	"github.com/openclaw-go/openclaw/policies"
)

// appendCallInput appends the before_tool_call input for call to buf: the
// ToolCall fields as encoding/json names them (same omitempty rules)
// preceded by "abi":1, strings written by jsonw.AppendString (so a guest
// decodes the values encoding/json would have sent). It is written by
// hand because reflection cost more than the guest's whole decision.
// Arguments are validated and compacted; invalid arguments are an error.
func appendCallInput(buf []byte, call *policies.ToolCall) ([]byte, error) {
	buf = append(buf, `{"abi":1,"surface":`...)
	buf = jsonw.AppendString(buf, string(call.Surface))
	if call.SessionKey != "" {
		buf = append(buf, `,"session_key":`...)
		buf = jsonw.AppendString(buf, call.SessionKey)
	}
	buf = append(buf, `,"caller":{`...)
	sep := ""
	if call.Caller.Name != "" {
		buf = append(buf, `"name":`...)
		buf = jsonw.AppendString(buf, call.Caller.Name)
		sep = ","
	}
	if call.Caller.Version != "" {
		buf = append(buf, sep...)
		buf = append(buf, `"version":`...)
		buf = jsonw.AppendString(buf, call.Caller.Version)
	}
	buf = append(buf, '}')
	if call.Identity != nil {
		// Present only where a surface authenticated the caller: the
		// reflection cost is paid by those calls alone.
		id, err := json.Marshal(call.Identity)
		if err != nil {
			return buf, fmt.Errorf("identity: %w", err)
		}
		buf = append(buf, `,"identity":`...)
		buf = append(buf, id...)
	}
	buf = append(buf, `,"tool":{"name":`...)
	buf = jsonw.AppendString(buf, call.Tool.Name)
	if call.Tool.Server != "" {
		buf = append(buf, `,"server":`...)
		buf = jsonw.AppendString(buf, call.Tool.Server)
	}
	if call.Tool.RawName != "" {
		buf = append(buf, `,"original":`...)
		buf = jsonw.AppendString(buf, call.Tool.RawName)
	}
	buf = append(buf, '}')
	if pin := call.Pin; pin != nil {
		buf = append(buf, `,"pin":{"state":`...)
		buf = jsonw.AppendString(buf, pin.State)
		buf = append(buf, `,"digest":`...)
		buf = jsonw.AppendString(buf, pin.Digest)
		if pin.Pinned != "" {
			buf = append(buf, `,"pinned":`...)
			buf = jsonw.AppendString(buf, pin.Pinned)
		}
		buf = append(buf, '}')
	}
	if len(call.Arguments) > 0 {
		buf = append(buf, `,"arguments":`...)
		n := len(buf)
		var err error
		if buf, err = appendCompact(buf, call.Arguments); err != nil {
			return buf[:n], fmt.Errorf("arguments: %w", err)
		}
	}
	return append(buf, '}'), nil
}

// appendCompact appends src without insignificant space, after checking
// that it is one valid JSON value.
func appendCompact(dst, src []byte) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	err := json.Compact(b, src)
	return b.Bytes(), err
}

// inputPool recycles input buffers: CallBytes copies the input into guest
// memory, so a buffer is free again once it returns.
var inputPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
