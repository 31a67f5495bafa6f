package transport

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sjson "github.com/segmentio/encoding/json"

	"github.com/openclaw-go/openclaw/internal/jsonw"
)

// decodeDepth is the nesting go-sdk's decoder accepts in a message.
const decodeDepth = 1000

// wireMessage is a JSON-RPC message as decoded: every field of a request
// and of a response. Method stays raw so that a "method" key with the
// value "" still makes a request.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id,omitempty"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// decodeParse are the flags of go-sdk's decoder: member names match
// exactly (encoding/json would also take "Method" for "method").
const decodeParse = sjson.DontMatchCaseInsensitiveStructFields

// decodeMessage decodes msg, exactly one JSON value, into the message
// jsonrpc.DecodeMessage returns for it, with the same library and flags
// (segmentio/encoding, names matched exactly, nesting up to 1000) and the
// same refusals, but without the 32 KiB read buffer a fresh
// json.Decoder takes for each of the two values it decodes: a request
// costs its fields alone.
func decodeMessage(msg []byte) (jsonrpc.Message, error) {
	if _, err := jsonw.ScanValue(msg, jsonw.SkipSpace(msg, 0), decodeDepth); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	var w wireMessage
	if _, err := sjson.Parse(msg, &w, decodeParse); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.JSONRPC != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.JSONRPC, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 {
		var method string
		if _, err := sjson.Parse(w.Method, &method, decodeParse); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errNoMethodNoID
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil { // a nil *jsonrpc.Error would be a non-nil error
		resp.Error = w.Error
	}
	return resp, nil
}

// errNoMethodNoID refuses an object that is neither a request (no
// "method") nor a response (no valid "id"), as go-sdk does.
var errNoMethodNoID error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}
